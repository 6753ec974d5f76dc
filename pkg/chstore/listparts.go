package chstore

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/personhub/personhub/pkg/propfilter"
)

// Verifying fewer candidates (issue #12, G5d). A candidate is stale only
// if its person has a newer row, and most persons have one row: only the
// recent writes, not merged yet, have more. ReplacingMergeTree keeps one
// row per key in a merged part (level > 0), so the rows of a person are
// its row in the largest merged part L, if any, and its rows outside L,
// which are few (the recent writes). Those are read in one narrow
// statement (ClickHouse prunes parts on `_part`, so L is not read), while
// the candidates are. A candidate then knows its person's newest row when
//
//   - it was read from L (L holds no other row of it), or
//   - the newest row seen is newer than every row of L (L's highest
//     version, kept per part name since a part never changes, and
//     computed only when more than checkByKeyMax candidates need it);
//
// the others are verified by key as before (dropStale). Right after a
// large fill most rows are outside any merged part; then (outsideShare)
// every candidate is verified by key, as before. Each step stays
// exact when parts change under it: a merge that absorbs L makes the
// outside read return every row (slow, still right), and a write after
// the candidates' read lands outside L.
//
// On a cluster `persons` is a Distributed table with no parts of its own:
// largestMergedPart finds none and every candidate is verified by key.

// partVersions caches the highest version of the parts largestMergedPart
// named: one scan of a part's version column when a merge makes a new one.
type partVersions struct {
	mu  sync.Mutex
	max map[string]uint64
}

// outsideShare bounds the rows outside the merged part, as a fraction of
// its own (1/outsideShare): past it (just after a large fill, while
// merges catch up) reading them would cost more than verifying by key.
const outsideShare = 8

// checkByKeyMax is the number of candidates outside the merged part worth
// verifying by key before computing the part's highest version (a scan of
// its version column, once per part).
const checkByKeyMax = 1024

// largestMergedPart names the active merged part of persons with the most
// rows, or "" when there is none or the rows outside it are too many.
func (s *Store) largestMergedPart(ctx context.Context) (string, error) {
	var name string
	var rows, total uint64
	err := s.conn.QueryRow(ctx, `SELECT argMaxIf(name, rows, level > 0), maxIf(rows, level > 0), sum(rows)
		FROM system.parts WHERE database = currentDatabase() AND table = 'persons' AND active`).Scan(&name, &rows, &total)
	if err != nil || rows == 0 || (total-rows)*outsideShare > rows {
		return "", err
	}
	return name, nil
}

// partMax returns the highest version of part, computed once per part.
func (s *Store) partMax(ctx context.Context, part string) (uint64, error) {
	s.parts.mu.Lock()
	v, ok := s.parts.max[part]
	s.parts.mu.Unlock()
	if ok {
		return v, nil
	}
	if err := s.conn.QueryRow(ctx, "SELECT max(version) FROM persons WHERE _part = ?", part).Scan(&v); err != nil {
		return 0, err
	}
	s.parts.mu.Lock()
	defer s.parts.mu.Unlock()
	if len(s.parts.max) >= 64 { // merged away long ago, most of them
		clear(s.parts.max)
	}
	s.parts.max[part] = v
	return v, nil
}

// settleOutside settles cands against the rows outside part (settle),
// knowing part's highest version only when enough candidates need it.
func (s *Store) settleOutside(ctx context.Context, cands []propCandidate, outside []outsideRow, part string) (live, check []propCandidate, err error) {
	live, check = settle(cands, outside, math.MaxUint64) // L may hold any version
	if len(check) <= checkByKeyMax {
		return live, check, nil
	}
	max, err := s.partMax(ctx, part)
	if err != nil {
		return nil, nil, err
	}
	live, check = settle(cands, outside, max)
	return live, check, nil
}

// outsideRow is a row of the project outside the merged part.
type outsideRow struct {
	id, version uint64
	createdAt   uint32
	deleted     bool
	match       bool // the filter holds
}

// rowsOutside returns the project's rows in every part but part, ordered
// by id and version.
func (s *Store) rowsOutside(ctx context.Context, projectID uint64, f propfilter.Clause, part string) ([]outsideRow, error) {
	rows, err := s.conn.Query(ctx, "SELECT id, version, toUInt32(created_at), is_deleted, "+f.SQL+" FROM persons PREWHERE project_id = ? WHERE _part != ?",
		append(slices.Clone(f.Args), projectID, part)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outsideRow
	for rows.Next() {
		var r outsideRow
		var deleted, match uint8
		if err := rows.Scan(&r.id, &r.version, &r.createdAt, &deleted, &match); err != nil {
			return nil, err
		}
		r.deleted, r.match = deleted == 1, match == 1
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b outsideRow) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.version, b.version)
	})
	return out, rows.Err()
}

// settle decides the candidates (ordered by id) whose person's newest row
// is known from outside (ordered by id, version) and partMax, L's highest
// version: live holds those listed, check those to verify by key.
func settle(cands []propCandidate, outside []outsideRow, partMax uint64) (live, check []propCandidate) {
	j := 0
	for _, c := range cands {
		for j < len(outside) && outside[j].id < c.id {
			j++
		}
		newest := outsideRow{id: c.id, version: c.version, createdAt: c.createdAt, match: true}
		for ; j < len(outside) && outside[j].id == c.id; j++ {
			if outside[j].version > newest.version {
				newest = outside[j]
			}
		}
		if !c.inPart && newest.version <= partMax {
			check = append(check, c) // L may hold a newer row
			continue
		}
		if newest.match && !newest.deleted {
			c.version, c.createdAt = newest.version, newest.createdAt
			live = append(live, c)
		}
	}
	return live, check
}
