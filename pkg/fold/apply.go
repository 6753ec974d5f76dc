package fold

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/proptime"
)

// WarningCannotMergeAlreadyIdentified is raised when an $identify or
// $create_alias would merge away a person that is already identified.
const WarningCannotMergeAlreadyIdentified = "cannot_merge_already_identified"

// mergeSource returns the distinct id an event asks to merge into its own
// distinct id, and whether the merge may override the identified guard.
func mergeSource(ev *event.Event) (string, bool) {
	var key string
	switch ev.Event {
	case event.Identify:
		key = "$anon_distinct_id"
	case event.CreateAlias, event.MergeDangerously:
		key = "alias"
	default:
		return "", false
	}
	s, _ := ev.Properties[key].(string)
	return s, ev.Event == event.MergeDangerously
}

// Apply folds one event and returns the person it is attributed to. Only an
// error from the Loader (or a stored row it cannot decode) is returned;
// every event is foldable.
func (f *Folder) Apply(ctx context.Context, in Input) (Resolved, error) {
	res, err := f.apply(ctx, in)
	if err == nil && f.broken != nil {
		err, f.broken = f.broken, nil
	}
	return res, err
}

func (f *Folder) apply(ctx context.Context, in Input) (Resolved, error) {
	ev := &in.Event
	switch ev.Event {
	case event.DeletePerson:
		return f.deletePerson(ctx, in)
	case event.DeletePersonEvents:
		return f.deletePersonEvents(ctx, in)
	case event.DeleteFilteredEvents:
		return f.deleteFilteredEvents(ctx, in)
	case event.SplitPerson:
		return f.splitPerson(ctx, in)
	case event.ResetPersonDistinctID:
		return f.resetDistinctID(ctx, in)
	case event.AddToStaticCohort, event.RemoveFromStaticCohort:
		return Resolved{}, f.cohortMembers(ctx, in)
	}
	other, dangerous := mergeSource(ev)
	if other != "" && other != ev.DistinctID && !person.IllegalDistinctID(other) && !person.IllegalDistinctID(ev.DistinctID) {
		return f.merge(ctx, in, other, dangerous)
	}
	p, err := f.eventPerson(ctx, &in)
	if err != nil {
		return Resolved{}, err
	}
	if p == nil {
		if p, err = f.create(ctx, in, ev.DistinctID); err != nil {
			return Resolved{}, err
		}
	}
	before, after := f.update(p, in, ev.Event == event.Identify)
	if a := actorOf(ev); a != nil && len(before)+len(after) > 0 {
		f.recordUpdate(in, a, p, before, after)
	}
	return resolved(p), nil
}

// merge handles $identify, $create_alias and $merge_dangerously: the
// distinct id `other` is merged into the event's distinct id.
func (f *Folder) merge(ctx context.Context, in Input, other string, dangerous bool) (Resolved, error) {
	ev := &in.Event
	target, err := f.eventPerson(ctx, &in)
	if err != nil {
		return Resolved{}, err
	}
	source, err := f.personOf(ctx, in.ProjectID, other)
	if err != nil {
		return Resolved{}, err
	}
	identify := ev.Event == event.Identify
	switch {
	case target == nil && source == nil:
		p, err := f.create(ctx, in, ev.DistinctID)
		if err != nil {
			return Resolved{}, err
		}
		f.assign(in, other, p)
		f.update(p, in, identify)
		return resolved(p), nil
	case target == nil:
		f.assign(in, ev.DistinctID, source)
		f.update(source, in, identify)
		return resolved(source), nil
	case source == nil:
		f.assign(in, other, target)
		f.update(target, in, identify)
		return resolved(target), nil
	case source == target:
		f.update(target, in, identify)
		return resolved(target), nil
	}
	switch {
	case in.Seq > source.row.Version:
		if source.row.IsIdentified && !dangerous {
			f.refuse(in, other, source)
			f.update(target, in, identify)
			return resolved(target), nil
		}
		source.row.IsDeleted = true
		f.touch(source, in.Seq)
	case source.row.IsDeleted && source.row.Version == in.Seq:
		// Redelivered after a crash: the source was already merged
		// away by this event; finish the merge below.
	default:
		// Redelivered after a crash, and the stored source shows that
		// this merge was refused the first time (a merged source is
		// deleted at the merging event's sequence and never changes
		// again). The warning may not have been written: raise it
		// again; the table keeps one per event.
		f.refuse(in, other, source)
		f.update(target, in, identify)
		return resolved(target), nil
	}
	if in.Seq > target.row.Version {
		sp, tp := f.props(source), f.props(target)
		merged := make(map[string]any, len(sp)+len(tp))
		for k, v := range sp {
			merged[k] = v
		}
		for k, v := range tp {
			merged[k] = v
		}
		target.row.Properties = merged
		// Each kept value keeps the moment recorded with it.
		tt := f.times(target)
		*tt = proptime.Merge(merged, tp, sp, *tt, *f.times(source))
		if source.row.CreatedAt.Before(target.row.CreatedAt) {
			target.row.CreatedAt = source.row.CreatedAt
		}
		target.row.IsIdentified = true
		f.touch(target, in.Seq)
	}
	// Moving ids is idempotent: a redelivery after a crash between the
	// person and the distinct id writes finishes the move. Their rows are
	// read first (Prepare has usually done so): a moved id keeps its
	// FirstSeq and records the owner it leaves.
	if err := f.loadMissingDIDs(ctx, in.ProjectID, source.row.DistinctIDs); err != nil {
		return Resolved{}, err
	}
	for _, d := range source.row.DistinctIDs {
		f.assign(in, d, target)
	}
	f.update(target, in, identify)
	if a := actorOf(ev); a != nil {
		f.recordMerge(in, a, target, source, other)
	}
	return resolved(target), nil
}

// recordMerge adds the activity entries of a merge made through the API
// (persons/{id}/merge/): "merge" on the person kept, "merged_into" on the
// one merged away. Their details come from the event and the persons'
// uuids alone, so a redelivery after a crash writes the same entries; the
// second entry's id is derived from the event's uuid (an entry's id is
// its identity in the log table).
func (f *Folder) recordMerge(in Input, a *event.Actor, target, source *personState, other string) {
	tu, su := target.row.UUID.String(), source.row.UUID.String()
	f.recordDetail(in, a, target, "merge", activity.Detail{Name: &tu, Changes: []activity.Change{{
		Type: "Person", Action: "merged", After: map[string]any{"merged_person_uuid": su, "distinct_id": other},
	}}})
	into := in
	into.Event.UUID = uuid.NewSHA1(in.Event.UUID, []byte("merged_into"))
	f.recordDetail(into, a, source, "merged_into", activity.Detail{Name: &su, Changes: []activity.Change{{
		Type: "Person", Action: "merged", After: map[string]any{"into_person_uuid": tu, "distinct_id": in.Event.DistinctID},
	}}})
}

// refuse records that a merge of an already identified person was refused.
func (f *Folder) refuse(in Input, other string, source *personState) {
	ev := &in.Event
	f.warnings = append(f.warnings, Warning{
		ProjectID: in.ProjectID, Seq: in.Seq, Type: WarningCannotMergeAlreadyIdentified,
		Timestamp: ev.Timestamp,
		Details: map[string]any{
			"event_uuid": ev.UUID.String(), "event": ev.Event,
			"source_distinct_id": other, "target_distinct_id": ev.DistinctID,
			"source_person_uuid": source.row.UUID.String(),
		},
	})
}

// eventPerson is personOf for the event's own distinct id, whose state
// Prepare found (Input.did) unless the cache lost entries since.
func (f *Folder) eventPerson(ctx context.Context, in *Input) (*personState, error) {
	if in.did == nil || in.epoch != f.epoch {
		return f.personOf(ctx, in.ProjectID, in.Event.DistinctID)
	}
	return f.personOfDID(ctx, in.ProjectID, in.did)
}

// personOf returns the live person owning distinctID, or nil.
func (f *Folder) personOf(ctx context.Context, project uint64, distinctID string) (*personState, error) {
	k := didKey{project, distinctID}
	d, ok := f.dids[k]
	if !ok {
		if err := f.loadDistinctIDs(ctx, project, []string{distinctID}); err != nil {
			return nil, err
		}
		d = f.dids[k]
	}
	return f.personOfDID(ctx, project, d)
}

// personOfDID returns the live person owning the distinct id of state d,
// or nil.
func (f *Folder) personOfDID(ctx context.Context, project uint64, d *didState) (*personState, error) {
	if d.row.IsDeleted {
		return nil, nil
	}
	p := f.ownerOf(project, d)
	if p == nil {
		if err := f.loadPersons(ctx, project, []uint64{d.row.PersonID}); err != nil {
			return nil, err
		}
		if p = f.ownerOf(project, d); p == nil {
			// A distinct id row whose person row was never written
			// cannot come from this fold; treat the id as new.
			return nil, nil
		}
	}
	if p.row.IsDeleted && d.row.Version > p.row.Version {
		// The person was deleted before this id was pointed at it:
		// not possible from this fold, treat the id as new.
		return nil, nil
	}
	return p, nil
}

// create makes a new person for distinctID, with the event's sequence as
// its integer id, so ids are unique and survive a replay.
func (f *Folder) create(ctx context.Context, in Input, distinctID string) (*personState, error) {
	k := personKey{in.ProjectID, in.Seq}
	if _, ok := f.persons[k]; !ok && in.Redelivered {
		if err := f.loadPersons(ctx, in.ProjectID, []uint64{in.Seq}); err != nil {
			return nil, err
		}
	}
	old, ok := f.persons[k]
	if ok && old.row.Version >= in.Seq {
		// Created by this very event before a crash: keep what is
		// stored, it already reflects the event.
		f.assign(in, distinctID, old)
		return old, nil
	}
	if ok {
		old.gone = true // replaced below
	}
	p := &personState{
		used: f.gen,
		row: PersonRow{
			ProjectID:  in.ProjectID,
			ID:         in.Seq,
			UUID:       f.newPersonUUID(in, distinctID),
			Properties: map[string]any{},
			CreatedAt:  in.Event.Timestamp,
		},
	}
	f.persons[k] = p
	f.touch(p, in.Seq)
	f.assign(in, distinctID, p)
	return p, nil
}

// newPersonUUID is the uuid of the person the event creates from
// distinctID, read before the id is assigned to it. The first owner of an
// id gets person.UUIDFor (PostHog's uuidFromDistinctId); an id that had an
// owner before (a distinct id row exists: a tombstone after a reset or a
// delete) gets person.UUIDForReuse at the event's sequence, since UUIDFor is
// its former owner's when that person was created from it.
//
// Replay-safe: the distinct id state is the one the fold's other decisions
// read, rebuilt exactly on a redelivery after a crash (rows above the
// commit are read as their prev_* owner, a tombstone included); a person
// row this event already wrote is kept as stored (create).
func (f *Folder) newPersonUUID(in Input, distinctID string) uuid.UUID {
	if d := f.dids[didKey{in.ProjectID, distinctID}]; d == nil || d.row.Version == 0 {
		return person.UUIDFor(in.ProjectID, distinctID)
	}
	return person.UUIDForReuse(in.ProjectID, distinctID, in.Seq)
}

// assign points distinctID at p. The person rows whose lists change are
// written too, unless the guard says they already reflect this event.
func (f *Folder) assign(in Input, distinctID string, p *personState) {
	k := didKey{in.ProjectID, distinctID}
	d := f.dids[k]
	f.own(in, p, distinctID)
	if d != nil && (d.row.Version >= in.Seq || !d.row.IsDeleted && d.row.PersonID == p.row.ID) {
		return
	}
	if d != nil && !d.row.IsDeleted {
		// A person deleted by a merge keeps its list as a record.
		if old := f.ownerOf(in.ProjectID, d); old != nil && !old.row.IsDeleted && (in.Seq > old.row.Version || old.dirtyAt(in.Seq)) {
			old.row.DistinctIDs = removeString(old.row.DistinctIDs, distinctID)
			f.touch(old, in.Seq)
		}
	}
	next := &didState{row: DistinctIDRow{
		ProjectID: in.ProjectID, DistinctID: distinctID, PersonID: p.row.ID, Version: in.Seq, FirstSeq: in.Seq,
	}, dirty: true, owner: p}
	if d != nil && d.row.Version > 0 {
		next.row.FirstSeq = d.row.FirstSeq // the id had an owner before
	}
	switch {
	case d == nil:
	case d.dirty:
		next.base = d.base
	case d.row.Version > 0:
		next.base = d.row.owner()
	}
	f.setDID(k, d, next)
}

// own adds distinctID to p's list.
func (f *Folder) own(in Input, p *personState, distinctID string) {
	if slices.Contains(p.row.DistinctIDs, distinctID) || (in.Seq <= p.row.Version && !p.dirtyAt(in.Seq)) {
		return
	}
	p.row.DistinctIDs = append(p.row.DistinctIDs, distinctID)
	f.touch(p, in.Seq)
}

// update applies $set_once, $set and $unset (in that order) and, for
// $identify, marks the person identified. For events made through the API
// (with an actor) it returns the changed keys' values before and after,
// for the activity log; otherwise nil maps.
func (f *Folder) update(p *personState, in Input, identify bool) (before, after map[string]any) {
	if in.Seq <= p.row.Version && !p.dirtyAt(in.Seq) {
		return nil, nil
	}
	ev := &in.Event
	track := ev.Properties[event.PropActor] != nil
	if track {
		before, after = map[string]any{}, map[string]any{}
	}
	changed := false
	note := func(k string, old any, had bool, v any, has bool) {
		changed = true
		if track {
			if _, seen := before[k]; !seen && had {
				before[k] = old
			}
			if has {
				after[k] = v
			} else {
				delete(after, k)
			}
		}
	}
	// Only an event that may change the properties decodes them.
	var props map[string]any
	var setOnce, set map[string]any
	var times *proptime.Times
	var w proptime.Write
	if len(ev.Set)+len(ev.SetOnce)+len(ev.Unset) > 0 {
		props = f.props(p)
		setOnce, set = f.allowedChanges(in, p, props) // limits.go
		// Timestamp-aware writes (docs/events.md): the moment is the
		// event's, from the log.
		times = f.times(p)
		w.Moment, w.Aware = proptime.Moment(ev.Properties[event.PropSetTimestamp], ev.Timestamp)
	}
	for k, v := range setOnce {
		if _, ok := props[k]; !ok {
			props[k] = v
			note(k, nil, false, v, true)
			times.SetOnce(k, w)
		}
	}
	for k, v := range set {
		apply, moved := times.Set(k, w)
		if !apply {
			continue // older than the value's recorded moment
		}
		changed = changed || moved
		if old, ok := props[k]; !ok || !propsEqual(old, v) {
			props[k] = v
			note(k, old, ok, v, true)
		}
	}
	for _, k := range ev.Unset {
		changed = times.Unset(k) || changed
		if old, ok := props[k]; ok {
			delete(props, k)
			note(k, old, true, nil, false)
		}
	}
	if identify && !p.row.IsIdentified {
		p.row.IsIdentified = true
		changed = true
	}
	if changed {
		f.touch(p, in.Seq)
	}
	return before, after
}

// dirtyAt reports whether p was already changed by the event at seq in
// this batch (a person created or merged by the event it is updated by).
func (p *personState) dirtyAt(seq uint64) bool { return p.dirty && p.row.Version == seq }

func (f *Folder) touch(p *personState, seq uint64) {
	if !p.dirty {
		f.changedPersons = append(f.changedPersons, p)
	}
	p.row.Version = seq
	p.dirty = true
}

func resolved(p *personState) Resolved {
	return Resolved{PersonID: p.row.ID, PersonUUID: p.row.UUID}
}
