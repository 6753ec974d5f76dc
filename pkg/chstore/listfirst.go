package chstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// A page near the list's start in one statement. Each
// statement costs ClickHouse about 1 ms of CPU before it reads anything
// (docs/performance.md), and such a page took three: the count, the page's keys in a
// window, the page's rows by key. Here the page's keys come with their
// versions from person_order in a window, and the count joined from
// person_counts (a scalar subquery would do, but 18.16 runs each one
// twice while analysing the statement). The rows, at those versions,
// come from the row cache (rowcache.go): a read of persons by key
// decompresses whole blocks of properties, most of a page's cost, so
// only the rows the cache lacks are read, at their exact versions, in a
// second statement.
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
// The page is in person_order's key order, the list's. Mid-batch
// (person_order is written before persons) a key may be ahead of the
// persons rows: its version is not there yet, so unless the cache has it
// (then it was read from persons) the page goes the general way, which
// reads the newest rows through FINAL, as before.

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

// pageRow is a person of a page and the version to show.
type pageRow struct{ id, version uint64 }

// firstWindowKeys returns the page's keys and the count (with the newest
// created_at) when the project's hint gives a window holding the whole
// page; done is false otherwise.
func (s *Store) firstWindowKeys(ctx context.Context, q ListQuery) (page []pageRow, total uint64, newest time.Time, done bool, err error) {
	hint, ok := s.firstHints.get(q.ProjectID)
	if !ok {
		return nil, 0, newest, false, nil
	}
	// The join drops the page when person_counts has no row for the
	// project. The page's persons come at the versions of their keys:
	// person_order is written with the persons rows (same batch, same
	// versions, before them), so a live key's version is its person's
	// newest, or one a batch still writing is about to make so. Their
	// rows come from the row cache, the others read at those versions
	// (pageRows): no read of persons through FINAL. The joined subquery
	// has an alias, as current ClickHouse requires.
	rows, err := s.conn.Query(ctx, `SELECT rid, version, live, newest FROM person_order FINAL
		ALL INNER JOIN (SELECT project_id, argMax(live, version) AS live, argMax(newest, version) AS newest
			FROM person_counts WHERE project_id = ? GROUP BY project_id) AS counts USING project_id
		WHERE project_id = ? AND rank <= ? AND is_deleted = 0 ORDER BY rank, rid LIMIT ?, ?`,
		q.ProjectID, q.ProjectID, orderRank(hint.newest.Add(-orderWindows[hint.window])), q.Offset, q.Limit)
	if err != nil {
		return nil, 0, newest, false, fmt.Errorf("list persons: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r pageRow
		var rid uint64
		if err := rows.Scan(&rid, &r.version, &total, &newest); err != nil {
			return nil, 0, newest, false, fmt.Errorf("list persons: %w", err)
		}
		r.id = idOfRID(rid)
		page = append(page, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, newest, false, fmt.Errorf("list persons: %w", err)
	}
	if len(page) < q.Limit {
		return nil, 0, newest, false, nil
	}
	s.firstHints.set(q.ProjectID, firstHint{newest: newest, window: hint.window})
	return page, total, newest, true, nil
}

// pageRows returns the rows of page at their versions, in its order: from
// the row cache, the others read at their exact versions without FINAL
// (its merge would cost as much as the read). ok is false when a row is
// gone (merged away under a newer one since the page was read): the
// caller takes the general path, which reads the newest rows.
func (s *Store) pageRows(ctx context.Context, project uint64, page []pageRow) (list []PersonRecord, ok bool, err error) {
	list = make([]PersonRecord, len(page))
	cached := make([]bool, len(page))
	var ids, versions []uint64
	for i, r := range page {
		if list[i], cached[i] = s.rows.get(project, r.id, r.version); !cached[i] {
			ids, versions = append(ids, r.id), append(versions, r.version)
		}
	}
	if len(ids) == 0 {
		return list, true, nil
	}
	found, vs, err := s.queryVersioned(ctx, project, "SELECT "+personColumns+", version FROM persons PREWHERE project_id = ? AND id IN ? WHERE version IN ?",
		project, statement.Set(ids), statement.Set(versions))
	if err != nil {
		return nil, false, fmt.Errorf("list persons: %w", err)
	}
	type idVersion struct{ id, version uint64 }
	read := make(map[idVersion]PersonRecord, len(found))
	for i, p := range found {
		read[idVersion{p.ID, vs[i]}] = p // a row written twice (a retried batch) is the same row
	}
	for i, r := range page {
		if cached[i] {
			continue
		}
		p, found := read[idVersion{r.id, r.version}]
		if !found {
			return nil, false, nil
		}
		list[i] = p
	}
	return list, true, nil
}
