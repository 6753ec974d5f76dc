package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestListRowCacheExact: once a first page's rows are cached (rowcache.go)
// the page takes them from the cache, yet a person changed since shows
// its new row on the very next page, a deleted person is never listed, a
// batch written twice (a retry) changes nothing, and every page equals
// the FINAL reference.
func TestListRowCacheExact(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 6, 200
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var b fold.Batch
	for id := uint64(1); id <= n; id++ {
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{"n": float64(id)},
			DistinctIDs: []string{"d"}, CreatedAt: newest.Add(-time.Duration(n-id) * 10 * time.Second), Version: id})
	}
	write := func(b fold.Batch, first, last uint64) {
		t.Helper()
		if err := store.WriteBatch(ctx, nil, b, chstore.BatchMarker{Consumer: "c", FirstSeq: first, LastSeq: last}); err != nil {
			t.Fatal(err)
		}
	}
	write(b, 1, n)
	page := func(what string) []chstore.PersonRecord {
		t.Helper()
		got, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		want := listReference(t, store, project)
		ids := make([]uint64, len(got))
		for i, p := range got {
			ids[i] = p.ID
		}
		if !slices.Equal(ids, want[:50]) || total != uint64(len(want)) {
			t.Fatalf("%s: %v (total %d), want %v (%d)", what, ids, total, want[:50], len(want))
		}
		return got
	}
	page("cold")
	page("hint")
	hits, _ := store.RowCacheStats()
	page("warm")
	if h, _ := store.RowCacheStats(); h-hits != 50 {
		t.Fatalf("warm page: %d rows from the cache, want 50", h-hits)
	}
	later := fold.Batch{Persons: []fold.PersonRow{
		{ProjectID: project, ID: 199, Properties: map[string]any{}, DistinctIDs: []string{"d"}, CreatedAt: newest.Add(-10 * time.Second), IsDeleted: true, Version: n + 1},
		{ProjectID: project, ID: 190, Properties: map[string]any{"n": "patched"}, DistinctIDs: []string{"d", "e"}, CreatedAt: newest.Add(-100 * time.Second), Version: n + 2},
	}}
	for range 2 { // the second write is a retried batch: the same rows again
		write(later, n+1, n+2)
		got := page("after a patch and a deletion")
		for _, p := range got {
			if p.ID == 190 && (p.Properties["n"] != "patched" || len(p.DistinctIDs) != 2) {
				t.Fatalf("person 190 %v %v, want its patched row", p.Properties, p.DistinctIDs)
			}
			if p.ID != 190 && fmt.Sprint(p.Properties["n"]) != fmt.Sprint(p.ID) {
				t.Fatalf("person %d %v, want its row", p.ID, p.Properties)
			}
		}
	}
	// Mid-batch: person_order has person 180's next version, persons not
	// yet. The page shows the row persons has, then the new one.
	next := fold.Batch{Persons: []fold.PersonRow{{ProjectID: project, ID: 180, Properties: map[string]any{"n": "next"},
		DistinctIDs: []string{"d"}, CreatedAt: newest.Add(-200 * time.Second), Version: n + 3}}}
	if err := store.WritePersonOrder(ctx, next); err != nil {
		t.Fatal(err)
	}
	show := func(what string, want any) {
		t.Helper()
		for _, p := range page(what) {
			if p.ID == 180 && fmt.Sprint(p.Properties["n"]) != fmt.Sprint(want) {
				t.Fatalf("%s: person 180 %v, want n=%v", what, p.Properties, want)
			}
		}
	}
	show("key ahead of persons", 180)
	write(next, n+3, n+3)
	show("after the batch", "next")
}
