package chstore

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
)

// The live persons per slot of the list's order (person_windows, schema
// 0015), kept beside person_counts by the same plan (livecount.go) so a
// deep page can skip whole slots unread (listslots.go).
//
// A slot's count as of sequence t is the number of persons live at t whose
// created_at at t falls in the slot: a function of the log, like the
// project's count. A batch from c+1 to l moves each person it wrote from
// (its slot at c, its liveness at c) to (its slot at l, its liveness at l).
// Its slot at l is its row's; its slot at c is its row's too unless the
// batch moved its created_at, in which case fold.Batch.Rekeyed holds the
// created_at the store had (as of c, for a project without rows above the
// commit point). A project holding rows above c is counted from the store,
// as for person_counts; its slots are then counted at the newest rows'
// created_at, which is the created_at at l once the commit point has passed
// those rows: the last recount, which writes every slot, is exact.

// slotShift makes a slot 2^14 s (4.55 h) of created_at: ~2,000 persons at
// the bench's 1M persons (one every 8 s), so a deep page reads about one
// slot through FINAL, and a project of 1M persons over a year has ~1,900
// slots to add up.
const slotShift = 14

func slotOf(createdAt time.Time) uint32 { return orderRank(createdAt) >> slotShift }

// slotCounts are a project's live persons per slot.
type slotCounts map[uint32]uint64

type personRef struct{ project, id uint64 }

// slotPlan is the slots' part of one batch's countPlan.
type slotPlan struct {
	base    map[uint64]slotCounts // incremental: counts as of c (copies)
	fresh   map[uint64]bool       // never counted: every slot is written
	rekeyed map[personRef]time.Time
	rows    map[uint64]slotCounts // to write at l
	full    map[uint64]slotCounts // every slot as of l, for commit
}

// liveAt is a person's liveness at sequence t from its newest row (the
// rule in livecount.go).
func liveAt(r fold.PersonRow, t uint64) int64 {
	if fold.CreatedSeq(r.ID) <= t && !(r.IsDeleted && r.Version <= t) {
		return 1
	}
	return 0
}

// beginSlots reads the slot counts as of c of the batch's projects not
// known yet (lc.mu held): stored rows, or, for a project never counted,
// a count from the store.
func (lc *liveCounts) beginSlots(ctx context.Context, s *Store, plan *countPlan, c uint64, b fold.Batch) error {
	sp := &slotPlan{base: map[uint64]slotCounts{}, fresh: map[uint64]bool{}, rekeyed: map[personRef]time.Time{},
		rows: map[uint64]slotCounts{}, full: map[uint64]slotCounts{}}
	plan.slots = sp
	for _, r := range b.Rekeyed {
		// The first: a batch moves a person's created_at at most once
		// from the stored one (fold.Folder.Flush).
		if _, ok := sp.rekeyed[personRef{r.ProjectID, r.ID}]; !ok {
			sp.rekeyed[personRef{r.ProjectID, r.ID}] = r.CreatedAt
		}
	}
	var unknown []uint64
	for project := range plan.persons {
		if plan.recount[project] {
			continue
		}
		if k, ok := lc.slots[project]; ok {
			sp.base[project] = maps.Clone(k)
		} else {
			unknown = append(unknown, project)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	stored, err := s.storedSlots(ctx, unknown)
	if err != nil {
		return err
	}
	for _, project := range unknown {
		if k, ok := stored[project]; ok {
			sp.base[project] = k
			continue
		}
		k, err := s.countSlotsAt(ctx, project, c)
		if err != nil {
			return err
		}
		sp.base[project], sp.fresh[project] = k, true
	}
	return nil
}

// finishSlots computes the slot counts as of l: the rows writeSlots
// writes beside the project counts.
func (lc *liveCounts) finishSlots(ctx context.Context, s *Store, plan *countPlan, l uint64) error {
	sp, c := plan.slots, plan.from
	for project, full := range sp.base {
		delta := map[uint32]int64{}
		for _, r := range plan.persons[project] {
			old := r.CreatedAt
			if t, ok := sp.rekeyed[personRef{project, r.ID}]; ok {
				old = t
			}
			delta[slotOf(old)] -= liveAt(r, c)
			delta[slotOf(r.CreatedAt)] += liveAt(r, l)
		}
		rows := slotCounts{}
		for slot, d := range delta {
			n := int64(full[slot]) + d
			if n < 0 {
				return fmt.Errorf("project %d slot %d: live count below zero (%d)", project, slot, n)
			}
			full[slot] = uint64(n)
			if d != 0 {
				rows[slot] = uint64(n)
			}
		}
		if sp.fresh[project] {
			rows = full
		}
		sp.rows[project], sp.full[project] = rows, full
	}
	for project := range plan.recount {
		full, err := s.countSlotsAt(ctx, project, l)
		if err != nil {
			return err
		}
		// Every slot the store shows live, so none keeps a count the
		// recount no longer finds (a slot its persons moved out of).
		stored, err := s.storedSlots(ctx, []uint64{project})
		if err != nil {
			return err
		}
		for slot := range stored[project] {
			if _, ok := full[slot]; !ok {
				full[slot] = 0
			}
		}
		sp.rows[project], sp.full[project] = full, full
	}
	return nil
}

// writeSlots writes the batch's changed slot counts at l.
func (s *Store) writeSlots(ctx context.Context, sp *slotPlan, l uint64) error {
	n := 0
	for _, rows := range sp.rows {
		n += len(rows)
	}
	if n == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_windows (project_id, slot, live, version)`)
	if err != nil {
		return err
	}
	for project, rows := range sp.rows {
		for slot, live := range rows {
			if err := batch.Append(project, slot, live, l); err != nil {
				batch.Abort()
				return err
			}
		}
	}
	return batch.Send()
}

// commitSlots records the batch's slot counts (lc.mu held).
func (lc *liveCounts) commitSlots(plan *countPlan) {
	for project, full := range plan.slots.full {
		lc.slots[project] = full
	}
}

// storedSlots returns the newest row of each slot of the projects that
// have any (zeros included: a project with rows was counted whole).
func (s *Store) storedSlots(ctx context.Context, projects []uint64) (map[uint64]slotCounts, error) {
	rows, err := s.conn.Query(ctx, "SELECT project_id, slot, argMax(live, version) FROM person_windows WHERE project_id IN ? GROUP BY project_id, slot", statement.Set(projects))
	if err != nil {
		return nil, fmt.Errorf("stored slot counts: %w", err)
	}
	defer rows.Close()
	out := map[uint64]slotCounts{}
	for rows.Next() {
		var project, live uint64
		var slot uint32
		if err := rows.Scan(&project, &slot, &live); err != nil {
			return nil, err
		}
		if out[project] == nil {
			out[project] = slotCounts{}
		}
		out[project][slot] = live
	}
	return out, rows.Err()
}

// countSlotsAt counts a project's persons live as of t per slot of their
// newest row's created_at (a scan of the project, as countLiveAt): for a
// project never counted, or holding rows of an uncommitted batch.
func (s *Store) countSlotsAt(ctx context.Context, project, t uint64) (slotCounts, error) {
	rows, err := s.conn.Query(statement.Read(ctx), `SELECT toUInt32(intDiv(bitNot(toUInt32(created_at)), ?)) AS slot,
		toUInt64(countIf(if(id >= ?, toUInt64(intDiv(id - ?, ?)), id) <= ? AND NOT (is_deleted = 1 AND version <= ?)))
		FROM persons FINAL WHERE project_id = ? GROUP BY slot`,
		uint32(1)<<slotShift, fold.SplitPersonIDsBase, fold.SplitPersonIDsBase, event.MaxSplitPerEvent, t, t, project)
	if err != nil {
		return nil, fmt.Errorf("count slots: %w", err)
	}
	defer rows.Close()
	out := slotCounts{}
	for rows.Next() {
		var slot uint32
		var live uint64
		if err := rows.Scan(&slot, &live); err != nil {
			return nil, err
		}
		if live > 0 {
			out[slot] = live
		}
	}
	return out, rows.Err()
}
