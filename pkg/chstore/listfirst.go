package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A page near the list's start in one statement (h/g5b). Each statement
// costs ClickHouse about 1 ms of CPU before it reads anything (h/reads),
// and such a page took three: the count, the page's keys in a window, the
// page's rows by key. Here the keys are an IN subquery of the rows' read
// (ClickHouse builds its set before choosing granules, so the rows are
// still read by key: two granules in all) and the count comes joined from
// person_counts. A scalar subquery would do for the count, but 18.16 runs
// each one twice while analysing the statement.
//
// The window needs the project's newest created_at before the statement,
// so the store remembers, per project, the newest the last page saw and
// the window that held it (firstHints). Any window is a prefix of the
// list's order, so the hint only decides the cost, never the result: a
// stale newest widens the window, and a page the window does not fill (a
// window too narrow, the list's end, rows deleted meanwhile) goes the
// general way (list.go), which widens the window, never trusts the count
// to end a page, and leaves a new hint.
//
// The rows come back unordered; they are put in the list's order by their
// own created_at and id, the order person_order keeps. Mid-batch
// (person_order is written before persons) a person whose created_at
// moved may sit where its new key says while showing the old created_at,
// as the three statements' page did too.

// firstHint is what the last shallow page of a project saw.
type firstHint struct {
	newest time.Time
	window int // index in orderWindows
}

// firstHints are the projects' hints.
type firstHints struct {
	mu sync.Mutex
	by map[uint64]firstHint
}

func (h *firstHints) get(project uint64) (firstHint, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.by[project]
	return v, ok
}

func (h *firstHints) set(project uint64, v firstHint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.by[project] = v
}

// firstWindowPage returns the page and the count when the project's hint
// gives a window holding the whole page; done is false otherwise.
func (s *Store) firstWindowPage(ctx context.Context, q ListQuery) (list []PersonRecord, total uint64, done bool, err error) {
	hint, ok := s.firstHints.get(q.ProjectID)
	if !ok {
		return nil, 0, false, nil
	}
	// counted is the rows of person_counts (the join drops the page when
	// there are none); bitNot(rid) is idOfRID(rid).
	rows, err := s.conn.Query(ctx, `SELECT `+personColumns+`, live, newest FROM persons FINAL
		ANY INNER JOIN (SELECT project_id, argMax(live, version) AS live, argMax(newest, version) AS newest
			FROM person_counts WHERE project_id = ? GROUP BY project_id) USING project_id
		PREWHERE project_id = ? AND id IN (SELECT bitNot(rid) FROM person_order FINAL
			WHERE project_id = ? AND rank <= ? AND is_deleted = 0 ORDER BY rank, rid LIMIT ?, ?)
		WHERE is_deleted = 0`,
		q.ProjectID, q.ProjectID, q.ProjectID, orderRank(hint.newest.Add(-orderWindows[hint.window])), q.Offset, q.Limit)
	if err != nil {
		return nil, 0, false, fmt.Errorf("list persons: %w", err)
	}
	defer rows.Close()
	var newest time.Time
	for rows.Next() {
		var p PersonRecord
		var props string
		var ident uint8
		if err := rows.Scan(&p.ID, &p.UUID, &props, &p.DistinctIDs, &p.CreatedAt, &ident, &total, &newest); err != nil {
			return nil, 0, false, fmt.Errorf("list persons: %w", err)
		}
		if p, err = decodePerson(p, props, ident); err != nil {
			return nil, 0, false, err
		}
		list = append(list, p)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, false, fmt.Errorf("list persons: %w", err)
	}
	if len(list) < q.Limit {
		return nil, 0, false, nil
	}
	s.firstHints.set(q.ProjectID, firstHint{newest: newest, window: hint.window})
	slices.SortFunc(list, func(a, b PersonRecord) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return -c
		}
		return -cmp.Compare(a.ID, b.ID)
	})
	return list, total, true, nil
}
