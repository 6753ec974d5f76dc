package chstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/propjson"
)

// LoadDistinctIDs implements fold.Loader (distinctids.Store.Load).
func (s *Store) LoadDistinctIDs(ctx context.Context, projectID uint64, ids []string) (map[string]fold.DistinctIDRow, error) {
	return s.distinctIDs.Load(ctx, projectID, ids)
}

// LoadPersons implements fold.Loader.
func (s *Store) LoadPersons(ctx context.Context, projectID uint64, ids []uint64) (map[uint64]fold.PersonRow, error) {
	out := make(map[uint64]fold.PersonRow, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, err := statement.KeyTable(ctx, "UInt64", ids)
	if err != nil {
		return nil, err
	}
	err = s.scanPersons(ctx, " AND id IN (SELECT key FROM keys)", projectID, func(r fold.PersonRow) { out[r.ID] = r })
	return out, err
}

// LoadProject implements fold.ProjectLoader: it reads each table's
// newest rows of the project in one pass, and stops, reporting false,
// at the first row past limit (the rows handed out until then are
// rows like any other).
func (s *Store) LoadProject(ctx context.Context, projectID uint64, limit int, did func(fold.DistinctIDRow), person func(fold.PersonRow)) (bool, error) {
	scans := []struct {
		table string
		read  func(ctx context.Context, keep func() bool) error
	}{
		{"distinct ids", func(ctx context.Context, keep func() bool) error {
			return s.distinctIDs.LoadProject(ctx, projectID, func(r fold.DistinctIDRow) {
				if keep() {
					did(r)
				}
			})
		}},
		{"persons", func(ctx context.Context, keep func() bool) error {
			return s.scanPersons(statement.Loader(ctx), "", projectID, func(r fold.PersonRow) {
				if keep() {
					person(r)
				}
			})
		}},
	}
	for _, sc := range scans {
		ctx, cancel := context.WithCancel(ctx)
		n := 0
		err := sc.read(ctx, func() bool {
			if n++; limit > 0 && n > limit {
				cancel() // ends the statement
				return false
			}
			return true
		})
		cancel()
		if limit > 0 && n > limit {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read the project's %s: %w", sc.table, err)
		}
	}
	return true, nil
}

// scanPersons calls fn with the newest row of each of the project's
// persons that cond (an AND clause, "" for all) selects. The properties
// stay as stored: the fold decodes them only for a person an event
// changes (docs/architecture.md).
func (s *Store) scanPersons(ctx context.Context, cond string, projectID uint64, fn func(fold.PersonRow)) error {
	rows, err := s.conn.Query(ctx, `SELECT id, uuid, properties, property_times, distinct_ids, created_at, is_identified, is_deleted, version
		FROM persons FINAL WHERE project_id = ?`+cond, projectID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r := fold.PersonRow{ProjectID: projectID}
		var ident, del uint8
		if err := rows.Scan(&r.ID, &r.UUID, &r.PropertiesJSON, &r.PropertyTimes, &r.DistinctIDs, &r.CreatedAt, &ident, &del, &r.Version); err != nil {
			return err
		}
		r.IsIdentified, r.IsDeleted = ident == 1, del == 1
		fn(r)
	}
	return rows.Err()
}

// BatchMarker is the commit record of one ingester batch.
type BatchMarker struct {
	Consumer              string
	FirstSeq, LastSeq     uint64
	Events, Persons, DIDs int
	// Mine reports whether a project's messages are the consumer's (its
	// partition's); nil: every project. Rows of other partitions' projects
	// above the commit point are their live work, not a crash of this
	// consumer's, so its live counts never recount them (livecount.go).
	Mine func(project uint64) bool
	// Lead picks the persons whose rows are written first, before the
	// rest of the batch, and LeadDone is called once they landed: the
	// write lane's persons, so an API write waits for its own rows, not
	// for the whole batch's (splitLead says when a batch has no lead).
	// An error from LeadDone ends the write there (tests). nil: none.
	Lead     func(project, id uint64) bool
	LeadDone func() error
}

// WriteBatch writes one folded batch in the order that makes a crash at
// any point recoverable: events, activity entries, deletion requests and
// static cohort members
// (the last two exist only when the fold applied a change, so they precede
// the person rows that show it applied), then persons, then distinct ids
// with their overrides and warnings, and last the marker that commits the
// batch.
func (s *Store) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m BatchMarker) error {
	// The live counts are read as of the commit point before the rows
	// and written after them, before the marker (livecount.go).
	counts := s.counts.of(m.Consumer)
	plan, err := counts.begin(ctx, s, m.FirstSeq-1, b, m.Mine)
	if err != nil {
		return fmt.Errorf("live counts: %w", err)
	}
	if lead, rest, ok := splitLead(b, m.Lead); ok && m.LeadDone != nil {
		// A batch of its own to writeRows: no events, ids or rekeys.
		if err := s.writeRows(ctx, nil, lead, counts); err != nil {
			return fmt.Errorf("lead: %w", err)
		}
		if err := m.LeadDone(); err != nil {
			return err
		}
		b = rest
	}
	if err := s.writeRows(ctx, events, b, counts); err != nil {
		return err
	}
	if err := counts.finish(ctx, s, plan, m.LastSeq); err != nil {
		return fmt.Errorf("write live counts: %w", err)
	}
	err = s.insertRow(ctx, `INSERT INTO ingest_batches (consumer, first_seq, last_seq, events, persons, distinct_ids, flushed_at)`, m.Consumer, m.FirstSeq, m.LastSeq, uint32(m.Events), uint32(len(b.Persons)), uint32(len(b.DistinctIDs)), time.Now().UTC())
	if err != nil {
		return fmt.Errorf("write batch marker: %w", err)
	}
	counts.commit(plan, m.LastSeq)
	return nil
}

// WriteRows writes a batch's rows without committing it (no marker). Whose
// batch is not said, so every consumer's counts look for rows above their
// commit point before their next batch (tests write crashed batches so).
func (s *Store) WriteRows(ctx context.Context, events []eventstore.Row, b fold.Batch) error {
	return s.writeRows(ctx, events, b, nil)
}

// writeRows writes the rows of a batch of the consumer counts belongs to
// (nil: unknown).
func (s *Store) writeRows(ctx context.Context, events []eventstore.Row, b fold.Batch, counts *liveCounts) error {
	// Rows above the commit point until a marker says otherwise.
	if counts != nil {
		counts.written()
	} else {
		s.counts.written()
	}
	// Inserts within a stage are independent and run together (each costs
	// a round trip and a part); the stages keep the order recovery needs.
	// The persons' tables go in pieces (personPieces): the first with
	// the batch-wide inserts, the others after it, each stage whole
	// before the next.
	pieces := personPieces(b.Persons)
	first := fold.Batch{Persons: pieces[0], Rekeyed: b.Rekeyed}
	err := concurrently(
		func() error { return wrap("write events", s.events.Write(ctx, events)) },
		func() error { return wrap("write activity", activity.New(s.conn).Write(ctx, b.Activity...)) },
		func() error { return wrap("write deletion requests", s.writeDeletionRequests(ctx, b.DeletionRequests)) },
		func() error {
			return wrap("write event deletion requests", s.writeEventDeletions(ctx, b.EventDeletions))
		},
		func() error { return wrap("write cohort members", s.writeCohortMembers(ctx, b.CohortMembers)) },
		// Before the persons too: values/ finds the buckets of persons
		// rows above a watermark here, so a row here may come first.
		// One row a bucket: whole.
		func() error { return wrap("write person buckets", s.writePersonBuckets(ctx, b.Persons)) },
		func() error { return s.writePersonKeys(ctx, first) },
	)
	if err != nil {
		return err
	}
	for _, piece := range pieces[1:] {
		if err := s.writePersonKeys(ctx, fold.Batch{Persons: piece}); err != nil {
			return err
		}
	}
	for _, piece := range pieces {
		if err := s.writePersons(ctx, piece); err != nil {
			return fmt.Errorf("write persons: %w", err)
		}
	}
	return concurrently(
		func() error { return wrap("write distinct ids", s.distinctIDs.Write(ctx, b.DistinctIDs)) },
		func() error {
			return wrap("write distinct id overrides", s.distinctIDs.WriteOverrides(ctx, b.DistinctIDs))
		},
		func() error { return wrap("write warnings", s.writeWarnings(ctx, b.Warnings)) },
	)
}

// A batch's lead (BatchMarker.Lead): some persons' rows written ahead of
// the rest of the batch, each stage of theirs in order: the batch's
// activity entries, deletion requests and cohort members (small, and
// they must precede any person row showing their change applied), the
// lead's person_order keys, emails, grams and buckets, then the lead's
// persons rows. Then the whole batch is written as usual, without those.
// To a crash that is the batch's write stopped with some persons rows
// landed, which recovery already handles (docs/architecture.md, "Crash
// safety": the guard recognises a change already applied), provided
// nothing else of the batch is needed to read a lead person right:
// so there is no lead when a lead person was deleted (its ids' rows and
// the live counts come later), got a new created_at (its old key's
// tombstone comes later), or gained or lost a distinct id in the batch (a
// merge: the refold must find the source's deletion with the target's
// row, and the ids' rows come later).

// splitLead splits b into the persons pick chooses, with the batch's
// small first-stage tables, and the rest; ok is false when there is no
// lead (none chosen, or a chosen person is one of the cases above).
func splitLead(b fold.Batch, pick func(project, id uint64) bool) (lead, rest fold.Batch, ok bool) {
	if pick == nil {
		return lead, rest, false
	}
	var first, others []fold.PersonRow
	for _, p := range b.Persons {
		if !pick(p.ProjectID, p.ID) {
			others = append(others, p)
			continue
		}
		if p.IsDeleted {
			return lead, rest, false
		}
		first = append(first, p)
	}
	if len(first) == 0 {
		return lead, rest, false
	}
	for _, r := range b.Rekeyed {
		if pick(r.ProjectID, r.ID) {
			return lead, rest, false
		}
	}
	for _, d := range b.DistinctIDs {
		if pick(d.ProjectID, d.PersonID) || d.Prev.PersonID != 0 && pick(d.ProjectID, d.Prev.PersonID) {
			return lead, rest, false
		}
	}
	lead = fold.Batch{Persons: first, Activity: b.Activity, DeletionRequests: b.DeletionRequests, EventDeletions: b.EventDeletions, CohortMembers: b.CohortMembers}
	rest = b
	rest.Persons, rest.Activity, rest.DeletionRequests, rest.EventDeletions, rest.CohortMembers = others, nil, nil, nil, nil
	return lead, rest, true
}

// piecePersons bounds the persons of one insert (a variable for tests).
// A batch grown with the backlog may write 200,000 persons or more: in
// one statement, their grams alone were some 4M rows, encoded twice in
// memory (the columns, the driver's buffers; the ingester's peak RSS 1.9
// GiB in the fill) and past the driver's read timeout on 18.16. In pieces, a commit's memory
// is a piece's, whatever the batch. A crash between pieces leaves a stage
// in part, which recovery handles as any interrupted stage.
var piecePersons = 16384

// personPieces cuts persons into pieces of at most piecePersons (one,
// possibly empty, at least).
func personPieces(persons []fold.PersonRow) [][]fold.PersonRow {
	if len(persons) <= piecePersons {
		return [][]fold.PersonRow{persons}
	}
	var out [][]fold.PersonRow
	for len(persons) > 0 {
		n := min(len(persons), piecePersons)
		out = append(out, persons[:n])
		persons = persons[n:]
	}
	return out
}

// writePersonKeys writes the rows that must precede persons rows and
// index them: the list's keys (before the persons: the list reads persons
// by the keys this table gives, so it may run ahead of them, never
// behind), the emails and their grams.
func (s *Store) writePersonKeys(ctx context.Context, b fold.Batch) error {
	return concurrently(
		func() error { return wrap("write person order", s.WritePersonOrder(ctx, b)) },
		func() error { return wrap("write person emails", s.search.WriteEmails(ctx, b.Persons)) },
		func() error { return wrap("write person email grams", s.search.WriteGrams(ctx, b.Persons)) },
	)
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// concurrently runs fns at once and returns their errors joined.
func concurrently(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LastCommitted returns the last sequence a consumer committed (0: none).
func (s *Store) LastCommitted(ctx context.Context, consumer string) (uint64, error) {
	var seq uint64
	err := s.conn.QueryRow(ctx, "SELECT max(last_seq) FROM ingest_batches WHERE consumer = ?", consumer).Scan(&seq)
	return seq, err
}

// writePersons appends column by column, as eventstore.Store.Write does.
func (s *Store) writePersons(ctx context.Context, persons []fold.PersonRow) error {
	if len(persons) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO persons (project_id, id, uuid, properties, property_keys, property_values, distinct_ids, created_at, is_identified, is_deleted, version, property_times)`)
	if err != nil {
		return err
	}
	n := len(persons)
	var (
		projects, ids, versions = make([]uint64, n), make([]uint64, n), make([]uint64, n)
		uuids                   = make([]uuid.UUID, n)
		props, times            = make([]string, n), make([]string, n)
		keys, values, dids      = make([][]string, n), make([][]string, n), make([][]string, n)
		created                 = make([]time.Time, n)
		identified, deleted     = make([]uint8, n), make([]uint8, n)
	)
	var buf []byte
	size := 0
	for i, p := range persons {
		if props[i], keys[i], values[i], buf, err = encodeProps(buf, p); err != nil {
			batch.Abort()
			return fmt.Errorf("person %d: %w", p.ID, err)
		}
		times[i] = p.PropertyTimes
		dids[i] = p.DistinctIDs
		if dids[i] == nil {
			dids[i] = []string{}
		}
		projects[i], ids[i], uuids[i], created[i], versions[i] = p.ProjectID, p.ID, p.UUID, p.CreatedAt, p.Version
		identified[i], deleted[i] = statement.BoolByte(p.IsIdentified), statement.BoolByte(p.IsDeleted)
		size += len(props[i])
	}
	statement.ReserveStrings(batch, 3, n, size) // properties
	// In the statement's column order.
	for i, col := range []any{projects, ids, uuids, props, keys, values, dids, created, identified, deleted, versions, times} {
		if err := batch.Column(i).Append(col); err != nil {
			batch.Abort()
			return statement.Classify(err)
		}
	}
	return batch.Send()
}

func (s *Store) writeWarnings(ctx context.Context, warnings []fold.Warning) error {
	if len(warnings) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO ingestion_warnings (project_id, seq, type, details, timestamp)`)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		details, err := json.Marshal(w.Details)
		if err != nil {
			batch.Abort()
			return err
		}
		if err := batch.Append(w.ProjectID, w.Seq, w.Type, string(details), w.Timestamp); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

func (s *Store) writeDeletionRequests(ctx context.Context, reqs []fold.DeletionRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_deletion_requests (project_id, person_id, person_uuid, request_seq, status, requested_at, started_at, verified_at, events_deleted, version)`)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := batch.Append(r.ProjectID, r.PersonID, r.PersonUUID, r.RequestSeq, "pending", r.RequestedAt.UTC(),
			time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC(), uint64(0), r.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// writeEventDeletions writes the pending rows of filtered deletions
// (schema 0021).
func (s *Store) writeEventDeletions(ctx context.Context, reqs []fold.EventDeletionRequest) error {
	if len(reqs) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO event_deletion_requests (project_id, request_id, person_id, person_uuid, filter, request_seq, status, requested_at, started_at, verified_at, events_deleted, version)`)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := batch.Append(r.ProjectID, r.RequestID, r.PersonID, r.PersonUUID, r.Filter, r.RequestSeq, "pending", r.RequestedAt.UTC(),
			time.Unix(0, 0).UTC(), time.Unix(0, 0).UTC(), uint64(0), r.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// encodeProps renders a person's properties as stored: the JSON object
// (as the fold encoded it in Flush, or encoded here) plus the parallel key
// and value-text arrays that filters read. buf is scratch space for the
// JSON, returned for the next call.
func encodeProps(buf []byte, p fold.PersonRow) (string, []string, []string, []byte, error) {
	props, raw := p.Properties, p.PropertiesJSON
	if props == nil && raw != "" {
		// Only the stored form (a row the fold did not decode).
		var err error
		if props, err = propjson.Decode(raw); err != nil {
			return "", nil, nil, buf, err
		}
	}
	var keys []string
	if raw == "" {
		var err error
		if buf, keys, err = propjson.Encode(buf[:0], props); err != nil {
			return "", nil, nil, buf, err
		}
		raw = string(buf)
	} else {
		keys = propjson.SortedKeys(props)
	}
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = propfilter.ValueText(props[k])
	}
	return raw, keys, values, buf, nil
}

var _ fold.ProjectLoader = (*Store)(nil)
