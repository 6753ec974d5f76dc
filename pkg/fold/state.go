// Package fold turns a sequence of events into person state, with the
// rules of the public service this project mirrors (see docs/events.md).
//
// A Folder keeps person state in memory. Events are applied in stream
// order; each one carries its stream sequence, which becomes the version of
// every row it changes. Rows are handed out once per batch by Flush, so a
// person touched by many events of a batch is written once.
//
// Versions are stream sequences, so the fold is deterministic: replaying the
// stream gives the same rows. They also make the fold safe after a crash:
// state loaded from the store may already contain the effect of events that
// are delivered again. An event never changes a person or a distinct id
// whose version is at or above the event's sequence (the "guard"), so a
// redelivered event leaves state as it is.
package fold

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/proptime"
)

// PersonRow is one version of a person, as stored.
type PersonRow struct {
	ProjectID  uint64
	ID         uint64
	UUID       uuid.UUID
	Properties map[string]any
	// PropertiesJSON is Properties as the store keeps them (the JSON
	// object, package propjson). A Loader may give it alone (Properties
	// nil): the Folder decodes it only when an event needs the map.
	// Flush gives both, the JSON encoded from the map.
	PropertiesJSON string
	// PropertyTimes are the moments recorded for properties by
	// timestamp-aware writes (package proptime), in its stored form: ""
	// for a person that never saw one. Between Flushes the Folder may
	// hold them decoded (personState.times); Flush gives the current ones.
	PropertyTimes string
	CreatedAt     time.Time
	IsIdentified  bool
	IsDeleted     bool
	Version       uint64
	// DistinctIDs are the ids the person owns, oldest first. A person
	// deleted by a merge keeps the list it had when it was merged away.
	DistinctIDs []string
	// EmailIndexed, set by Flush, says the row the store holds for this
	// person has the same email property (or neither has one), so the
	// email's index rows (person_emails, person_email_grams: supersets of
	// the emails persons have, written before the persons rows) are
	// already written. Not a column.
	EmailIndexed bool
}

// DistinctIDRow is one version of a distinct id's owner, as stored.
//
// Prev is the owner the id had before the batch that wrote this row. A
// crash can leave a batch's distinct id rows written without the batch
// being committed; a Folder restarting from the store reads such rows
// (their version is above the last committed sequence) as Prev, so it folds
// the batch again from exactly the state the batch started from (or, when
// the batch comes back as several smaller ones, as refold.go says).
type DistinctIDRow struct {
	ProjectID  uint64
	DistinctID string
	PersonID   uint64
	IsDeleted  bool
	Version    uint64
	Prev       Owner
	// FirstSeq is the stream sequence of the event that first gave the
	// id an owner (0: unknown, for rows written before it was kept). It
	// never changes afterwards, tombstones and later owners included.
	FirstSeq uint64
}

// Overridden reports whether the row must also be written as an override
// (person_distinct_id_overrides): whether events of the id may carry, in
// events.person_id, another person than this row's owner, or a person who
// no longer owns it. An event is attributed to the owner of its distinct
// id as the event left it, so until the id's first owner changes every
// event of it carries that owner, and the row written by the first
// assignment (version = FirstSeq) needs no override. Every later row, a
// tombstone or a new owner, does; so does every row of unknown FirstSeq.
//
// The rule reads the row alone, so it decides the same on a refold after
// a crash (FirstSeq survives the prev_* view, committedView) and on a
// replay; and once true for an id it stays true (versions only grow).
func (r DistinctIDRow) Overridden() bool { return r.IsDeleted || r.Version != r.FirstSeq }

// Owner is a distinct id's owner at some version; the zero Owner means the
// id had no row.
type Owner struct {
	PersonID  uint64
	IsDeleted bool
	Version   uint64
}

func (r DistinctIDRow) owner() Owner {
	return Owner{PersonID: r.PersonID, IsDeleted: r.IsDeleted, Version: r.Version}
}

// Loader reads the newest stored rows. Missing entries are simply absent
// from the returned maps.
type Loader interface {
	LoadDistinctIDs(ctx context.Context, projectID uint64, ids []string) (map[string]DistinctIDRow, error)
	LoadPersons(ctx context.Context, projectID uint64, ids []uint64) (map[uint64]PersonRow, error)
}

type personKey struct {
	project uint64
	id      uint64
}

type didKey struct {
	project uint64
	id      string
}

// personState is a person held in memory.
//
// Its properties are kept in their stored form between batches: a
// string is one pointer to a block without pointers, where a decoded map
// is a tree of them that every GC cycle marks, and the cache holds
// hundreds of thousands of persons (the ingester memory figure, docs/performance.md). Exactly one
// form is current: row.Properties when not nil (decoded by Folder.props
// for an event that reads them, or made by this batch), else
// row.PropertiesJSON. Flush encodes the changed ones and drops every
// decoded map (props.go).
type personState struct {
	row   PersonRow
	dirty bool
	// stored is the created_at of the row the store holds (as loaded or
	// last flushed; zero for a person not written yet): a flush that
	// moves it hands out the old key (Batch.Rekeyed).
	stored time.Time
	used   uint64 // the batch (Folder.gen) that last used it, for eviction
	// gone: no longer the cached state of its person (evicted, dropped
	// by Reset or replaced), so a didState's owner pointer to it is stale.
	gone bool
	// emailSeen: the stored properties were decoded since the last Flush
	// (props), and email / emailHad were their email property then, the
	// one the store's row has (Flush's EmailIndexed).
	emailSeen, emailHad bool
	email               any
	// times are row.PropertyTimes decoded, current while timesRead
	// (Folder.times); Flush encodes them again.
	times     proptime.Times
	timesRead bool
}

type didState struct {
	row DistinctIDRow
	// base is the owner before the current batch changed it: written as
	// Prev with the row.
	base  Owner
	dirty bool
	used  uint64
	// owner caches the cached state of row.PersonID, so folding an event
	// costs no map lookup for its person (a cache miss over hundreds of
	// thousands of entries). Valid only while owner is not gone and its
	// id is row.PersonID (Folder.ownerOf); eviction clears it.
	owner *personState
}

// Warning is an ingestion warning: something in an event that was skipped
// on purpose, reported to the project (for example a refused merge).
type Warning struct {
	ProjectID uint64
	Seq       uint64
	Type      string
	Details   map[string]any
	Timestamp time.Time
}

// Batch is what Flush hands out: the newest version of every person and
// distinct id changed since the previous Flush, and the warnings raised.
//
// Activity entries and deletion requests exist only for changes that were
// applied in this fold (not ones a redelivery finds already applied), so
// they must be written before the person rows: see docs/architecture.md.
type Batch struct {
	Persons          []PersonRow
	DistinctIDs      []DistinctIDRow
	Warnings         []Warning
	Activity         []activity.Entry
	DeletionRequests []DeletionRequest
	// EventDeletions are the filtered deletions of events queued
	// (eventdeletions.go), written with DeletionRequests.
	EventDeletions []EventDeletionRequest
	// CohortMembers are the static cohort membership changes
	// (cohorts.go), in log order.
	CohortMembers []CohortMember
	// Rekeyed are the persons whose created_at this batch moved (a merge
	// with an older person), with the created_at they had in the store:
	// the list's ordering table keys persons by created_at, and the old
	// key must be tombstoned (chstore, person_order).
	Rekeyed []Rekey
}

// Rekey is a person's previous created_at, replaced at Version.
type Rekey struct {
	ProjectID uint64
	ID        uint64
	CreatedAt time.Time
	Version   uint64
}

// DeletionRequest asks for the events of a person (deleted, or kept with
// $delete_person_events) to be deleted: those with a stream sequence up to
// RequestSeq.
type DeletionRequest struct {
	ProjectID   uint64
	PersonID    uint64
	PersonUUID  uuid.UUID
	RequestSeq  uint64
	RequestedAt time.Time
	// Version is the row's version (RequestVersion of RequestSeq).
	Version uint64
}

// RequestVersion is the version of a deletion request made at stream
// sequence seq. The table keeps one row per person, and the deleter
// writes each later state of a request as the current version + 1 (its
// nanosecond clock stays below these), so a person's later request (a
// deletion after a kept person's events were deleted) must be above every
// state of an earlier one: 2^62 + seq × 2^10 leaves 1023 deleter writes per
// request. Deterministic, so a replay writes the same rows.
func RequestVersion(seq uint64) uint64 { return 1<<62 + seq<<10 }
