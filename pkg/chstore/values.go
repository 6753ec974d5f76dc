package chstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// PropertyValue is one value of a person property and how many persons
// have it.
type PropertyValue struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// MaxPropertyValues is how many values PropertyValues returns (PostHog's 20).
const MaxPropertyValues = 20

// PropertyValues returns the most frequent values of person property key
// over the project's live persons, each person counted once (its current
// version: FINAL), most frequent first, ties by value byte-wise; with
// contains, only values holding it case-insensitively. Empty values and
// JSON null are not values. A key that is empty or starts with "$virt"
// (PostHog's virtual properties) has none.
//
// Answers are remembered for ValuesMaxAge (see valuesCache).
func (s *Store) PropertyValues(ctx context.Context, projectID uint64, key, contains string) ([]PropertyValue, error) {
	if key == "" || strings.HasPrefix(key, "$virt") {
		return []PropertyValue{}, nil
	}
	k := valuesKey{project: projectID, key: key, contains: contains}
	if v, found, refresh := s.values.get(k, time.Now()); found {
		if refresh {
			// Detached from the request, which ends first; a failure
			// leaves the old answer, retried by a later request.
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), valuesRefreshTimeout)
				defer cancel()
				if _, err := s.countValues(ctx, k); err != nil {
					s.values.failed(k)
				}
			}()
		}
		return v, nil
	}
	return s.countValues(ctx, k)
}

// countValues counts the values of k over the persons now and remembers
// the answer.
func (s *Store) countValues(ctx context.Context, k valuesKey) ([]PropertyValue, error) {
	at := time.Now()
	projectID, key, contains := k.project, k.key, k.contains
	sql := `SELECT v, count() AS c FROM (
			SELECT property_values[indexOf(property_keys, ?)] AS v FROM persons FINAL
			WHERE project_id = ? AND is_deleted = 0 AND has(property_keys, ?))
		WHERE v != '' AND v != 'null'`
	args := []any{key, projectID, key}
	if contains != "" {
		sql += " AND positionCaseInsensitiveUTF8(v, ?) > 0"
		args = append(args, contains)
	}
	sql += " GROUP BY v ORDER BY c DESC, v ASC LIMIT ?"
	args = append(args, MaxPropertyValues)
	rows, err := s.conn.Query(readCtx(ctx), sql, args...)
	if err != nil {
		return nil, fmt.Errorf("property values: %w", err)
	}
	defer rows.Close()
	out := []PropertyValue{}
	for rows.Next() {
		var v PropertyValue
		if err := rows.Scan(&v.Name, &v.Count); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.values.put(k, out, at)
	return out, nil
}

// ValuesMaxAge is how old an answer of PropertyValues may be before it is
// counted again. The values feed the property-value autocomplete, which
// asks the same key (and growing prefixes) again and again, and an exact
// count is a scan of every person of the project: so an answer is
// remembered, served again while it is younger than this, and, once
// older, served once more while it is counted again in the background
// (docs/cohorts.md).
const ValuesMaxAge = time.Minute

const (
	valuesRefreshTimeout = 5 * time.Minute
	// maxValuesEntries bounds the answers remembered (each at most
	// MaxPropertyValues values).
	maxValuesEntries = 10_000
)

type valuesKey struct {
	project       uint64
	key, contains string
}

type valuesEntry struct {
	values     []PropertyValue
	at         time.Time
	refreshing bool
}

// valuesCache holds recent answers of PropertyValues; the zero value is
// ready.
type valuesCache struct {
	mu sync.Mutex
	m  map[valuesKey]*valuesEntry
}

// get returns a remembered answer, and whether this caller should count
// it again (it is older than ValuesMaxAge and nobody else is).
func (c *valuesCache) get(k valuesKey, now time.Time) (values []PropertyValue, found, refresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil, false, false
	}
	if now.Sub(e.at) > ValuesMaxAge && !e.refreshing {
		e.refreshing, refresh = true, true
	}
	return slices.Clone(e.values), true, refresh
}

// put remembers an answer counted at at, unless a later one is known.
// When full, answers older than ValuesMaxAge go first, then all.
func (c *valuesCache) put(k valuesKey, values []PropertyValue, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok && e.at.After(at) {
		return
	}
	if c.m == nil || len(c.m) >= maxValuesEntries {
		for old, e := range c.m {
			if at.Sub(e.at) > ValuesMaxAge && !e.refreshing {
				delete(c.m, old)
			}
		}
		if c.m == nil || len(c.m) >= maxValuesEntries {
			c.m = map[valuesKey]*valuesEntry{}
		}
	}
	c.m[k] = &valuesEntry{values: slices.Clone(values), at: at}
}

// failed clears the mark of a recount that failed, so a later request
// tries again.
func (c *valuesCache) failed(k valuesKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.refreshing = false
	}
}
