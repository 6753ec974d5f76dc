package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/propfilter"
)

// A properties filter without FINAL (issue #12, G5d: within 1.5x of a bare
// count of the rows the filter matches). FINAL in 18.16 merges every part
// of the project in one thread, and grouping the project by id costs as
// much; both cost several scans of the filter's columns. Instead:
//
//  1. candidates: the rows, of any version, that are live and match the
//     filter, read with the filter in PREWHERE (the scan the baseline
//     makes), returning (id, version, created_at) only;
//  2. verification: the other rows of the candidates' ids (old versions,
//     tombstones, versions that no longer match, rows written since step
//     1), chosen by key and version. A candidate whose id has a newer row
//     that is deleted or does not match is stale: the person is not
//     listed.
//
// A person is listed exactly when its newest row is live and matches, and
// such a row is always a candidate, so count is exact for any predicate on
// one row (negations such as is_not and is_not_set, cohorts, behavioural
// filters included). The page is then sorted in Go (created_at DESC, id
// DESC) and its full rows are read by key (materialise), the filter tested
// again there so a person changed since step 1 is left out rather than
// shown in a state the filter rejects.

// propCandidate is a live row matching the filter.
type propCandidate struct {
	id, version uint64
	createdAt   time.Time
	stale       bool // the person's newest row does not match
}

// propertiesOnly reports whether q filters by properties and nothing else,
// the case listByProperties answers. The indexed filters (distinct_id,
// email, search) name few candidates by key and keep their FINAL path.
func (q ListQuery) propertiesOnly() bool {
	return q.Properties.SQL != "" && q.DistinctID == "" && q.Email == "" && q.Search == ""
}

// listByProperties answers a page of a properties-only filter.
func (s *Store) listByProperties(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	cands, err := s.propCandidates(ctx, q.ProjectID, q.Properties)
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: candidates: %w", err)
	}
	// The page as the candidates give it is read while they are verified:
	// a candidate is stale only until ClickHouse merges the person's parts,
	// so the guess is nearly always the page, and materialise tests the
	// newest row of each of its persons anyway.
	guess := pageIDs(sortedForList(slices.Clone(cands)), q)
	type result struct {
		list []PersonRecord
		err  error
	}
	read := make(chan result, 1)
	go func() {
		list, err := s.materialiseWhere(ctx, q.ProjectID, guess, q.Properties)
		read <- result{list, err}
	}()
	live, err := s.dropStale(ctx, q.ProjectID, q.Properties, cands)
	page := <-read // always received: the goroutine ends before we return
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: verify: %w", err)
	}
	if page.err != nil {
		return nil, 0, page.err
	}
	ids := pageIDs(sortedForList(live), q)
	if slices.Equal(ids, guess) {
		return page.list, uint64(len(live)), nil
	}
	list, err := s.materialiseWhere(ctx, q.ProjectID, ids, q.Properties)
	return list, uint64(len(live)), err
}

// sortedForList sorts cands in the list's order: created_at DESC, id DESC.
func sortedForList(cands []propCandidate) []propCandidate {
	slices.SortFunc(cands, func(a, b propCandidate) int {
		if c := b.createdAt.Compare(a.createdAt); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return cands
}

// pageIDs returns the ids of q's page of the ordered candidates.
func pageIDs(ordered []propCandidate, q ListQuery) []uint64 {
	from, to := min(q.Offset, len(ordered)), len(ordered)
	if q.Limit > 0 {
		to = min(from+q.Limit, len(ordered))
	}
	ids := make([]uint64, 0, to-from)
	for _, c := range ordered[from:to] {
		ids = append(ids, c.id)
	}
	return ids
}

// propCandidates returns the newest live matching row of each person that
// has one, ordered by id.
func (s *Store) propCandidates(ctx context.Context, projectID uint64, f propfilter.Clause) ([]propCandidate, error) {
	rows, err := s.conn.Query(ctx, "SELECT id, version, created_at FROM persons PREWHERE project_id = ? AND is_deleted = 0 AND "+f.SQL,
		append([]any{projectID}, f.Args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []propCandidate
	for rows.Next() {
		var c propCandidate
		if err := rows.Scan(&c.id, &c.version, &c.createdAt); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b propCandidate) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.version, b.version)
	})
	// Keep each id's newest matching row (the last of its run).
	kept := out[:0]
	for i, c := range out {
		if i+1 < len(out) && out[i+1].id == c.id {
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// dropStale removes the candidates whose person's newest row does not
// match (cands ordered by id, one per id). The rows that are not
// candidates are read, with whether they match: a row written since the
// candidates were read may match too, and then it is the person's state.
func (s *Store) dropStale(ctx context.Context, projectID uint64, f propfilter.Clause, cands []propCandidate) ([]propCandidate, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	// The candidates travel as an external table: an id list of a large
	// project spliced into the SQL text would cost more to parse than the
	// scan it serves.
	tbl, err := ext.NewTable("cand", ext.Column("id", "UInt64"), ext.Column("version", "UInt64"))
	if err != nil {
		return nil, err
	}
	for _, c := range cands {
		if err := tbl.Append(c.id, c.version); err != nil {
			return nil, err
		}
	}
	// Both tests in PREWHERE, on the narrow key and version: the filter's
	// columns are read for the granules of the rows that come back only,
	// few, as a person has several rows only until its parts are merged.
	rows, err := s.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(tbl)),
		`SELECT id, version, created_at, is_deleted = 0 AND `+f.SQL+` FROM persons
		PREWHERE project_id = ? AND id IN (SELECT id FROM cand) AND (id, version) NOT IN (SELECT id, version FROM cand)`,
		append(slices.Clone(f.Args), projectID)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stale := false
	for rows.Next() {
		var r propCandidate
		var match uint8
		if err := rows.Scan(&r.id, &r.version, &r.createdAt, &match); err != nil {
			return nil, err
		}
		i, ok := slices.BinarySearchFunc(cands, r.id, func(c propCandidate, id uint64) int { return cmp.Compare(c.id, id) })
		if ok && r.version > cands[i].version {
			r.stale = match == 0
			stale = stale || r.stale
			cands[i] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !stale {
		return cands, nil
	}
	return slices.DeleteFunc(cands, func(c propCandidate) bool { return c.stale }), nil
}
