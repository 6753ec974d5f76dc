package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// A page near the list's start in one statement (h/g5b). Each statement
// costs ClickHouse about 1 ms of CPU before it reads anything (h/reads),
// and such a page took three: the count, the page's keys in the first
// window, the page's rows by key. Here the count and the window's bound
// are scalar subqueries of person_counts, and the keys an IN subquery of
// the rows' read (ClickHouse builds its set before choosing granules, so
// the rows are still read by key). The statement answers the page only
// when it comes back full: a short page (the window too narrow, the
// list's end, a project without a count, rows deleted meanwhile) goes the
// general way (list.go), which widens the window and never trusts the
// count to end a page.
//
// The rows come back unordered; they are put in the list's order by their
// own created_at and id, the order person_order keeps. Mid-batch
// (person_order is written before persons) a person whose created_at
// moved may sit where its new key says while showing the old created_at,
// as the three statements' page did too.

// firstWindowPage returns the page and the count when the first window
// holds the whole page; done is false otherwise.
func (s *Store) firstWindowPage(ctx context.Context, q ListQuery) (list []PersonRecord, total uint64, done bool, err error) {
	// counted is the rows of person_counts: none means no count yet. The
	// bound is orderRank(newest - window), bitNot(rid) is idOfRID(rid).
	rows, err := s.conn.Query(ctx, `WITH (SELECT argMax(live, version) FROM person_counts WHERE project_id = ?) AS total,
			(SELECT count() FROM person_counts WHERE project_id = ?) AS counted
		SELECT `+personColumns+`, total, counted FROM persons FINAL
		PREWHERE project_id = ? AND id IN (SELECT bitNot(rid) FROM person_order FINAL
			WHERE project_id = ? AND rank <= (SELECT 4294967295 - toUInt32(argMax(newest, version)) + ? FROM person_counts WHERE project_id = ?)
				AND is_deleted = 0 ORDER BY rank, rid LIMIT ?, ?)
		WHERE is_deleted = 0`,
		q.ProjectID, q.ProjectID, q.ProjectID, q.ProjectID, uint64(orderWindows[0]/time.Second), q.ProjectID, q.Offset, q.Limit)
	if err != nil {
		return nil, 0, false, fmt.Errorf("list persons: %w", err)
	}
	defer rows.Close()
	var counted uint64
	for rows.Next() {
		var p PersonRecord
		var props string
		var ident uint8
		if err := rows.Scan(&p.ID, &p.UUID, &props, &p.DistinctIDs, &p.CreatedAt, &ident, &total, &counted); err != nil {
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
	if len(list) < q.Limit || counted == 0 {
		return nil, 0, false, nil
	}
	slices.SortFunc(list, func(a, b PersonRecord) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return -c
		}
		return -cmp.Compare(a.ID, b.ID)
	})
	return list, total, true, nil
}
