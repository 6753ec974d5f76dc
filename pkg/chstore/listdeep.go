package chstore

import (
	"context"
	"math"
	"time"
)

// Deep pages (large offsets) of a project whose slots the ingester has not counted
// yet, or whose slots disagree with its count mid-batch (listslots.go
// serves the others). The page reads person_order through FINAL from the
// list's start to the end of a window, so its cost is the window's rows:
// a window eight times wider than the page's end, or windows too narrow
// to hold it (read for nothing), cost several times the rows the page
// needs. A page past the first rows therefore chooses its window by
// counting rows without FINAL: a count on a key range reads the narrow
// rank column of that range only, several times cheaper than FINAL, which
// merges and sorts it. The count includes tombstones and versions not
// merged yet, so it is an upper bound of a window's live keys: a window
// whose count is below the page's end cannot hold it and is never read
// through FINAL. The result is still decided by FINAL alone: if the
// chosen window does not hold the page, the next (twice as wide) is read.
//
// The count of the newest hour gives a density, and the search jumps to
// the power-of-two window that density says holds the end, then narrows
// by halves while the count still holds it: a few cheap round trips, and
// a window at most about twice the rows needed.

// shallowRows is how deep a page may end and still use orderWindows
// directly: the first window nearly always holds it, and the counts would
// cost more than they save.
const shallowRows = 2048

// widestWindow is the widest finite window; the whole project follows.
const widestWindow = 32768 * time.Hour

// windowBounds are the rank bounds to try in turn for q's page; the last
// is the whole project.
func (s *Store) windowBounds(ctx context.Context, q ListQuery, newest time.Time) ([]uint64, error) {
	rank := func(w time.Duration) uint64 { return uint64(orderRank(newest.Add(-w))) }
	var bounds []uint64
	if q.Offset+q.Limit <= shallowRows {
		for _, w := range orderWindows {
			bounds = append(bounds, rank(w))
		}
		return append(bounds, math.MaxUint32), nil
	}
	w, err := s.deepWindow(ctx, q.ProjectID, uint64(q.Offset+q.Limit), rank)
	if err != nil {
		return nil, err
	}
	for ; w > 0 && w <= widestWindow; w *= 2 {
		bounds = append(bounds, rank(w))
	}
	return append(bounds, math.MaxUint32), nil
}

// deepWindow is the narrowest power-of-two window (hours) whose count may
// hold end rows, or 0 when none up to widestWindow does.
func (s *Store) deepWindow(ctx context.Context, projectID, end uint64, rank func(time.Duration) uint64) (time.Duration, error) {
	count := func(w time.Duration) (uint64, error) {
		var n uint64
		err := s.conn.QueryRow(ctx, "SELECT count() FROM person_order WHERE project_id = ? AND rank <= ?", projectID, rank(w)).Scan(&n)
		return n, err
	}
	w := time.Hour
	n, err := count(w)
	if err != nil {
		return 0, err
	}
	short := time.Duration(0) // the widest window known too short
	for n < end {
		if w >= widestWindow {
			return 0, nil
		}
		f := time.Duration(2)
		for n > 0 && n*uint64(f) < end && w*f < widestWindow {
			f *= 2
		}
		short, w = w, min(w*f, widestWindow)
		if n, err = count(w); err != nil {
			return 0, err
		}
	}
	// A jump may overshoot where persons are denser than the newest hour.
	for w/2 > short && w/2 >= time.Hour {
		m, err := count(w / 2)
		if err != nil {
			return 0, err
		}
		if m < end {
			break
		}
		w = w / 2
	}
	return w, nil
}
