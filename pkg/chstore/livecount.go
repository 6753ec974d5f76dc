package chstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
)

// The number of live persons per project, kept by the ingester in
// person_counts (schema 0008) so the unfiltered list need not count the
// project through FINAL.
//
// A person is created at the sequence of its creating event (its id, or
// the split event's for a split-off person: fold.CreatedSeq) and is
// deleted at most once, never changing again (its version is then the
// deleting event's), so its newest row tells its liveness at any sequence t
// the log has been folded through: created <= t and not (deleted with
// version <= t). The count as of a sequence is therefore a function of the log
// alone, and a row (live, version) is right forever, whichever batch
// wrote it, a crashed one included.
//
// A batch from c+1 to l changes the count by the liveness at l minus the
// liveness at c of the persons it wrote: in a clean run every creation
// and deletion writes the person. After a crash or a failed write, the
// store may hold person rows above c that the refold recognises as done
// and does not write again; for the projects holding such rows the count
// is taken from the store instead (a FINAL scan of three narrow columns),
// batch after batch, until the commit point passes them.

// liveCounts is the writer's state. Store methods call it; one ingester
// drives it (the mutex only guards against misuse).
type liveCounts struct {
	mu sync.Mutex
	// known are counts as of committed.
	known     map[uint64]projectCount
	committed uint64
	// unsure: rows may have been written above committed without a
	// marker (WriteRows since the last commit, or a fresh process).
	unsure bool
	// dirty is, per project, the highest persons version above the commit
	// point found by the last rescan.
	dirty map[uint64]uint64
	// slots are counts per slot as of committed (slotcount.go).
	slots map[uint64]slotCounts
}

type projectCount struct {
	live   uint64
	newest time.Time
}

func newLiveCounts() *liveCounts {
	return &liveCounts{known: map[uint64]projectCount{}, dirty: map[uint64]uint64{}, slots: map[uint64]slotCounts{}, unsure: true}
}

// consumerCounts holds one liveCounts per consumer (ingester partition).
type consumerCounts struct {
	mu sync.Mutex
	by map[string]*liveCounts
}

func (cc *consumerCounts) of(consumer string) *liveCounts {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	lc, ok := cc.by[consumer]
	if !ok {
		lc = newLiveCounts()
		cc.by[consumer] = lc
	}
	return lc
}

// written marks every consumer's counts unsure: rows of an unknown
// consumer's batch were written.
func (cc *consumerCounts) written() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, lc := range cc.by {
		lc.written()
	}
}

// groupByProject puts persons into into by project. A batch of one
// project, the usual case, shares the batch's slice: copying its person
// rows was 2% of the ingester's allocation in the ingest benchmark.
func groupByProject(into map[uint64][]fold.PersonRow, persons []fold.PersonRow) {
	if len(persons) == 0 {
		return
	}
	one := true
	for k := range persons {
		if persons[k].ProjectID != persons[0].ProjectID {
			one = false
			break
		}
	}
	if one {
		into[persons[0].ProjectID] = persons
		return
	}
	for _, p := range persons {
		into[p.ProjectID] = append(into[p.ProjectID], p)
	}
}

// countPlan is one batch's work: the projects to write and how.
type countPlan struct {
	from    uint64                      // the commit point c
	base    map[uint64]projectCount     // incremental: counts as of c
	persons map[uint64][]fold.PersonRow // the batch's, read only
	recount map[uint64]bool             // counted from the store at l
	// stored: base is the project's newest person_counts row (known from
	// an earlier batch or read), so an unchanged count needs no new row.
	stored   map[uint64]bool
	rows     map[uint64]projectCount
	newDirty map[uint64]uint64
	slots    *slotPlan
}

func (lc *liveCounts) written() {
	lc.mu.Lock()
	lc.unsure = true
	lc.mu.Unlock()
}

// begin reads what the batch starting after c needs, before its rows are
// written: after a failure or at start, which of the consumer's projects
// (mine; nil: all) hold rows above c;
// for projects not known yet, their count as of c.
func (lc *liveCounts) begin(ctx context.Context, s *Store, c uint64, b fold.Batch, mine func(project uint64) bool) (*countPlan, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if c < lc.committed {
		// Folding again from an earlier point: the counts are ahead.
		clear(lc.known)
		clear(lc.slots)
		lc.unsure = true
	}
	if lc.unsure {
		dirty, err := s.versionsAbove(ctx, "persons", c)
		if err != nil {
			return nil, err
		}
		// Another partition's rows above c are its live work: counting
		// its project here would write a row at this batch's last
		// sequence that outranks the rows it writes below that.
		for project := range dirty {
			if mine != nil && !mine(project) {
				delete(dirty, project)
			}
		}
		lc.dirty, lc.unsure = dirty, false
	}
	// Sequences between the last commit and c were not delivered to this
	// consumer: the known counts hold as of c.
	lc.committed = c
	plan := &countPlan{from: c, base: map[uint64]projectCount{}, persons: map[uint64][]fold.PersonRow{},
		recount: map[uint64]bool{}, stored: map[uint64]bool{}, rows: map[uint64]projectCount{}, newDirty: map[uint64]uint64{}}
	groupByProject(plan.persons, b.Persons)
	for project := range lc.dirty {
		plan.recount[project] = true
	}
	var unknown []uint64
	for project := range plan.persons {
		if plan.recount[project] {
			continue
		}
		if k, ok := lc.known[project]; ok {
			plan.base[project], plan.stored[project] = k, true
		} else {
			unknown = append(unknown, project)
		}
	}
	if err := lc.beginSlots(ctx, s, plan, c, b); err != nil {
		return nil, err
	}
	if len(unknown) == 0 {
		return plan, nil
	}
	stored, err := s.storedCounts(ctx, unknown)
	if err != nil {
		return nil, err
	}
	for _, project := range unknown {
		if k, ok := stored[project]; ok {
			// No person row above c (not dirty), so no count row above c
			// either: it is written after a batch's persons.
			plan.base[project], plan.stored[project] = k, true
			continue
		}
		// Never counted (persons folded before schema 0008, or none).
		k, err := s.countLiveAt(ctx, project, c)
		if err != nil {
			return nil, err
		}
		plan.base[project] = k
	}
	return plan, nil
}

// finish computes the counts as of l once the batch's rows are written,
// and writes them.
func (lc *liveCounts) finish(ctx context.Context, s *Store, plan *countPlan, l uint64) error {
	c := plan.from
	for project, k := range plan.base {
		n := int64(k.live)
		for _, r := range plan.persons[project] {
			n += liveAt(r, l) - liveAt(r, c)
			if r.CreatedAt.After(k.newest) {
				k.newest = r.CreatedAt
			}
		}
		if n < 0 {
			return fmt.Errorf("project %d: live count below zero (%d)", project, n)
		}
		k.live = uint64(n)
		plan.rows[project] = k
	}
	lc.mu.Lock()
	dirty := lc.dirty
	lc.mu.Unlock()
	for project := range plan.recount {
		k, err := s.countLiveAt(ctx, project, l)
		if err != nil {
			return err
		}
		plan.rows[project] = k
		if dirty[project] > l {
			plan.newDirty[project] = dirty[project]
		}
	}
	if err := lc.finishSlots(ctx, s, plan, l); err != nil {
		return err
	}
	// The slots and the count go together: a reader finding them apart
	// (slots not adding up to the count) takes the windows' path, and each
	// row is right as of its version whichever lands first.
	return concurrently(
		func() error { return s.writeSlots(ctx, plan.slots, l) },
		func() error { return s.writeCounts(ctx, plan, l) })
}

// writeCounts writes the batch's changed project counts.
func (s *Store) writeCounts(ctx context.Context, plan *countPlan, l uint64) error {
	// A batch that only changes persons (a PATCH, $set on known ids)
	// leaves the counts as its stored rows say: writing them again would
	// cost an insert round trip on every API write for nothing, as a
	// row is right at every sequence until the count changes.
	var write []uint64
	for project, k := range plan.rows {
		if !plan.stored[project] || plan.recount[project] || !sameCount(k, plan.base[project]) {
			write = append(write, project)
		}
	}
	if len(write) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_counts (project_id, live, newest, version)`)
	if err != nil {
		return err
	}
	for _, project := range write {
		k := plan.rows[project]
		if err := batch.Append(project, k.live, k.newest.UTC(), l); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

func sameCount(a, b projectCount) bool { return a.live == b.live && a.newest.Equal(b.newest) }

// commit records the batch's counts once its marker is written.
func (lc *liveCounts) commit(plan *countPlan, l uint64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for project, k := range plan.rows {
		lc.known[project] = k
	}
	lc.commitSlots(plan)
	lc.dirty, lc.committed, lc.unsure = plan.newDirty, l, false
}

// versionsAbove returns, per project, the highest version of its rows in
// table (persons, person_order) above seq: rows of a batch written but
// not committed, or of another partition. No FINAL: any version counts.
// Reads two narrow columns, once per start or failure.
func (s *Store) versionsAbove(ctx context.Context, table string, seq uint64) (map[uint64]uint64, error) {
	rows, err := s.conn.Query(ctx, "SELECT project_id, max(version) FROM "+table+" WHERE version > ? GROUP BY project_id", seq)
	if err != nil {
		return nil, fmt.Errorf("%s above the commit point: %w", table, err)
	}
	defer rows.Close()
	out := map[uint64]uint64{}
	for rows.Next() {
		var project, v uint64
		if err := rows.Scan(&project, &v); err != nil {
			return nil, err
		}
		out[project] = v
	}
	return out, rows.Err()
}

// storedCounts returns the newest count row of each project that has one.
func (s *Store) storedCounts(ctx context.Context, projects []uint64) (map[uint64]projectCount, error) {
	rows, err := s.conn.Query(ctx, "SELECT project_id, argMax(live, version), argMax(newest, version) FROM person_counts WHERE project_id IN ? GROUP BY project_id", statement.Set(projects))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uint64]projectCount{}
	for rows.Next() {
		var project uint64
		var k projectCount
		if err := rows.Scan(&project, &k.live, &k.newest); err != nil {
			return nil, err
		}
		out[project] = k
	}
	return out, rows.Err()
}

// countLiveAt counts a project's persons live as of sequence t from the
// store (the liveness rule above on each person's newest row), with the
// largest created_at. A scan of the project: used only for a project
// never counted, or holding rows of an uncommitted batch.
func (s *Store) countLiveAt(ctx context.Context, project, t uint64) (projectCount, error) {
	var k projectCount
	err := s.conn.QueryRow(statement.Read(ctx), `SELECT countIf(if(id >= ?, toUInt64(intDiv(id - ?, ?)), id) <= ? AND NOT (is_deleted = 1 AND version <= ?)), max(created_at)
		FROM persons FINAL WHERE project_id = ?`, fold.SplitPersonIDsBase, fold.SplitPersonIDsBase, event.MaxSplitPerEvent, t, t, project).Scan(&k.live, &k.newest)
	return k, err
}

// LiveCount is the number of live persons of a project as the ingester
// keeps it, and the newest created_at (an upper bound); ok is false when
// the project has no count yet (the caller counts the persons itself).
func (s *Store) LiveCount(ctx context.Context, project uint64) (live uint64, newest time.Time, ok bool, err error) {
	var n uint64
	err = s.conn.QueryRow(ctx, "SELECT argMax(live, version), argMax(newest, version), count() FROM person_counts WHERE project_id = ?", project).
		Scan(&live, &newest, &n)
	return live, newest, n > 0, err
}

// ForgetCounts drops what the consumer's counts know: it folds again from
// its last commit, which another process may have moved meanwhile (a lease
// lost and taken again, ingest.Run), so counts known as of an earlier
// commit are not the counts as of the new one.
func (s *Store) ForgetCounts(consumer string) {
	lc := s.counts.of(consumer)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	clear(lc.known)
	clear(lc.slots)
	lc.unsure = true
}
