package chstore_test

import (
	"context"
	"fmt"
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

// bytesRead runs fn with a context that counts the bytes ClickHouse
// reports reading for the statements fn makes.
func bytesRead(t *testing.T, fn func(ctx context.Context) error) uint64 {
	t.Helper()
	var n atomic.Uint64
	ctx := clickhouse.Context(context.Background(), clickhouse.WithProgress(func(p *clickhouse.Progress) { n.Add(p.Bytes) }))
	if err := fn(ctx); err != nil {
		t.Fatal(err)
	}
	return n.Load()
}

// TestOtherProjectsReadsAreBounded: a project's list and count read a
// bounded number of bytes whatever another project's persons weigh. A huge
// person of project 1 (many versions of ~1 MB each, as many $set events
// would leave before parts merge) must not be read by project 2's queries.
func TestOtherProjectsReadsAreBounded(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	small := fold.Batch{}
	for i := range 20 {
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
		"email":    {ProjectID: 2, Email: "small-3@b.io", Limit: 100},
		"search":   {ProjectID: 2, Search: "small", Limit: 100},
		"distinct": {ProjectID: 2, DistinctID: "small-4", Limit: 100},
		"property": {ProjectID: 2, Properties: propfilter.Clause{SQL: "property_values[indexOf(property_keys, ?)] = ?", Args: []any{"plan", "pro"}}, Limit: 100},
	}
	baseline := map[string]uint64{}
	for name, q := range queries {
		baseline[name] = bytesRead(t, func(ctx context.Context) error { _, _, err := store.ListPersons(ctx, q); return err })
	}
	// Project 1's huge person: 20 versions of ~1 MB, each its own insert.
	props := map[string]any{}
	for v := range 20 {
		props[fmt.Sprintf("k%02d", v)] = fmt.Sprintf("%0500000d", v)
		huge := fold.Batch{Persons: []fold.PersonRow{{ProjectID: 1, ID: 7, UUID: person.UUIDFor(1, "huge"), Properties: props,
			DistinctIDs: []string{"huge"}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: uint64(1000 + v)}}}
		if err := store.WriteRows(ctx, nil, huge); err != nil {
			t.Fatal(err)
		}
	}
	// Merged or not, the rows of both projects may now share granules.
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
		if got > baseline[name]+256<<10 {
			t.Errorf("%s read %d bytes with project 1's huge person, %d without", name, got, baseline[name])
		}
	}
}
