package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
)

// Counting a property's values reads every live person of the project
// that has the key (persons FINAL: 1M persons take ~0.5 s). The
// counts change only where persons change, so CountPropertyValues keeps
// them per range of person ids (a bucket) and recounts only the buckets
// that have new person rows.
//
// Which buckets have new rows: every row the ingester writes after the
// API read the committed sequence W (the watermark the ingester publishes
// after each commit, docs/architecture.md) has a version above W: it
// belongs to a batch not committed then, whose rows all carry sequences
// above the last commit (a refold after a crash too: it writes sequences
// above the commit it restarts from). So counts computed after reading W
// are stale exactly in the buckets holding a row with version > W, which
// the ingester's person_buckets lists (schema 0013: each bucket's highest
// version, written ahead of the persons rows; a scan of the persons'
// version column cost 69 ms at 1M persons), and a recount of those reads
// them by key range of the sort key (project_id, id). The counts are the persons FINAL answer, not an approximation:
// TestValueCountsFollowChanges compares them with the direct query after
// every batch of random changes, rows of uncommitted batches included.
//
// Not cached: a value filter (contains), and keys with more than
// maxCountedValues distinct values (their top 20 needs every value: the
// direct query, as before). Counts are recounted in full after
// valueCountsMaxAge, a bound on anything writing persons rows outside the
// ingester; wiping the tables under a running API (a replay into empty
// tables) needs an API restart, as the watermark it waits on does.

const (
	// ValueBucketWidth is the id range of a bucket. Ids are stream
	// sequences of the creating events, so a bucket holds the persons
	// created by 16384 consecutive messages: one person's change
	// recounts at most that many. Schema 0013's backfill names it too.
	ValueBucketWidth = 1 << 14
	// maxCountedValues bounds the distinct values of a cached key, and
	// maxCountedPairs the (bucket, value) pairs one count reads back.
	maxCountedValues = 4096
	maxCountedPairs  = 1 << 16
	// maxRecountRanges: with more stale buckets, one statement recounts
	// the whole key (a long list of ranges costs more than it saves).
	maxRecountRanges = 64
	// maxCountedKeys bounds the (project, key) entries kept; the least
	// recently used goes first.
	maxCountedKeys    = 512
	valueCountsMaxAge = 10 * time.Minute
)

// valueCounts is the API's cache of property value counts by bucket.
type valueCounts struct {
	mu      sync.Mutex
	entries map[valueKey]*valueEntry
	now     func() time.Time
	// full and partial count the recounts (tests: export_test.go).
	full, partial int
}

type valueKey struct {
	project uint64
	key     string
}

// valueEntry is one key's counts as of watermark.
type valueEntry struct {
	mu        sync.Mutex // held while counting, so one request counts
	ready     bool
	watermark uint64
	countedAt time.Time
	tooMany   bool // more than maxCountedValues: answered directly until countedAt + max age
	buckets   map[uint64]map[string]uint64
	totals    map[string]uint64
	used      time.Time // guarded by valueCounts.mu
}

func newValueCounts() *valueCounts {
	return &valueCounts{entries: map[valueKey]*valueEntry{}, now: time.Now}
}

// entry returns the entry of a key, making room when needed.
func (c *valueCounts) entry(project uint64, key string) *valueEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := valueKey{project, key}
	e := c.entries[k]
	if e == nil {
		if len(c.entries) >= maxCountedKeys {
			var oldest valueKey
			var at time.Time
			for k, e := range c.entries {
				if at.IsZero() || e.used.Before(at) {
					oldest, at = k, e.used
				}
			}
			delete(c.entries, oldest)
		}
		e = &valueEntry{}
		c.entries[k] = e
	}
	e.used = c.now()
	return e
}

func (c *valueCounts) counted(full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if full {
		c.full++
	} else {
		c.partial++
	}
}

// CountPropertyValues is PropertyValues (same answer) from counts kept
// per bucket of person ids, recounting only the buckets changed since;
// committed is the ingester's committed sequence, read before the call.
func (s *Store) CountPropertyValues(ctx context.Context, projectID uint64, key, contains string, committed uint64) ([]PropertyValue, error) {
	if key == "" || strings.HasPrefix(key, "$virt") {
		return []PropertyValue{}, nil
	}
	if contains != "" || s.values == nil {
		return s.PropertyValues(ctx, projectID, key, contains)
	}
	e := s.values.entry(projectID, key)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := s.values.now()
	switch {
	case !e.ready || committed < e.watermark || now.Sub(e.countedAt) > valueCountsMaxAge:
		if err := s.recount(ctx, e, projectID, key, true, nil); err != nil {
			return nil, err
		}
		e.ready, e.countedAt = true, now
	case e.tooMany:
	case committed > e.watermark:
		stale, err := s.bucketsAbove(ctx, projectID, e.watermark)
		if err != nil {
			return nil, err
		}
		all := len(stale) > maxRecountRanges
		if all {
			e.countedAt = now
		}
		if err := s.recount(ctx, e, projectID, key, all, stale); err != nil {
			e.ready = false // recounted in full next time
			return nil, err
		}
	}
	e.watermark = committed
	if e.tooMany {
		return s.PropertyValues(ctx, projectID, key, contains)
	}
	return topValues(e.totals), nil
}

// bucketsAbove lists the buckets holding a person row with version > seq,
// from person_buckets (schema 0013): the ingester writes each bucket's
// highest version there before the persons rows, so every persons row
// above seq has its bucket there. Rows ahead of their persons rows (a
// batch in flight, a crashed attempt) only add a bucket to recount.
// Physical rows, no FINAL: a merge keeps each bucket's highest version,
// which is above seq when any of its rows was.
func (s *Store) bucketsAbove(ctx context.Context, projectID, seq uint64) ([]uint64, error) {
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT bucket FROM person_buckets WHERE project_id = ? AND version > ?", projectID, seq)
	if err != nil {
		return nil, fmt.Errorf("property values: changed persons: %w", err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var b uint64
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// writePersonBuckets writes, for each (project, bucket) the persons rows
// of a batch fall in, their highest version (schema 0013).
func (s *Store) writePersonBuckets(ctx context.Context, persons []fold.PersonRow) error {
	if len(persons) == 0 {
		return nil
	}
	type bucket struct{ project, n uint64 }
	high := map[bucket]uint64{}
	for _, p := range persons {
		k := bucket{p.ProjectID, p.ID / ValueBucketWidth}
		high[k] = max(high[k], p.Version)
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_buckets (project_id, bucket, version)`)
	if err != nil {
		return err
	}
	for k, v := range high {
		if err := batch.Append(k.project, k.n, v); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// recount counts the key's values in the buckets only (all: in every
// bucket, replacing the entry's counts) and updates the totals.
func (s *Store) recount(ctx context.Context, e *valueEntry, projectID uint64, key string, all bool, only []uint64) error {
	if !all && len(only) == 0 {
		return nil
	}
	s.values.counted(all)
	ranges, args := "", []any{uint64(ValueBucketWidth), key, projectID, key}
	if !all {
		conds := make([]string, len(only))
		for i, b := range only {
			conds[i] = "(id >= ? AND id < ?)"
			args = append(args, b*ValueBucketWidth, (b+1)*ValueBucketWidth)
		}
		ranges = " AND (" + strings.Join(conds, " OR ") + ")"
	}
	args = append(args, maxCountedPairs+1)
	rows, err := s.conn.Query(statement.Read(ctx), `SELECT intDiv(id, ?) AS b, v, count() FROM (
			SELECT id, property_values[indexOf(property_keys, ?)] AS v FROM persons FINAL
			WHERE project_id = ? AND is_deleted = 0 AND has(property_keys, ?)`+ranges+`)
		WHERE v != '' AND v != 'null' GROUP BY b, v LIMIT ?`, args...)
	if err != nil {
		return fmt.Errorf("property values: count: %w", err)
	}
	defer rows.Close()
	fresh := map[uint64]map[string]uint64{}
	pairs := 0
	for rows.Next() {
		var b, n uint64
		var v string
		if err := rows.Scan(&b, &v, &n); err != nil {
			return err
		}
		if fresh[b] == nil {
			fresh[b] = map[string]uint64{}
		}
		fresh[b][v] = n
		pairs++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if all {
		e.buckets, e.totals, only = map[uint64]map[string]uint64{}, map[string]uint64{}, nil
	}
	for _, b := range only {
		for v, n := range e.buckets[b] {
			if e.totals[v] -= n; e.totals[v] == 0 {
				delete(e.totals, v)
			}
		}
		delete(e.buckets, b)
	}
	for b, counts := range fresh {
		e.buckets[b] = counts
		for v, n := range counts {
			e.totals[v] += n
		}
	}
	e.tooMany = pairs > maxCountedPairs || len(e.totals) > maxCountedValues
	if e.tooMany {
		e.buckets, e.totals = nil, nil
	}
	return nil
}

// topValues orders counts as PropertyValues does: most frequent first,
// ties by value byte-wise, MaxPropertyValues of them.
func topValues(totals map[string]uint64) []PropertyValue {
	out := make([]PropertyValue, 0, len(totals))
	for v, n := range totals {
		out = append(out, PropertyValue{Name: v, Count: n})
	}
	slices.SortFunc(out, func(a, b PropertyValue) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), MaxPropertyValues)]
}
