package chstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/testenv"
)

// progressRead runs fn with a context that counts the rows and bytes
// ClickHouse reports reading for the statements fn makes (on 18.16 not
// the subqueries of an IN).
func progressRead(t *testing.T, fn func(ctx context.Context) error) (rows, bytes uint64) {
	t.Helper()
	var r, b atomic.Uint64
	ctx := clickhouse.Context(context.Background(), clickhouse.WithProgress(func(p *clickhouse.Progress) { r.Add(p.Rows); b.Add(p.Bytes) }))
	if err := fn(ctx); err != nil {
		t.Fatal(err)
	}
	return r.Load(), b.Load()
}

// bytesRead is the bytes of progressRead.
func bytesRead(t *testing.T, fn func(ctx context.Context) error) uint64 {
	t.Helper()
	_, b := progressRead(t, fn)
	return b
}

// TestOtherProjectsReadsAreBounded: what a project's list and count read
// does not grow with another project's persons. Rows are sorted by
// (project_id, id), so two projects share at most the granule at their
// boundary (18.16 cuts granules by rows, whatever their width; 24.x also
// by bytes); lists choose ids on narrow columns and read properties for
// the page only, and the fold bounds a person's properties
// (fold.DefaultMaxPersonBytes). So the worst a neighbour can add is about
// one person at the limit, read through that boundary granule, and a
// project with more than a granule of persons reads none of it for its
// first page.
func TestOtherProjectsReadsAreBounded(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	small := fold.Batch{}
	for i := range 3000 {
		did := fmt.Sprintf("small-%d", i)
		small.Persons = append(small.Persons, fold.PersonRow{ProjectID: 2, ID: uint64(100 + i), UUID: person.UUIDFor(2, did),
			Properties: map[string]any{"email": did + "@b.io", "plan": "pro"}, DistinctIDs: []string{did}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: uint64(100 + i)})
		small.DistinctIDs = append(small.DistinctIDs, fold.DistinctIDRow{ProjectID: 2, DistinctID: did, PersonID: uint64(100 + i), Version: uint64(100 + i)})
	}
	if err := store.WriteRows(ctx, nil, small); err != nil {
		t.Fatal(err)
	}
	queries := map[string]chstore.ListQuery{
		"list":     {ProjectID: 2, Limit: 100},
		"email":    {ProjectID: 2, Email: "small-2999@b.io", Limit: 100},
		"search":   {ProjectID: 2, Search: "small-29", Limit: 100},
		"distinct": {ProjectID: 2, DistinctID: "small-2998", Limit: 100},
		"property": {ProjectID: 2, Properties: propfilter.Clause{SQL: "property_values[indexOf(property_keys, ?)] = ?", Args: []any{"plan", "pro"}}, Limit: 100},
	}
	baseline := map[string]uint64{}
	for name, q := range queries {
		baseline[name] = bytesRead(t, func(ctx context.Context) error { _, _, err := store.ListPersons(ctx, q); return err })
	}
	// Project 1's widest person: properties at the fold's limit, written
	// in 20 versions, each its own insert (as 20 $set events would).
	limit := fold.DefaultMaxPersonBytes
	props := map[string]any{}
	var written uint64 // properties JSON of every version
	for v := range 20 {
		props[fmt.Sprintf("k%02d", v)] = strings.Repeat("x", limit/20-16)
		written += uint64(len(props)) * uint64(limit/20)
		huge := fold.Batch{Persons: []fold.PersonRow{{ProjectID: 1, ID: 7, UUID: person.UUIDFor(1, "huge"), Properties: props,
			DistinctIDs: []string{"huge"}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: uint64(1000 + v)}}}
		if err := store.WriteRows(ctx, nil, huge); err != nil {
			t.Fatal(err)
		}
	}
	// Merged or not, the boundary granule holds the neighbour's versions.
	// Filters that scan the project may read their arrays there (count and
	// page: twice, at most every version not yet merged); the first page
	// and lookups by key never.
	_ = store.Conn().Exec(ctx, "OPTIMIZE TABLE persons FINAL")
	for name, q := range queries {
		got := bytesRead(t, func(ctx context.Context) error {
			list, _, err := store.ListPersons(ctx, q)
			if err == nil && len(list) == 0 {
				err = fmt.Errorf("%s found nobody", name)
			}
			return err
		})
		t.Logf("%s: %d bytes before, %d after", name, baseline[name], got)
		bound := baseline[name] + 64<<10
		if name == "email" || name == "search" || name == "property" {
			bound = baseline[name] + 2*written
		}
		if got > bound {
			t.Errorf("%s read %d bytes with project 1's widest person, %d without (bound %d)", name, got, baseline[name], bound)
		}
	}
}
