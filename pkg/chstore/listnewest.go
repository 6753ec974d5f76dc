package chstore

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Settling candidates by version (issue #12). A candidate (the
// newest row of a person that matches a properties filter) is listed
// exactly when no newer row of the person exists. The store keeps, per
// project, the newest version of every person (and whether that row is a
// tombstone), read from the persons parts ClickHouse already has; a
// candidate is then settled in Go by comparing versions, with no second
// read of the project (an earlier version settled only the candidates of
// the largest merged part that way, and fell back to a read by key of
// every candidate while merges were behind, as right after a fill).
//
// Why reading parts is enough: persons is append-only (no mutation or
// TRUNCATE touches it) and a ReplacingMergeTree merge keeps each key's
// newest row, so the newest version of a person over the rows ever
// inserted equals the newest over the rows stored now. A part's content
// never changes, and a part covers a range of insert block numbers: the
// index remembers the ranges it has read, and reads only the active parts
// whose blocks it has not seen (new inserts; a merge of read blocks needs
// nothing). The first list of a project in a process reads the project's
// (id, version, is_deleted) once.
//
// Exactness under concurrent writes (newestIndex.snapshot): a snapshot is
// built from parts listed before the candidates' scan starts, so every row
// it knows is visible to the scan (or merged into a newer row that is).
// For a candidate of version v and a snapshot version n of its person:
//
//   - n == v: the candidate is the newest row: listed;
//   - n > v: the newest row was read by the scan and did not match (or is
//     a tombstone): not listed;
//   - n < v or none: the candidate was written after the snapshot; a
//     newer row may exist unseen: verified by key (dropStale), rarely.

// maxIndexedRows bounds the rows of persons the index is built for (16
// bytes a person in memory); past it, lists verify candidates by key.
const maxIndexedRows = 32 << 20

// maxIndexRounds bounds the listings of parts one snapshot takes while
// merges replace the parts it is reading; past it the list verifies its
// candidates by key (exact, slower).
const maxIndexRounds = 4

// newestEntry is a person's newest version, shifted left once, the low
// bit set when that row is a tombstone, and that row's created_at (the
// list's order, so the scan need not read it).
type newestEntry struct {
	id, vd  uint64
	created uint32
}

func (e newestEntry) version() uint64 { return e.vd >> 1 }
func (e newestEntry) deleted() bool   { return e.vd&1 == 1 }

// newestSnapshot is a project's index as of one moment: a base of
// entries sorted by id, one per person, with starts[b] the first entry
// whose id>>shift is b, so a lookup is a bucket of about one entry (a
// binary search over 1M entries per matching row cost 12 ms for 78k
// rows); and a delta, the entries read from parts since the base was
// built, sorted by id, each newer than the base's entry of its id. A new
// part costs a copy of the delta, not of the base (at 1M persons a full
// copy was 24 MB and 5-10 ms on the request that found the part); the
// delta is folded into a new base once it holds an eighth of the base's
// entries, so the copies stay linear in the rows written.
type newestSnapshot struct {
	entries []newestEntry
	starts  []uint32
	shift   uint
	delta   []newestEntry
	// deltaBits has bit id&deltaMask set for each id of delta: a
	// matching row's id is searched in delta only when its bit is set.
	deltaBits []uint64
	deltaMask uint64
}

func newSnapshot(entries []newestEntry) *newestSnapshot {
	s := &newestSnapshot{entries: entries}
	if len(entries) == 0 {
		return s
	}
	top := entries[len(entries)-1].id
	for s.shift < 64 && top>>s.shift >= uint64(len(entries)) {
		s.shift++
	}
	buckets := top>>s.shift + 1
	s.starts = make([]uint32, buckets+1)
	j := 0
	for b := range s.starts {
		for j < len(entries) && entries[j].id>>s.shift < uint64(b) {
			j++
		}
		s.starts[b] = uint32(j)
	}
	return s
}

// with returns the snapshot updated by found (sorted by id, one per id),
// s left as it is for the lists holding it.
func (s *newestSnapshot) with(found []newestEntry) *newestSnapshot {
	if s == nil {
		return newSnapshot(found)
	}
	if len(found) == 0 {
		return s
	}
	// A part may hold rows older than the base's (a refold): the delta
	// keeps only entries newer than the base's, so it may shadow it.
	fresh := make([]newestEntry, 0, len(found))
	for _, e := range found {
		if b, ok := s.baseLookup(e.id); !ok || e.vd > b.vd {
			fresh = append(fresh, e)
		}
	}
	delta := mergeNewest(s.delta, fresh)
	if len(delta) > len(s.entries)/8 {
		return newSnapshot(mergeNewest(s.entries, delta))
	}
	n := &newestSnapshot{entries: s.entries, starts: s.starts, shift: s.shift, delta: delta}
	size := uint64(64) // bits: at least 16 per delta entry, a power of two
	for size < 16*uint64(len(delta)) {
		size <<= 1
	}
	n.deltaMask = size - 1
	n.deltaBits = make([]uint64, size/64)
	for _, e := range delta {
		i := e.id & n.deltaMask
		n.deltaBits[i/64] |= 1 << (i % 64)
	}
	return n
}

// lookup returns id's entry.
func (s *newestSnapshot) lookup(id uint64) (newestEntry, bool) {
	if len(s.delta) > 0 {
		if i := id & s.deltaMask; s.deltaBits[i/64]&(1<<(i%64)) != 0 {
			if j, ok := slices.BinarySearchFunc(s.delta, id, func(e newestEntry, id uint64) int { return cmp.Compare(e.id, id) }); ok {
				return s.delta[j], true
			}
		}
	}
	return s.baseLookup(id)
}

// baseLookup returns id's entry in the base.
func (s *newestSnapshot) baseLookup(id uint64) (newestEntry, bool) {
	b := id >> s.shift
	if len(s.entries) == 0 || b+1 >= uint64(len(s.starts)) {
		return newestEntry{}, false
	}
	for _, e := range s.entries[s.starts[b]:s.starts[b+1]] {
		if e.id == id {
			return e, true
		}
	}
	return newestEntry{}, false
}

// persons is a lower bound of the persons the snapshot knows.
func (s *newestSnapshot) persons() int { return max(len(s.entries), len(s.delta)) }

// blockRange is a part's insert blocks in a partition.
type blockRange struct {
	partition string
	min, max  int64
}

// projectNewest is one project's index: its latest snapshot (never
// changed in place: a list keeps the one it took) and the blocks read.
type projectNewest struct {
	mu      sync.Mutex // held while reading parts, so one reader fills it
	snap    *newestSnapshot
	covered []blockRange // sorted by partition, min; disjoint
}

// newestIndex holds the projects' indexes.
type newestIndex struct {
	mu       sync.Mutex
	projects map[uint64]*projectNewest
}

func newNewestIndex() *newestIndex { return &newestIndex{projects: map[uint64]*projectNewest{}} }

func (x *newestIndex) project(id uint64) *projectNewest {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.projects[id]
	if !ok {
		p = &projectNewest{}
		x.projects[id] = p
	}
	return p
}

// activePart is a row of system.parts.
type activePart struct {
	name   string
	blocks blockRange
	rows   uint64
}

// personsParts lists the active parts of persons (none on a cluster,
// where persons is a Distributed table).
func (s *Store) personsParts(ctx context.Context) ([]activePart, error) {
	rows, err := s.conn.Query(ctx, `SELECT name, partition_id, min_block_number, max_block_number, rows
		FROM system.parts WHERE database = currentDatabase() AND table = 'persons' AND active`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []activePart
	for rows.Next() {
		var p activePart
		if err := rows.Scan(&p.name, &p.blocks.partition, &p.blocks.min, &p.blocks.max, &p.rows); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// newestSnapshot returns the project's index covering every part active
// when it returns, or ok false when there is none to be had (a cluster,
// a table too large, parts replaced faster than they are read).
func (s *Store) newestSnapshot(ctx context.Context, projectID uint64) (*newestSnapshot, bool, error) {
	p := s.newest.project(projectID)
	p.mu.Lock()
	defer p.mu.Unlock()
	parts, err := s.personsParts(ctx)
	if err != nil || len(parts) == 0 {
		p.snap, p.covered = nil, nil // emptied (or a cluster): start over
		return nil, false, err
	}
	for round := 0; round < maxIndexRounds; round++ {
		var total uint64
		for _, part := range parts {
			total += part.rows
		}
		if total > maxIndexedRows {
			return nil, false, nil
		}
		if p.snap != nil && (p.recreated(parts) || total < uint64(p.snap.persons())) {
			p.snap, p.covered = nil, nil
		}
		var read []activePart
		for _, part := range parts {
			if !p.covers(part.blocks) {
				read = append(read, part)
			}
		}
		if len(read) == 0 && p.snap != nil {
			return p.snap, true, nil
		}
		found, err := s.readNewest(ctx, projectID, read)
		if err != nil {
			return nil, false, err
		}
		// A part read is known only if it was still active after the
		// read began (a part merged away before it returned nothing);
		// the next listing shows which were, and names the new parts
		// holding the others' rows, read in the next round.
		if parts, err = s.personsParts(ctx); err != nil {
			return nil, false, err
		}
		p.snap = p.snap.with(found)
		for _, r := range read {
			if slices.ContainsFunc(parts, func(a activePart) bool { return a.name == r.name }) {
				p.cover(r.blocks)
			}
		}
	}
	return nil, false, nil
}

// readNewest reads the project's rows of parts, narrow columns, as one
// sorted entry per id. (groupArray's arrays cost more to decode in the
// driver than the rows.)
func (s *Store) readNewest(ctx context.Context, projectID uint64, parts []activePart) ([]newestEntry, error) {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	rows, err := s.conn.Query(ctx, "SELECT id, version, is_deleted, toUInt32(created_at) FROM persons PREWHERE project_id = ? WHERE _part IN ?",
		projectID, statement.Set(names))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []newestEntry
	for rows.Next() {
		var e newestEntry
		var version uint64
		var deleted uint8
		if err := rows.Scan(&e.id, &version, &deleted, &e.created); err != nil {
			return nil, err
		}
		e.vd = version<<1 | uint64(deleted&1)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return newestOnly(out), nil
}

// newestOnly sorts entries by id and keeps each id's newest (for equal
// versions, the tombstone: a version is one event, so they do not differ).
func newestOnly(es []newestEntry) []newestEntry {
	if !slices.IsSortedFunc(es, compareNewest) {
		slices.SortFunc(es, compareNewest)
	}
	out := es[:0]
	for i, e := range es {
		if i+1 < len(es) && es[i+1].id == e.id {
			continue // the last of an id's run is its newest
		}
		out = append(out, e)
	}
	return out
}

func compareNewest(a, b newestEntry) int {
	if c := cmp.Compare(a.id, b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.vd, b.vd)
}

// mergeNewest returns a new slice holding, per id, the newest of old and
// found (both sorted, one per id); old is left as it is for snapshots.
func mergeNewest(old, found []newestEntry) []newestEntry {
	if len(found) == 0 {
		return old
	}
	out := make([]newestEntry, 0, len(old)+len(found))
	i, j := 0, 0
	for i < len(old) && j < len(found) {
		switch a, b := old[i], found[j]; {
		case a.id < b.id:
			out = append(out, a)
			i++
		case a.id > b.id:
			out = append(out, b)
			j++
		default:
			if b.vd > a.vd {
				a = b
			}
			out = append(out, a)
			i, j = i+1, j+1
		}
	}
	out = append(out, old[i:]...)
	return append(out, found[j:]...)
}

// covers reports whether every block of b has been read.
func (p *projectNewest) covers(b blockRange) bool {
	for _, c := range p.covered {
		if c.partition == b.partition && c.min <= b.min && b.max <= c.max {
			return true
		}
	}
	return false
}

// cover records b as read, joining the ranges it touches.
func (p *projectNewest) cover(b blockRange) {
	kept := p.covered[:0]
	for _, c := range p.covered {
		if c.partition == b.partition && c.min <= b.max+1 && b.min <= c.max+1 {
			b.min, b.max = min(b.min, c.min), max(b.max, c.max)
			continue
		}
		kept = append(kept, c)
	}
	p.covered = append(kept, b)
	slices.SortFunc(p.covered, func(a, b blockRange) int {
		if c := cmp.Compare(a.partition, b.partition); c != 0 {
			return c
		}
		return cmp.Compare(a.min, b.min)
	})
}

// recreated reports whether persons was dropped and created again since
// the index was read (block numbers start over): no active part reaches
// the highest block read. An append-only table never does this; a test
// or an operator rebuilding the tables may.
func (p *projectNewest) recreated(parts []activePart) bool {
	highest := map[string]int64{}
	for _, c := range p.covered {
		highest[c.partition] = max(highest[c.partition], c.max)
	}
	for _, part := range parts {
		if h, ok := highest[part.blocks.partition]; ok && part.blocks.max >= h {
			delete(highest, part.blocks.partition)
		}
	}
	return len(highest) > 0
}
