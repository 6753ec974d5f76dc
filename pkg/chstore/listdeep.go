package chstore

import (
	"context"
	"math"
	"time"
)

// Deep pages (G5e). The page reads person_order through FINAL from the
// list's start to the end of a window, so its cost is the window's rows:
// a window eight times wider than the page's end, or a window too narrow
// to hold it (read for nothing), costs several times the rows the page
// needs. A page past the first rows therefore counts, first, the rows of
// finer windows (doubling from an hour) without FINAL, narrowest first:
// a count on a key range reads the narrow rank column of that range only,
// several times cheaper than FINAL, which merges and sorts it. The count
// includes tombstones and versions not merged yet, so it is an upper
// bound of a window's live keys: a window whose count is below the page's
// end cannot hold it and is never read through FINAL; the first that may
// hold it is (usually it does; else the next). The result is still
// decided by FINAL alone.

// shallowRows is how deep a page may end and still use orderWindows
// directly: the first window nearly always holds it, and the count would
// cost more than it saves.
const shallowRows = 2048

// deepWindows double from an hour up to orderWindows' widest finite one;
// the project's whole order follows them.
func deepWindows() []time.Duration {
	var ws []time.Duration
	for w := time.Hour; w <= 32768*time.Hour; w *= 2 {
		ws = append(ws, w)
	}
	return ws
}

// windowBounds are the rank bounds to try in turn for q's page; the last
// is the whole project.
func (s *Store) windowBounds(ctx context.Context, q ListQuery, newest time.Time) ([]uint64, error) {
	ws := orderWindows
	deep := q.Offset+q.Limit > shallowRows
	if deep {
		ws = deepWindows()
	}
	bounds := make([]uint64, 0, len(ws)+1)
	for _, w := range ws {
		bounds = append(bounds, uint64(orderRank(newest.Add(-w))))
	}
	if deep {
		// The narrowest window whose count may hold the page's end.
		end := uint64(q.Offset + q.Limit)
		i := 0
		for ; i < len(bounds); i++ {
			var n uint64
			err := s.conn.QueryRow(ctx, "SELECT count() FROM person_order WHERE project_id = ? AND rank <= ?", q.ProjectID, bounds[i]).Scan(&n)
			if err != nil {
				return nil, err
			}
			if n >= end {
				break
			}
		}
		bounds = bounds[i:]
	}
	return append(bounds, math.MaxUint32), nil
}
