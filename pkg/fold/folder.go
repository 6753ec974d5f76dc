package fold

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/event"
)

// Input is one event to fold, with the project it belongs to and its
// stream sequence.
type Input struct {
	ProjectID uint64
	Seq       uint64
	Event     event.Event
	// Redelivered is set when the message may have been folded before
	// (a retry of its batch, a refold after a crash). Only then can the
	// store hold rows written by this very event, which the fold must look
	// for.
	Redelivered bool
	// Origin, when not zero, is the message's own stream sequence for a
	// command folded ahead of its place in the log (the write lane,
	// lane.go): Seq is then the sequence it was applied after, which
	// versions its rows, and Origin names what is the message's own (its
	// events row, its deletion request).
	Origin uint64
	// did is the state of the event's distinct id, found by Prepare so
	// that Apply need not search the cache again; valid while epoch is
	// the Folder's (ownDID).
	did   *didState
	epoch uint64
}

// Resolved is the person an event was attributed to (zero when none).
type Resolved struct {
	PersonID   uint64
	PersonUUID uuid.UUID
}

// Folder holds person state and applies events to it. It is not safe for
// concurrent use: the ingester owns one per consumer.
type Folder struct {
	loader  Loader
	persons map[personKey]*personState
	dids    map[didKey]*didState
	// absent remembers person ids the store does not have, until Flush.
	absent map[personKey]bool
	// changed lists the entries made dirty since the last Flush, so a
	// Flush costs the batch's changes, not the size of the cache.
	changedPersons []*personState
	changedDIDs    []*didState
	// decoded lists the persons whose properties were decoded since the
	// last Flush (props.go), whose maps Flush drops.
	decoded   []*personState
	encodeBuf []byte
	// broken is a stored row that could not be decoded (props.go), for
	// Apply to return.
	broken error
	// gen counts batches (Prepare calls); entries remember the last one
	// that used them, and eviction drops the least recently used.
	gen uint64
	// epoch changes whenever entries leave the cache (Reset, eviction):
	// an Input's did pointer from an older epoch is not used.
	epoch uint64
	// warnings, activity and deletion requests since the last Flush.
	warnings  []Warning
	activity  []activity.Entry
	deletions []DeletionRequest
	// eventDeletions: the batch's filtered deletions (eventdeletions.go).
	eventDeletions []EventDeletionRequest
	members        []CohortMember
	// MaxCached bounds the number of clean persons kept after a Flush;
	// zero means no bound.
	MaxCached int
	// DenseMisses is the misses of one project's distinct ids in one step
	// that make the Folder read the project whole (whole.go); zero means
	// DefaultDenseMisses, a negative value never.
	DenseMisses int
	whole       wholeProjects
	wholeLoads  int
	// MaxPersonBytes bounds a person's properties (JSON bytes); changes
	// beyond it are refused with a warning (limits.go). Zero means no
	// bound. Part of the fold's rules: a replay must use the same value.
	MaxPersonBytes int
	// Committed is the last stream sequence whose batch is known to be
	// completely written. Distinct id rows above it are read as their
	// Prev owner (see DistinctIDRow), or as hidden says (refold.go).
	Committed uint64
	// hidden survives Reset: it is what the store cannot tell.
	hidden hiddenRows
	// through is the highest stored distinct id version read (see
	// CommitThrough); it survives Reset, as the rows stay in the store.
	through uint64
}

// New returns an empty Folder reading misses through loader.
func New(loader Loader) *Folder {
	return &Folder{loader: loader, persons: map[personKey]*personState{}, dids: map[didKey]*didState{}, absent: map[personKey]bool{}, hidden: newHiddenRows(),
		whole: newWholeProjects()}
}

// Reset drops all cached state, for example after a failed flush, so the
// next events are folded from what the store holds.
func (f *Folder) Reset() {
	f.epoch++
	f.persons = map[personKey]*personState{}
	f.dids = map[didKey]*didState{}
	f.absent = map[personKey]bool{}
	f.whole = newWholeProjects()
	f.changedPersons, f.changedDIDs, f.decoded, f.broken = nil, nil, nil, nil
	f.warnings, f.activity, f.deletions, f.members = nil, nil, nil, nil
	f.eventDeletions = nil
	f.hidden.flushed = f.hidden.flushed[:0] // not committed
}

// Cached reports how many persons and distinct ids are held in memory.
func (f *Folder) Cached() (persons, distinctIDs int) { return len(f.persons), len(f.dids) }

// Dirty reports how many persons were changed since the last Flush: the
// persons the next Flush writes, held in memory until then.
func (f *Folder) Dirty() int { return len(f.changedPersons) }

// Prepare loads, in a few queries, the state that a batch of inputs will
// touch, so that Apply rarely has to read one row at a time.
func (f *Folder) Prepare(ctx context.Context, inputs []Input) error {
	f.gen++
	f.settle()
	// Every distinct id the batch names, and persons a redelivery may
	// already have written under the event's own sequence. Each input
	// keeps the state of its distinct id once found (Input.did), so the
	// cache (hundreds of thousands of entries, a cache miss per lookup)
	// is searched once per event, by Prepare, not again by Apply; and a
	// distinct id keeps a pointer to its person (didState.owner).
	owners := map[uint64][]uint64{}
	missing := map[uint64][]string{}
	var named []didKey // merge sources and split ids
	name := func(k didKey) {
		if _, ok := f.dids[k]; !ok {
			missing[k.project] = append(missing[k.project], k.id)
		}
		named = append(named, k)
	}
	for i := range inputs {
		in := &inputs[i] // an Input is large: not copied per event
		if in.Redelivered {
			owners[in.ProjectID] = append(owners[in.ProjectID], in.Seq)
		}
		if in.Event.Event == event.DeletePerson || in.Event.Event == event.DeletePersonEvents || in.Event.Event == event.SplitPerson ||
			in.Event.Event == event.DeleteFilteredEvents {
			if id, ok := numberProp(in.Event.Properties, event.PropPersonID); ok {
				owners[in.ProjectID] = append(owners[in.ProjectID], id)
			}
		}
		in.did, in.epoch = f.dids[didKey{in.ProjectID, in.Event.DistinctID}], f.epoch
		if in.did == nil {
			missing[in.ProjectID] = append(missing[in.ProjectID], in.Event.DistinctID)
		}
		for _, d := range splitIDs(&in.Event) {
			if d != "" {
				name(didKey{in.ProjectID, d})
			}
		}
		if other, _ := mergeSource(&in.Event); other != "" {
			name(didKey{in.ProjectID, other})
		}
	}
	// Cohort commands read only the distinct ids' rows, not their persons.
	for i := range inputs {
		in := &inputs[i]
		for _, d := range cohortIDs(&in.Event) {
			if _, ok := f.dids[didKey{in.ProjectID, d}]; !ok {
				missing[in.ProjectID] = append(missing[in.ProjectID], d)
			}
		}
	}
	for project, list := range missing {
		if err := f.maybeLoadWhole(ctx, project, len(list)); err != nil {
			return err
		}
		if err := f.loadDistinctIDs(ctx, project, list); err != nil {
			return err
		}
	}
	for i := range inputs {
		in := &inputs[i]
		if in.did == nil {
			in.did = f.dids[didKey{in.ProjectID, in.Event.DistinctID}]
		}
		f.prepareDID(in.ProjectID, in.did, owners)
	}
	for _, k := range named {
		f.prepareDID(k.project, f.dids[k], owners)
	}
	for project, list := range owners {
		if err := f.loadPersons(ctx, project, list); err != nil {
			return err
		}
	}
	return f.prepareOwnedIDs(ctx, inputs)
}

// prepareDID marks d (of project) and its person used by this batch, or
// adds the person to owners, to be loaded.
func (f *Folder) prepareDID(project uint64, d *didState, owners map[uint64][]uint64) {
	d.used = f.gen
	if d.row.IsDeleted {
		return
	}
	if p := f.ownerOf(project, d); p != nil {
		p.used = f.gen
	} else {
		owners[project] = append(owners[project], d.row.PersonID)
	}
}

// ownerOf returns the cached state of d's person (of project), or nil
// when it is not cached.
func (f *Folder) ownerOf(project uint64, d *didState) *personState {
	if o := d.owner; o != nil && !o.gone && o.row.ID == d.row.PersonID {
		return o
	}
	d.owner = f.persons[personKey{project, d.row.PersonID}]
	return d.owner
}

// prepareOwnedIDs loads, in one query per project, the distinct ids of
// the persons the batch may merge away or delete, which those events
// rewrite without naming them (a person's ids are rows like any other:
// their FirstSeq and previous owner go with the new row).
func (f *Folder) prepareOwnedIDs(ctx context.Context, inputs []Input) error {
	missing := map[uint64][]string{}
	add := func(project, id uint64) {
		if p := f.persons[personKey{project, id}]; p != nil {
			for _, d := range p.row.DistinctIDs {
				if _, ok := f.dids[didKey{project, d}]; !ok {
					missing[project] = append(missing[project], d)
				}
			}
		}
	}
	for i := range inputs {
		in := &inputs[i]
		if in.Event.Event == event.DeletePerson {
			if id, ok := numberProp(in.Event.Properties, event.PropPersonID); ok {
				add(in.ProjectID, id)
			}
		}
		if other, _ := mergeSource(&in.Event); other != "" {
			if d := f.dids[didKey{in.ProjectID, other}]; d != nil && !d.row.IsDeleted {
				add(in.ProjectID, d.row.PersonID)
			}
		}
	}
	for project, list := range missing {
		if err := f.loadDistinctIDs(ctx, project, list); err != nil {
			return err
		}
	}
	return nil
}

// committedView returns the row as of the last committed batch.
func (f *Folder) committedView(r DistinctIDRow) DistinctIDRow {
	if r.Version <= f.Committed {
		return r
	}
	prev := r.Prev
	r.PersonID, r.Version, r.IsDeleted = prev.PersonID, prev.Version, prev.IsDeleted
	if prev == (Owner{}) {
		// The id had no row before that batch: FirstSeq was set by it.
		r.IsDeleted, r.FirstSeq = true, 0
	}
	r.Prev = Owner{}
	return r
}

// loadMissingDIDs loads those of ids that are not in memory.
func (f *Folder) loadMissingDIDs(ctx context.Context, project uint64, ids []string) error {
	var missing []string
	for _, id := range ids {
		if _, ok := f.dids[didKey{project, id}]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return f.loadDistinctIDs(ctx, project, missing)
}

func (f *Folder) loadDistinctIDs(ctx context.Context, project uint64, ids []string) error {
	ids = uniqueStrings(ids)
	var rows map[string]DistinctIDRow
	if !f.heldWhole(project) { // else an id not cached is not stored
		var err error
		if rows, err = f.loader.LoadDistinctIDs(ctx, project, ids); err != nil {
			return fmt.Errorf("load distinct ids: %w", err)
		}
	}
	for _, id := range ids {
		k := didKey{project, id}
		if _, ok := f.dids[k]; ok {
			continue
		}
		r, ok := rows[id]
		if !ok {
			// Remember absence too, so the id is not looked up again.
			r = DistinctIDRow{ProjectID: project, DistinctID: id, IsDeleted: true}
		}
		f.dids[k] = &didState{row: f.storedView(k, r), used: f.gen}
	}
	return nil
}

// loadPersons loads the persons missing from memory.
func (f *Folder) loadPersons(ctx context.Context, project uint64, ids []uint64) error {
	var missing []uint64
	for _, id := range uniqueUints(ids) {
		k := personKey{project, id}
		if _, ok := f.persons[k]; !ok && !f.absent[k] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var rows map[uint64]PersonRow
	if !f.heldWhole(project) { // else a person not cached is not stored
		var err error
		if rows, err = f.loader.LoadPersons(ctx, project, missing); err != nil {
			return fmt.Errorf("load persons: %w", err)
		}
	}
	for _, id := range missing {
		if r, ok := rows[id]; ok {
			storedProps(&r)
			f.persons[personKey{project, id}] = &personState{row: r, used: f.gen, stored: r.CreatedAt}
		} else {
			f.absent[personKey{project, id}] = true
		}
	}
	return nil
}

// Flush hands out every row changed since the last Flush and marks the
// state clean. The caller must write the rows before acknowledging the
// events that produced them.
func (f *Folder) Flush() Batch {
	var b Batch
	f.compact()
	// Sized once: appending grew them by doubling (~1% of the ingester's
	// CPU in the bench's ingest, docs/performance-history.md,
	// its capture profile of 2026-11-24 08:29). Left nil when nothing
	// changed, as before.
	if len(f.changedPersons) > 0 {
		b.Persons = make([]PersonRow, 0, len(f.changedPersons))
	}
	if len(f.changedDIDs) > 0 {
		b.DistinctIDs = make([]DistinctIDRow, 0, len(f.changedDIDs))
	}
	for _, p := range f.changedPersons {
		if p.dirty {
			decoded := p.row.Properties != nil
			row := f.flushRow(p)
			row.EmailIndexed = emailKept(p, decoded, row.Properties)
			p.forgetEmail()
			row.DistinctIDs = slices.Clone(p.row.DistinctIDs)
			b.Persons = append(b.Persons, row)
			if !p.stored.IsZero() && p.stored.Unix() != row.CreatedAt.Unix() {
				b.Rekeyed = append(b.Rekeyed, Rekey{ProjectID: row.ProjectID, ID: row.ID, CreatedAt: p.stored, Version: row.Version})
			}
			p.stored = row.CreatedAt
			p.dirty = false
		}
	}
	for _, d := range f.changedDIDs {
		if d.dirty {
			row := d.row
			row.Prev = d.base
			b.DistinctIDs = append(b.DistinctIDs, row)
			f.noteFlushed(didKey{row.ProjectID, row.DistinctID}, row)
			d.dirty = false
		}
	}
	if len(b.Persons) == 0 {
		b.Persons = nil
	}
	if len(b.DistinctIDs) == 0 {
		b.DistinctIDs = nil
	}
	f.changedPersons, f.changedDIDs = f.changedPersons[:0], f.changedDIDs[:0]
	sort.Slice(b.Persons, func(i, j int) bool {
		a, c := b.Persons[i], b.Persons[j]
		return a.ProjectID < c.ProjectID || a.ProjectID == c.ProjectID && a.ID < c.ID
	})
	sort.Slice(b.DistinctIDs, func(i, j int) bool {
		a, c := b.DistinctIDs[i], b.DistinctIDs[j]
		return a.ProjectID < c.ProjectID || a.ProjectID == c.ProjectID && a.DistinctID < c.DistinctID
	})
	b.Warnings, f.warnings = f.warnings, nil
	b.Activity, f.activity = f.activity, nil
	b.DeletionRequests, f.deletions = f.deletions, nil
	b.EventDeletions, f.eventDeletions = f.eventDeletions, nil
	b.CohortMembers, f.members = f.members, nil
	clear(f.absent)
	f.evict()
	return b
}

// setDID stores next, a changed state of distinct id k, whose state in
// the cache is old (nil: none). An existing state is changed in place, so
// pointers to it (Input.did, changedDIDs) stay current.
func (f *Folder) setDID(k didKey, old, next *didState) {
	next.used = f.gen
	if old == nil {
		f.dids[k] = next
		f.changedDIDs = append(f.changedDIDs, next)
		return
	}
	if !old.dirty {
		f.changedDIDs = append(f.changedDIDs, old)
	}
	*old = *next
}

// evict keeps memory bounded: when persons or distinct ids exceed
// MaxCached, the clean entries least recently used (by batch) are dropped
// until half remain.
func (f *Folder) evict() {
	if f.MaxCached <= 0 || len(f.persons) <= f.MaxCached && len(f.dids) <= f.MaxCached {
		return
	}
	f.epoch++
	evictOldest(f.persons, f.MaxCached/2, func(p *personState) (uint64, bool) { return p.used, !p.dirty }, func(p *personState) {
		p.gone = true
		f.lostWhole(p.row.ProjectID)
	})
	evictOldest(f.dids, f.MaxCached/2, func(d *didState) (uint64, bool) { return d.used, !d.dirty }, func(d *didState) { f.lostWhole(d.row.ProjectID) })
	// A kept distinct id must not keep an evicted person in memory.
	for _, d := range f.dids {
		if d.owner != nil && d.owner.gone {
			d.owner = nil
		}
	}
}

// evictOldest deletes clean entries of m, oldest use first, until keep
// remain (or only dirty ones are left).
func evictOldest[K comparable, V any](m map[K]V, keep int, age func(V) (used uint64, clean bool), drop func(V)) {
	excess := len(m) - keep
	if excess <= 0 {
		return
	}
	counts := map[uint64]int{}
	for _, v := range m {
		if used, clean := age(v); clean {
			counts[used]++
		}
	}
	var cutoff uint64
	for n, gens := 0, slices.Sorted(maps.Keys(counts)); n < excess && len(gens) > 0; gens = gens[1:] {
		cutoff, n = gens[0], n+counts[gens[0]]
	}
	// Older than the cutoff batch first, then from the cutoff batch.
	for _, older := range []bool{true, false} {
		for k, v := range m {
			if excess == 0 {
				return
			}
			if used, clean := age(v); clean && (used < cutoff || !older && used == cutoff) {
				drop(v)
				delete(m, k)
				excess--
			}
		}
	}
}

func propsEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func removeString(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

func uniqueStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func uniqueUints(in []uint64) []uint64 {
	seen := make(map[uint64]bool, len(in))
	out := make([]uint64, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
