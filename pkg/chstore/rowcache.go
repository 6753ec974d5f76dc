package chstore

import (
	"sync"
	"sync/atomic"
)

// A cache of persons' rows by (project, id, version) for the list's pages.
// A read by key through FINAL decompresses whole blocks of
// properties (~0.9 MB for one person, docs/performance.md): most of a first page's
// cost. Yet a row never changes once written at a version: versions are
// stream sequences, one flush writes a person once per batch, and the
// fold is deterministic, so a row written again (a retried batch, a
// replay) is the same row. So a page reads through FINAL only the narrow
// columns that decide it (id, version, created_at, is_deleted) and takes
// the wide ones from here when the version matches: exact by
// construction. A PATCH gives the person a new version, which misses and
// is read; a deleted or merged person's newest row is a tombstone, which
// FINAL leaves out before the cache is asked. Nothing here is a cached
// response: the count, the keys and the versions are read every time.
//
// Bounded by an estimate of the bytes held, with two generations: a hit
// in the old one moves the row to the new one, and when the new one is
// full the old one is dropped. That keeps the rows in use (a first page)
// at the price of at most twice the budget.

// DefaultRowCacheBytes is the rows' budget of a Store (Config.RowCacheBytes).
const DefaultRowCacheBytes = 32 << 20

type rowKey struct{ project, id uint64 }

type cachedRow struct {
	version uint64
	p       PersonRecord
	size    int
}

// rowCache holds rows by key, each at one version (the last stored).
type rowCache struct {
	mu       sync.Mutex
	budget   int // bytes of one generation
	cur, old map[rowKey]cachedRow
	curBytes int
	// hits and misses count lookups (tests, docs/performance.md).
	hits, misses atomic.Uint64
}

func newRowCache(budget int) *rowCache {
	return &rowCache{budget: budget / 2, cur: map[rowKey]cachedRow{}, old: map[rowKey]cachedRow{}}
}

// get returns the person's row at version. The record is shared: its
// Properties and DistinctIDs must not be changed (the API only encodes
// them).
func (c *rowCache) get(project, id, version uint64) (PersonRecord, bool) {
	if c == nil || c.budget <= 0 {
		return PersonRecord{}, false
	}
	k := rowKey{project, id}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.cur[k]
	if !ok {
		if r, ok = c.old[k]; ok && r.version == version {
			delete(c.old, k)
			c.putLocked(k, r)
		}
	}
	if !ok || r.version != version {
		c.misses.Add(1)
		return PersonRecord{}, false
	}
	c.hits.Add(1)
	return r.p, true
}

// put stores p as the person's row at version; props is the length of
// its properties' JSON (most of its size).
func (c *rowCache) put(project, version uint64, p PersonRecord, props int) {
	if c == nil || c.budget <= 0 {
		return
	}
	size := 128 + props
	for _, d := range p.DistinctIDs {
		size += 16 + len(d)
	}
	if size > c.budget/64 { // one huge person must not flush the rest
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(rowKey{project, p.ID}, cachedRow{version: version, p: p, size: size})
}

func (c *rowCache) putLocked(k rowKey, r cachedRow) {
	if prev, ok := c.cur[k]; ok {
		if prev.version > r.version {
			return // a slower reader of an older version
		}
		c.curBytes -= prev.size
	}
	if c.curBytes+r.size > c.budget {
		c.old, c.cur, c.curBytes = c.cur, map[rowKey]cachedRow{}, 0
	}
	c.cur[k] = r
	c.curBytes += r.size
}

// RowCacheStats are the row cache's lookups so far.
func (s *Store) RowCacheStats() (hits, misses uint64) {
	return s.rows.hits.Load(), s.rows.misses.Load()
}
