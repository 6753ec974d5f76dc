package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/propfilter"
)

// The unfiltered list without reading the project (issue #12): the count
// is the ingester's (person_counts), and the page's ids come from
// person_order, whose sort key is the list's order. ClickHouse 18.16
// cannot read a table in key order for ORDER BY ... LIMIT (19.14 can), so
// the page is read from a key range: the persons created in a window
// before the project's newest created_at, widened until it holds the
// rows up to the page's end. The range is a prefix of the order, so its
// first rows are the list's. FINAL on a key range merges that range only
// (every version of a row has the same key).

// orderWindows are the successive windows before the newest created_at
// of a page near the start (listdeep.go for the others); the whole
// project follows them.
var orderWindows = []time.Duration{time.Hour, 8 * time.Hour, 64 * time.Hour, 512 * time.Hour, 4096 * time.Hour, 32768 * time.Hour}

func (q ListQuery) unfiltered() bool {
	return q.DistinctID == "" && q.Email == "" && q.Search == "" && q.Properties.SQL == ""
}

// listUnfiltered answers an unfiltered page; ok is false when the project
// has no maintained count yet (the caller takes the general path). slots
// false takes the windows' path for every page (a test's A/B). A page
// whose keys were read at q.Mark is answered from them (listmark.go).
func (s *Store) listUnfiltered(ctx context.Context, q ListQuery, slots bool) ([]PersonRecord, uint64, bool, error) {
	for {
		if kept, ok := s.marks.page(q.ProjectID, q.Mark, q.Offset, q.Limit); ok {
			list, ok, err := s.pageRows(ctx, q.ProjectID, kept.keys)
			if err != nil || ok {
				return list, kept.total, err == nil, err
			}
			// A row merged away since under a newer version: read again.
		}
		wait, done := s.marks.claim(q.ProjectID, q.Mark, q.Offset, q.Limit)
		if wait == nil {
			defer done()
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, 0, false, ctx.Err()
		}
	}
	if q.Offset+q.Limit <= shallowRows {
		keys, total, newest, done, err := s.firstWindowKeys(ctx, q)
		if err != nil {
			return nil, 0, false, err
		}
		if done {
			list, ok, err := s.pageRows(ctx, q.ProjectID, keys)
			if err != nil {
				return nil, 0, false, err
			}
			if ok {
				// The count too: a deeper page at this watermark
				// then reads no count (it needs it to place its slots).
				s.marks.putCount(q.ProjectID, q.Mark, total, newest)
				s.marks.putPage(q.ProjectID, q.Mark, q.Offset, q.Limit, keys, total)
				return list, total, true, nil
			}
		}
	}
	total, newest, ok, err := s.markedLiveCount(ctx, q)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	if uint64(q.Offset) >= total {
		s.marks.putPage(q.ProjectID, q.Mark, q.Offset, q.Limit, nil, total)
		return nil, total, true, nil
	}
	var keys []pageRow
	if slots && q.Offset+q.Limit > shallowRows {
		var deep bool
		if keys, deep, err = s.slotPage(ctx, q, total); err != nil {
			return nil, 0, false, fmt.Errorf("list persons: %w", err)
		}
		if deep {
			list, err := s.materialiseKeys(ctx, q, keys, total)
			return list, total, true, err
		}
	}
	bounds, err := s.windowBounds(ctx, q, newest)
	if err != nil {
		return nil, 0, false, fmt.Errorf("list persons: %w", err)
	}
	for i, bound := range bounds {
		// Only the page's keys come back; a full page proves the window
		// held every row before it.
		keys, err = s.queryKeys(ctx, `SELECT rid, version FROM person_order FINAL
			WHERE project_id = ? AND rank <= ? AND is_deleted = 0 ORDER BY rank, rid LIMIT ?, ?`,
			q.ProjectID, bound, q.Offset, q.Limit)
		if err != nil {
			return nil, 0, false, fmt.Errorf("list persons: %w", err)
		}
		if len(keys) >= q.Limit && i < len(orderWindows) && q.Offset+q.Limit <= shallowRows {
			s.firstHints.set(q.ProjectID, firstHint{newest: newest, window: i})
		}
		if len(keys) >= q.Limit || i == len(bounds)-1 {
			break
		}
	}
	list, err := s.materialiseKeys(ctx, q, keys, total)
	return list, total, true, err
}

// markedLiveCount is LiveCount, kept by q.Mark (listmark.go).
func (s *Store) markedLiveCount(ctx context.Context, q ListQuery) (live uint64, newest time.Time, ok bool, err error) {
	if live, newest, ok := s.marks.count(q.ProjectID, q.Mark); ok {
		return live, newest, true, nil
	}
	live, newest, ok, err = s.LiveCount(ctx, q.ProjectID)
	if err == nil && ok {
		s.marks.putCount(q.ProjectID, q.Mark, live, newest)
	}
	return live, newest, ok, err
}

// queryKeys runs a statement reading person_order's rid and version: a
// page's persons and the versions to show (listfirst.go).
func (s *Store) queryKeys(ctx context.Context, sql string, args ...any) ([]pageRow, error) {
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pageRow
	for rows.Next() {
		var rid, version uint64
		if err := rows.Scan(&rid, &version); err != nil {
			return nil, err
		}
		out = append(out, pageRow{id: idOfRID(rid), version: version})
	}
	return out, rows.Err()
}

// materialiseKeys returns the rows of q's page's keys at their versions
// (pageRows: the row cache, then a read at those versions; the keys are
// then kept by q.Mark with total), or, when a key is ahead of persons
// mid-batch, the newest rows through FINAL.
func (s *Store) materialiseKeys(ctx context.Context, q ListQuery, keys []pageRow, total uint64) ([]PersonRecord, error) {
	project := q.ProjectID
	list, ok, err := s.pageRows(ctx, project, keys)
	if err != nil {
		return nil, err
	}
	if ok {
		s.marks.putPage(project, q.Mark, q.Offset, q.Limit, keys, total)
		return list, nil
	}
	ids := make([]uint64, len(keys))
	for i, k := range keys {
		ids[i] = k.id
	}
	return s.materialise(ctx, project, ids)
}

// materialise reads the full rows of a page's ids by key, in the page's
// order; a person deleted meanwhile is left out.
func (s *Store) materialise(ctx context.Context, projectID uint64, ids []uint64) ([]PersonRecord, error) {
	return s.materialiseWhere(ctx, projectID, ids, propfilter.Clause{})
}

// materialiseWhere is materialise leaving out, too, a person whose newest
// row no longer matches f (changed since its id was chosen).
func (s *Store) materialiseWhere(ctx context.Context, projectID uint64, ids []uint64, f propfilter.Clause) ([]PersonRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	where, args := "is_deleted = 0", []any{projectID, statement.Set(ids)}
	if f.SQL != "" {
		where += " AND " + f.SQL
		args = append(args, f.Args...)
	}
	// PREWHERE on the key alone is safe with FINAL (every version of a
	// person has the same key) and makes ClickHouse read the wide columns
	// of the granules holding the page only; with WHERE, 18.16 read them
	// for neighbouring rows too, another project's widest person included.
	// The newest rows at their versions also fill the row cache
	// (rowcache.go) for the shallow pages that follow.
	found, _, err := s.queryVersioned(ctx, projectID, "SELECT "+personColumns+", version FROM persons FINAL PREWHERE project_id = ? AND id IN ? WHERE "+where, args...)
	if err != nil {
		return nil, err
	}
	byID := make(map[uint64]PersonRecord, len(found))
	for _, p := range found {
		byID[p.ID] = p
	}
	list := make([]PersonRecord, 0, len(ids))
	for _, id := range ids {
		if p, ok := byID[id]; ok {
			list = append(list, p)
			delete(byID, id) // once, whatever the order table says
		}
	}
	return list, nil
}

// queryVersioned is queryPersons of statements that read the version
// too: it returns each row's, and puts each row in the row cache.
func (s *Store) queryVersioned(ctx context.Context, project uint64, sql string, args ...any) (out []PersonRecord, versions []uint64, err error) {
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p PersonRecord
		var props string
		var ident uint8
		var version uint64
		if err := rows.Scan(&p.ID, &p.UUID, &props, &p.DistinctIDs, &p.CreatedAt, &ident, &version); err != nil {
			return nil, nil, err
		}
		if p, err = decodePerson(p, props, ident); err != nil {
			return nil, nil, err
		}
		s.rows.put(project, version, p, len(props))
		out, versions = append(out, p), append(versions, version)
	}
	return out, versions, rows.Err()
}
