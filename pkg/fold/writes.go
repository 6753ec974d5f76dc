package fold

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/person"
)

// splitPersonIDsBase is above every stream sequence: see SplitPersonID.
const splitPersonIDsBase = SplitPersonIDsBase

// SplitPersonIDsBase is the lowest id SplitPersonID gives.
const SplitPersonIDsBase = uint64(1) << 52

// actorOf returns the event's actor, or nil for captured events.
func actorOf(ev *event.Event) *event.Actor {
	m, ok := ev.Properties[event.PropActor].(map[string]any)
	if !ok {
		return nil
	}
	a := &event.Actor{}
	a.KeyID, _ = m["key_id"].(string)
	a.KeyLabel, _ = m["key_label"].(string)
	a.OrganizationID, _ = m["organization_id"].(string)
	return a
}

// SplitPersonID is the integer id of the i-th person created by the split
// event at stream sequence seq: above every id an ordinary event can give
// (a stream sequence), unique, and the same on every replay. JavaScript
// clients read it exactly while seq < 2^44.
func SplitPersonID(seq uint64, i int) uint64 {
	return splitPersonIDsBase + seq*event.MaxSplitPerEvent + uint64(i)
}

func numberProp(props map[string]any, key string) (uint64, bool) {
	switch v := props[key].(type) {
	case json.Number:
		n, err := strconv.ParseUint(v.String(), 10, 64)
		return n, err == nil
	case float64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// personByID returns the person with integer id as a command at in's
// sequence names it, or nil when it does not exist at that point of the
// log. A redelivery after a crash may load a row written by a later event
// of the batch: a person created after in does not exist yet (the first
// fold found none).
func (f *Folder) personByID(ctx context.Context, in Input, id uint64) (*personState, error) {
	if err := f.loadPersons(ctx, in.ProjectID, []uint64{id}); err != nil {
		return nil, err
	}
	p := f.persons[personKey{in.ProjectID, id}]
	if p == nil || createdSeq(p.row.ID) > in.Seq || createdSeq(p.row.ID) == in.Seq && in.Origin == 0 {
		// A lane command applied after the event that created the
		// person (Seq = that event's) finds it.
		return nil, nil
	}
	return p, nil
}

// newerThan reports whether p's row shows a later state than in's place
// in the log: a newer version, or one at in's sequence that this batch did
// not make (a lane command's Seq is the event it follows, which a stored
// row at that version already includes, docs in lane.go).
func newerThan(p *personState, in *Input) bool {
	return p.row.Version > in.Seq || p.row.Version == in.Seq && !p.dirty
}

// deletedBefore reports whether p was deleted (or merged away) before the
// event at seq. A redelivery may read p deleted by a later event of the
// batch, at a higher version: at seq, p was live. Deleted rows never
// change again, so their version is the deleting event's.
// A lane command (Origin set) applied after seq also finds a deletion
// at seq itself done before it.
func deletedBefore(p *personState, in *Input) bool {
	return p.row.IsDeleted && (p.row.Version < in.Seq || p.row.Version == in.Seq && in.Origin != 0)
}

// deletePerson folds $delete_person: the person named by $person_id and
// every distinct id it owns get tombstones. A distinct id seen again later
// creates a fresh person.
func (f *Folder) deletePerson(ctx context.Context, in Input) (Resolved, error) {
	ev := &in.Event
	id, ok := numberProp(ev.Properties, event.PropPersonID)
	if !ok {
		return Resolved{}, nil
	}
	p, err := f.personByID(ctx, in, id)
	if err != nil || p == nil {
		return Resolved{}, err
	}
	res := resolved(p)
	switch {
	case p.row.IsDeleted && p.row.Version == in.Seq:
		// Redelivered after a crash: the person row was written;
		// finish the distinct ids below.
	case p.row.IsDeleted || in.Seq <= p.row.Version && !p.dirtyAt(in.Seq):
		// Deleted before, or merged away: nothing to do.
		return res, nil
	default:
		if a := actorOf(ev); a != nil {
			f.recordDetail(in, a, p, "deleted", activity.Deleted(p.row.UUID.String()))
		}
		if ev.Properties[event.PropDeleteEvents] == true {
			f.deletions = append(f.deletions, DeletionRequest{
				ProjectID: in.ProjectID, PersonID: p.row.ID, PersonUUID: p.row.UUID,
				RequestSeq: in.Own(), RequestedAt: ev.Timestamp, Version: RequestVersion(in.Own()),
			})
		}
		p.row.IsDeleted = true
		f.touch(p, in.Seq)
	}
	// The ids' rows are read first (Prepare loads only the person's): a
	// tombstone carries the id's FirstSeq and the owner it replaces.
	if err := f.loadMissingDIDs(ctx, in.ProjectID, p.row.DistinctIDs); err != nil {
		return Resolved{}, err
	}
	for _, d := range p.row.DistinctIDs {
		f.tombstone(in, d, p.row.ID)
	}
	return res, nil
}

// deletePersonEvents folds $delete_person_events: the events of the person
// named by $person_id, up to this sequence, are queued for deletion and the
// person stays. No row changes, so a redelivery cannot tell whether the
// request was written: it asks again, which writes the same row (version
// = this sequence), and the decision depends only on the person's state at
// this point of the log, read from a stored row that may be newer.
func (f *Folder) deletePersonEvents(ctx context.Context, in Input) (Resolved, error) {
	id, ok := numberProp(in.Event.Properties, event.PropPersonID)
	if !ok {
		return Resolved{}, nil
	}
	p, err := f.personByID(ctx, in, id)
	if err != nil || p == nil {
		return Resolved{}, err
	}
	if deletedBefore(p, &in) {
		return Resolved{}, nil
	}
	f.deletions = append(f.deletions, DeletionRequest{
		ProjectID: in.ProjectID, PersonID: p.row.ID, PersonUUID: p.row.UUID,
		RequestSeq: in.Own(), RequestedAt: in.Event.Timestamp, Version: RequestVersion(in.Own()),
	})
	// Recorded again on a redelivery, like the request: the entry's id is
	// the event's uuid, so it is the same entry. Not when a stored row is
	// newer than this event: the batch that wrote that row, or an earlier
	// one, wrote this entry (WriteBatch writes activity before persons),
	// and the name read now would be the person's as it is now, not as
	// it was here.
	if a := actorOf(&in.Event); a != nil && !newerThan(p, &in) {
		f.recordActivity(in, a, p, "delete_events", []activity.Change{})
	}
	return resolved(p), nil
}

// createdSeq is the stream sequence of the event that created the person
// with integer id: the id itself, or the split event's (SplitPersonID).
func createdSeq(id uint64) uint64 {
	return CreatedSeq(id)
}

// CreatedSeq is createdSeq for readers outside the fold (the live person
// counts tell a person's liveness at a sequence from its newest row).
func CreatedSeq(id uint64) uint64 {
	if id >= splitPersonIDsBase {
		return (id - splitPersonIDsBase) / event.MaxSplitPerEvent
	}
	return id
}

// tombstone marks distinctID as owned by no one (unless a later event
// already changed it).
func (f *Folder) tombstone(in Input, distinctID string, owner uint64) {
	k := didKey{in.ProjectID, distinctID}
	d := f.dids[k]
	if d != nil && (d.ahead(in) || d.row.IsDeleted || d.row.PersonID != owner) {
		return
	}
	next := &didState{row: DistinctIDRow{ProjectID: in.ProjectID, DistinctID: distinctID, PersonID: owner, IsDeleted: true, Version: in.Seq}, dirty: true}
	if d != nil {
		next.row.FirstSeq = d.row.FirstSeq
		next.base = d.base
		if !d.dirty && d.row.Version > 0 {
			next.base = d.row.owner()
		}
	}
	f.setDID(k, d, next)
}

// splitPerson folds $split_person: each distinct id in $split_distinct_ids
// that the person still owns moves to a new person of its own (uuid by
// person.UUIDForReuse at this sequence, id by SplitPersonID); the person
// keeps the others.
func (f *Folder) splitPerson(ctx context.Context, in Input) (Resolved, error) {
	ev := &in.Event
	id, ok := numberProp(ev.Properties, event.PropPersonID)
	if !ok {
		return Resolved{}, nil
	}
	p, err := f.personByID(ctx, in, id)
	if err != nil || p == nil || deletedBefore(p, &in) {
		return Resolved{}, err
	}
	list := splitIDs(ev)
	fresh := in.Seq > p.row.Version || p.dirtyAt(in.Seq)
	before := slices.Clone(p.row.DistinctIDs) // when fresh: the ids as the split found them
	var moved []any
	for i, d := range list {
		// The id moves when p owns it at this point of the log. The
		// distinct id state says so reliably even on a redelivery after
		// a crash, when p's stored row may already be the split one.
		k := didKey{in.ProjectID, d}
		if d == "" {
			continue
		}
		if _, ok := f.dids[k]; !ok {
			if err := f.loadDistinctIDs(ctx, in.ProjectID, []string{d}); err != nil {
				return Resolved{}, err
			}
		}
		if dd := f.dids[k]; dd.row.IsDeleted || dd.row.PersonID != p.row.ID || dd.row.Version >= in.Seq {
			continue
		}
		np, err := f.createSplit(ctx, in, d, SplitPersonID(in.Seq, i))
		if err != nil {
			return Resolved{}, err
		}
		f.assign(in, d, np) // also takes d out of p's list
		moved = append(moved, d)
	}
	if !fresh {
		return resolved(p), nil
	}
	if a := actorOf(ev); a != nil && len(moved) > 0 {
		f.recordDetail(in, a, p, "split_person", activity.Split(p.row.UUID.String(), before))
	}
	return resolved(p), nil
}

// splitIDs returns the distinct ids a split event moves (at most
// event.MaxSplitPerEvent; others are ignored).
func splitIDs(ev *event.Event) []string {
	if ev.Event != event.SplitPerson {
		return nil
	}
	list, _ := ev.Properties[event.PropSplitIDs].([]any)
	var out []string
	for i, raw := range list {
		if d, ok := raw.(string); ok && i < event.MaxSplitPerEvent {
			out = append(out, d)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// createSplit makes (or, on a redelivery, finds) the person a split gives
// distinctID. Its uuid is person.UUIDForReuse: the id has an owner (the
// split person), whose uuid is UUIDFor(distinctID) when it was created
// from this id.
func (f *Folder) createSplit(ctx context.Context, in Input, distinctID string, id uint64) (*personState, error) {
	k := personKey{in.ProjectID, id}
	if _, ok := f.persons[k]; !ok && in.Redelivered {
		if err := f.loadPersons(ctx, in.ProjectID, []uint64{id}); err != nil {
			return nil, err
		}
	}
	old, ok := f.persons[k]
	if ok && old.row.Version >= in.Seq {
		return old, nil
	}
	if ok {
		old.gone = true // replaced below
	}
	p := &personState{used: f.gen, row: PersonRow{
		ProjectID: in.ProjectID, ID: id, UUID: person.UUIDForReuse(in.ProjectID, distinctID, in.Seq),
		Properties: map[string]any{}, CreatedAt: in.Event.Timestamp,
	}}
	f.persons[k] = p
	f.touch(p, in.Seq)
	return p, nil
}

// recordUpdate adds the activity entry of a property change made through
// the API.
func (f *Folder) recordUpdate(in Input, a *event.Actor, p *personState, before, after map[string]any) {
	kind := "updated"
	if in.Event.Event == event.DeletePersonProperty {
		kind = "delete_property"
	}
	f.recordActivity(in, a, p, kind, []activity.Change{{
		Type: "Person", Action: "changed", Field: "properties", Before: before, After: after,
	}})
}

// recordActivity adds an activity entry whose id is the event's uuid, so a
// replay writes the same entry.
func (f *Folder) recordActivity(in Input, a *event.Actor, p *personState, kind string, changes []activity.Change) {
	if changes == nil {
		changes = []activity.Change{}
	}
	name := person.DisplayName(f.props(p), p.row.DistinctIDs, p.row.ID)
	f.recordDetail(in, a, p, kind, activity.Detail{Changes: changes, Name: &name})
}

// recordDetail adds an activity entry with the given detail (the deleted
// and split_person entries have their own shape, pkg/activity).
func (f *Folder) recordDetail(in Input, a *event.Actor, p *personState, kind string, detail activity.Detail) {
	f.activity = append(f.activity, activity.Entry{
		ID: in.Event.UUID, OrganizationID: a.OrganizationID, ProjectID: in.ProjectID,
		Scope: "Person", ItemID: fmt.Sprint(p.row.ID), Activity: kind,
		Detail: detail, UserKeyID: a.KeyID, UserLabel: a.KeyLabel, CreatedAt: in.Event.Timestamp,
	})
}
