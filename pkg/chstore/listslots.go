package chstore

import (
	"context"
	"fmt"
)

// Deep pages by slot counts. The ingester keeps the live persons of
// each slot of 2^14 ranks (person_windows, slotcount.go), so a page at
// offset N adds the slots' counts up to the slot holding row N and reads
// through FINAL only the slots from there to the one holding its last
// row: about one slot (~2,000 keys at the bench's density) however deep
// the page, instead of every key before it.
//
// The counts and person_order are written at different moments of a
// batch (person_order first, then persons, the slots, the project count),
// so a reader can see them disagree. The slots are checked against the
// project's count (written after them): when they do not add up, or the
// slots read fall short of a page the count says exists, the page takes
// the windows' path (listdeep.go), which never trusts a count. A person
// moved between slots by a batch still being written may shift a page by
// a row, as any offset page shifts under writes.

// slotLive is one slot's live persons.
type slotLive struct {
	slot uint32
	live uint64
}

// projectSlots returns the project's slots with live persons, newest
// first. One small statement: a row per slot (~1,900 for a year).
func (s *Store) projectSlots(ctx context.Context, project uint64) ([]slotLive, error) {
	rows, err := s.conn.Query(ctx, `SELECT slot, argMax(live, version) AS n FROM person_windows
		WHERE project_id = ? GROUP BY slot HAVING n > 0 ORDER BY slot`, project)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []slotLive
	for rows.Next() {
		var sl slotLive
		if err := rows.Scan(&sl.slot, &sl.live); err != nil {
			return nil, err
		}
		out = append(out, sl)
	}
	return out, rows.Err()
}

// slotRange is the rank range to read for rows [offset, end) and how
// many live keys of it come before offset; ok is false when the slots
// cannot place the page (they do not add up to total).
func slotRange(slots []slotLive, total, offset, end uint64) (lo, hi, skip uint64, ok bool) {
	var sum uint64
	for _, sl := range slots {
		sum += sl.live
	}
	if sum != total || offset >= total {
		return 0, 0, 0, false
	}
	end = min(end, total)
	var before uint64 // live keys in the slots before slots[i]
	i := 0
	for before+slots[i].live <= offset {
		before += slots[i].live
		i++
	}
	j, through := i, before+slots[i].live
	for through < end {
		j++
		through += slots[j].live
	}
	lo = uint64(slots[i].slot) << slotShift
	hi = (uint64(slots[j].slot)+1)<<slotShift - 1
	return lo, hi, offset - before, true
}

// slotPage returns the page's keys read from the slots holding it; ok is
// false when the caller must take the windows' path.
func (s *Store) slotPage(ctx context.Context, q ListQuery, total uint64) ([]pageRow, bool, error) {
	slots, err := s.projectSlots(ctx, q.ProjectID)
	if err != nil {
		return nil, false, fmt.Errorf("slot counts: %w", err)
	}
	end := uint64(q.Offset + q.Limit)
	lo, hi, skip, ok := slotRange(slots, total, uint64(q.Offset), end)
	if !ok {
		return nil, false, nil
	}
	keys, err := s.queryKeys(ctx, `SELECT rid, version FROM person_order FINAL
		WHERE project_id = ? AND rank >= ? AND rank <= ? AND is_deleted = 0 ORDER BY rank, rid LIMIT ?, ?`,
		q.ProjectID, lo, hi, skip, q.Limit)
	if err != nil {
		return nil, false, err
	}
	if uint64(len(keys)) < min(end, total)-uint64(q.Offset) {
		return nil, false, nil
	}
	return keys, true, nil
}
