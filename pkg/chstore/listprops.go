package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/propfilter"
)

// A properties filter without FINAL (issue #12: within 1.5x of a bare
// count of the rows the filter matches). FINAL in 18.16 merges every part
// of the project in one thread, and grouping the project by id costs as
// much; both cost several scans of the filter's columns. Instead:
//
//  1. candidates: the rows, of any version, that match the filter, read
//     with the filter in PREWHERE (the scan the baseline makes),
//     returning (id, version, created_at, is_deleted) only; each person's
//     newest matching row is kept, and dropped if it is a tombstone;
//  2. verification: every row of the candidates' ids, narrow columns,
//     read by key. A candidate whose id has a newer row is stale unless
//     that row is live and matches (possible only for a row written since
//     step 1); the filter is tested again on those few rows only.
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
	createdAt   uint32 // unix seconds, as created_at is stored
	stale       bool   // the person's newest row does not match
}

// candidates recycles the settled candidates' slices between lists: one
// matching row of 10% of a 1M-person project is ~160k candidates, 3.8 MB
// grown by append (7.5 MB allocated) per list, which drove the API's
// collections (docs/performance.md: the properties list's tail).
var candidates sync.Pool

// maxPooledCandidates bounds the slices kept (96 MB of candidates).
const maxPooledCandidates = 4 << 20

func getCandidates() []propCandidate {
	if p, ok := candidates.Get().(*[]propCandidate); ok {
		return (*p)[:0]
	}
	return nil
}

func putCandidates(c []propCandidate) {
	if cap(c) == 0 || cap(c) > maxPooledCandidates {
		return
	}
	c = c[:0]
	candidates.Put(&c)
}

// propertiesOnly reports whether q filters by properties and nothing else,
// the case listByProperties answers. The indexed filters (distinct_id,
// email, search) name few candidates by key and keep their FINAL path.
func (q ListQuery) propertiesOnly() bool {
	return q.Properties.SQL != "" && q.DistinctID == "" && q.Email == "" && q.Search == ""
}

// listByProperties answers a page of a properties-only filter.
func (s *Store) listByProperties(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	return s.listByPropertiesWith(ctx, q, true)
}

// listByPropertiesWith is listByProperties, settling by version when
// byVersion holds and a snapshot is to be had, else verifying every
// candidate by key (a benchmark compares the two).
func (s *Store) listByPropertiesWith(ctx context.Context, q ListQuery, byVersion bool) ([]PersonRecord, uint64, error) {
	// The snapshot is taken before the scan starts (listnewest.go).
	var snap *newestSnapshot
	indexed, err := false, error(nil)
	if byVersion {
		snap, indexed, err = s.newestSnapshot(ctx, q.ProjectID)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: newest versions: %w", err)
	}
	var live, check []propCandidate
	if indexed {
		live, check, err = s.settledCandidates(ctx, q.ProjectID, q.Properties, snap)
		// Nothing returned refers to live (pages are copied out).
		defer func() { putCandidates(live) }()
	} else {
		check, err = s.propCandidates(ctx, q.ProjectID, q.Properties)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: candidates: %w", err)
	}
	if len(check) == 0 {
		n := 0 // all: no limit
		if q.Limit > 0 {
			n = q.Offset + q.Limit
		}
		list, err := s.materialiseRows(ctx, q, topForList(live, n))
		return list, uint64(len(live)), err
	}
	// The page as the candidates give it is read while they are verified:
	// a candidate is stale only until ClickHouse merges the person's parts,
	// so the guess is nearly always the page, and materialise tests the
	// newest row of each of its persons anyway.
	guess := pageIDs(sortedForList(append(slices.Clone(live), check...)), q)
	type result struct {
		list []PersonRecord
		err  error
	}
	read := make(chan result, 1)
	go func() {
		list, err := s.materialiseWhere(ctx, q.ProjectID, guess, q.Properties)
		read <- result{list, err}
	}()
	verified, err := s.dropStale(ctx, q.ProjectID, q.Properties, check)
	page := <-read // always received: the goroutine ends before we return
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: verify: %w", err)
	}
	if page.err != nil {
		return nil, 0, page.err
	}
	live = append(live, verified...)
	ids := pageIDs(sortedForList(live), q)
	if slices.Equal(ids, guess) {
		return page.list, uint64(len(live)), nil
	}
	list, err := s.materialiseWhere(ctx, q.ProjectID, ids, q.Properties)
	return list, uint64(len(live)), err
}

// materialiseRows reads the rows of q's page of the ordered candidates,
// each the very row (id, version) that matched, so without FINAL (which
// merged the page's granules: twice the time). A person with two rows at
// one of the page's versions (one event wrote both), or whose row was
// merged away under a newer one since, makes it read the page through
// FINAL instead, the filter tested on the newest rows.
func (s *Store) materialiseRows(ctx context.Context, q ListQuery, ordered []propCandidate) ([]PersonRecord, error) {
	ids := pageIDs(ordered, q)
	if len(ids) == 0 {
		return nil, nil
	}
	versions := make([]uint64, 0, len(ids))
	for _, c := range ordered[q.Offset : q.Offset+len(ids)] {
		versions = append(versions, c.version)
	}
	found, err := s.queryPersons(ctx, "SELECT "+personColumns+" FROM persons PREWHERE project_id = ? AND id IN ? WHERE version IN ?",
		q.ProjectID, statement.Set(ids), statement.Set(versions))
	if err != nil {
		return nil, err
	}
	byID := make(map[uint64]PersonRecord, len(found))
	for _, p := range found {
		byID[p.ID] = p
	}
	if len(found) != len(ids) || len(byID) != len(ids) {
		return s.materialiseWhere(ctx, q.ProjectID, ids, q.Properties)
	}
	list := make([]PersonRecord, 0, len(ids))
	for _, id := range ids {
		p, ok := byID[id]
		if !ok {
			return s.materialiseWhere(ctx, q.ProjectID, ids, q.Properties)
		}
		list = append(list, p)
	}
	return list, nil
}

// sortedForList sorts cands in the list's order: created_at DESC, id DESC.
func sortedForList(cands []propCandidate) []propCandidate {
	slices.SortFunc(cands, compareForList)
	return cands
}

func compareForList(a, b propCandidate) int {
	if c := cmp.Compare(b.createdAt, a.createdAt); c != 0 {
		return c
	}
	return cmp.Compare(b.id, a.id)
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

// settledCandidates scans the rows, of any version, that match f (the
// scan the bare count makes, returning two narrow columns of the matching
// rows) and settles each against snap, the newest version of every
// person known before the scan (listnewest.go): live holds one candidate
// per person whose newest row matches and is live, with that row's
// created_at; check, ordered by id, the persons with a matching row newer
// than snap knows (written since), to verify by key (their version 0, so
// that dropStale tests their newest row, whichever it is, and takes its
// created_at). Rows are scanned one by one: groupArray's arrays cost more
// to decode in the driver.
func (s *Store) settledCandidates(ctx context.Context, projectID uint64, f propfilter.Clause, snap *newestSnapshot) (live, check []propCandidate, err error) {
	rows, err := s.conn.Query(ctx, "SELECT id, version FROM persons PREWHERE project_id = ? AND "+f.SQL, append([]any{projectID}, f.Args...)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var newer []uint64
	live = getCandidates()
	for rows.Next() {
		var id, version uint64
		if err := rows.Scan(&id, &version); err != nil {
			return nil, nil, err
		}
		e, found := snap.lookup(id)
		switch {
		case !found || version > e.version():
			newer = append(newer, id)
		case version == e.version() && !e.deleted():
			// A row inserted twice (a retried batch) is listed once:
			// duplicates are removed below.
			live = append(live, propCandidate{id: id, version: version, createdAt: e.created})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(newer) == 0 && !hasDuplicateIDs(live) {
		return live, nil, nil
	}
	slices.SortFunc(live, func(a, b propCandidate) int { return cmp.Compare(a.id, b.id) })
	live = slices.CompactFunc(live, func(a, b propCandidate) bool { return a.id == b.id })
	if len(newer) == 0 {
		return live, nil, nil
	}
	// A person with a row newer than the snapshot is decided by its
	// newest row, read by key, even if an older one settled as live.
	slices.Sort(newer)
	newer = slices.Compact(newer)
	live = slices.DeleteFunc(live, func(c propCandidate) bool {
		_, ok := slices.BinarySearch(newer, c.id)
		return ok
	})
	check = make([]propCandidate, len(newer))
	for i, id := range newer {
		check[i] = propCandidate{id: id, stale: true} // until its newest row matches
	}
	return live, check, nil
}

// hasDuplicateIDs reports whether two candidates share an id. A person
// has one newest version, so only a row inserted twice does; a bitmap
// over the ids' range costs less than sorting 100k candidates.
func hasDuplicateIDs(cands []propCandidate) bool {
	if len(cands) < 2 {
		return false
	}
	lo, hi := cands[0].id, cands[0].id
	for _, c := range cands {
		lo, hi = min(lo, c.id), max(hi, c.id)
	}
	if hi-lo > 64*uint64(len(cands)) {
		seen := make(map[uint64]struct{}, len(cands))
		for _, c := range cands {
			if _, ok := seen[c.id]; ok {
				return true
			}
			seen[c.id] = struct{}{}
		}
		return false
	}
	bits := make([]uint64, (hi-lo)/64+1)
	for _, c := range cands {
		i := c.id - lo
		if bits[i/64]&(1<<(i%64)) != 0 {
			return true
		}
		bits[i/64] |= 1 << (i % 64)
	}
	return false
}

// propCandidates returns each person's newest matching row, if live,
// ordered by id: the candidates when there is no snapshot, all verified
// by key.
func (s *Store) propCandidates(ctx context.Context, projectID uint64, f propfilter.Clause) ([]propCandidate, error) {
	// is_deleted is read for the matching rows only, not tested in
	// PREWHERE for every row: a person's deletion is final, so a matching
	// tombstone newer than its matching live rows ends it.
	rows, err := s.conn.Query(ctx, "SELECT id, version, toUInt32(created_at), is_deleted FROM persons PREWHERE project_id = ? AND "+f.SQL,
		append([]any{projectID}, f.Args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []propCandidate
	for rows.Next() {
		var c propCandidate
		var deleted uint8
		if err := rows.Scan(&c.id, &c.version, &c.createdAt, &deleted); err != nil {
			return nil, err
		}
		c.stale = deleted == 1
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return newestMatching(out), nil
}

// newestMatching returns each person's newest matching row, if live,
// ordered by id.
func newestMatching(out []propCandidate) []propCandidate {
	slices.SortFunc(out, func(a, b propCandidate) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.version, b.version)
	})
	// Keep each id's newest matching row (the last of its run), if live.
	kept := out[:0]
	for i, c := range out {
		if (i+1 < len(out) && out[i+1].id == c.id) || c.stale {
			continue
		}
		kept = append(kept, c)
	}
	return kept
}

// topForList returns the first n of cands in the list's order (all of
// them when n <= 0), choosing them with a heap: the first page of 100k
// candidates needs no full sort. The candidates are walked from the last:
// the scan returns each part's rows by id, and ids grow with created_at,
// so from the first nearly every row entered the heap (4.3 ms for 100k
// candidates at 1M persons); from the last, few do.
func topForList(cands []propCandidate, n int) []propCandidate {
	if n <= 0 || n >= len(cands)/4 {
		return sortedForList(cands)
	}
	// h is a max-heap in list order: h[0] is the last of the n kept.
	h := slices.Clone(cands[len(cands)-n:])
	down := func(i int) {
		for {
			l, big := 2*i+1, i
			if l < n && compareForList(h[l], h[big]) > 0 {
				big = l
			}
			if r := l + 1; r < n && compareForList(h[r], h[big]) > 0 {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for i := len(cands) - n - 1; i >= 0; i-- {
		if c := cands[i]; compareForList(c, h[0]) < 0 {
			h[0] = c
			down(0)
		}
	}
	return sortedForList(h)
}

// idTable is an external table of ids (and versions, with versions): an
// id list of a large project spliced into the SQL text would cost more to
// parse than the scan it serves.
func idTable(name string, cands []propCandidate, versions bool) (*ext.Table, error) {
	cols := []func(*ext.Table) error{ext.Column("id", "UInt64")}
	if versions {
		cols = append(cols, ext.Column("version", "UInt64"))
	}
	tbl, err := ext.NewTable(name, cols...)
	if err != nil {
		return nil, err
	}
	for _, c := range cands {
		if versions {
			err = tbl.Append(c.id, c.version)
		} else {
			err = tbl.Append(c.id)
		}
		if err != nil {
			return nil, err
		}
	}
	return tbl, nil
}

// dropStale removes the candidates whose person's newest row is deleted
// or does not match (cands ordered by id, one per id). Every row of the
// candidates' ids is read by key, narrow columns only (a version test in
// ClickHouse costs more than sending the rows); the filter is tested again
// only on the live rows newer than their candidate (a version that stopped
// matching, not merged away yet, or a row written since the candidates
// were read, which may match).
func (s *Store) dropStale(ctx context.Context, projectID uint64, f propfilter.Clause, cands []propCandidate) ([]propCandidate, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	tbl, err := idTable("cand", cands, false)
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(statement.WithExternalTables(ctx, tbl),
		`SELECT id, version, is_deleted FROM persons PREWHERE project_id = ? AND id IN (SELECT id FROM cand)`, projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	at := func(id uint64) int {
		i, _ := slices.BinarySearchFunc(cands, id, func(c propCandidate, id uint64) int { return cmp.Compare(c.id, id) })
		return i
	}
	// newest[i] is the version of cands[i]'s newest row when it is newer
	// than the candidate, and whether that row is deleted.
	type row struct {
		version uint64
		deleted bool
	}
	newest := map[int]row{}
	for rows.Next() {
		var id, version uint64
		var deleted uint8
		if err := rows.Scan(&id, &version, &deleted); err != nil {
			return nil, err
		}
		i := at(id)
		if i == len(cands) || cands[i].id != id || version <= cands[i].version {
			continue
		}
		if n, ok := newest[i]; !ok || version > n.version {
			newest[i] = row{version, deleted == 1}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var newer []propCandidate
	for i, n := range newest {
		cands[i].stale = true // until the filter says otherwise
		cands[i].version = n.version
		if !n.deleted {
			newer = append(newer, cands[i])
		}
	}
	if len(newer) > 0 {
		if err := s.matchNewer(ctx, projectID, f, cands, newer, at); err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(cands, func(c propCandidate) bool { return c.stale }), nil
}

// matchNewer un-marks the candidates whose newest row (in newer, live)
// matches the filter, and takes its created_at.
func (s *Store) matchNewer(ctx context.Context, projectID uint64, f propfilter.Clause, cands, newer []propCandidate, at func(uint64) int) error {
	tbl, err := idTable("newer", newer, true)
	if err != nil {
		return err
	}
	rows, err := s.conn.Query(statement.WithExternalTables(ctx, tbl),
		"SELECT id, toUInt32(created_at) FROM persons PREWHERE project_id = ? AND (id, version) IN (SELECT id, version FROM newer) WHERE "+f.SQL,
		append([]any{projectID}, f.Args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var created uint32
		if err := rows.Scan(&id, &created); err != nil {
			return err
		}
		c := &cands[at(id)]
		c.stale, c.createdAt = false, created
	}
	return rows.Err()
}
