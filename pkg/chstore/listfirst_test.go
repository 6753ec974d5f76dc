package chstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// statements counts the statements the server ran during fn (its Query
// event; the reads of the counter are taken out). The chstore tests share
// the server but do not run in parallel.
func statements(t *testing.T, store *chstore.Store, fn func() error) uint64 {
	t.Helper()
	read := func() uint64 {
		var n uint64
		if err := store.Conn().QueryRow(context.Background(), "SELECT value FROM system.events WHERE event = 'Query'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := read()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	return read() - before - 1
}

// TestListFirstPageOneStatement: a page near the start takes one
// statement once the project has a hint (the keys are a subquery of the
// rows' read and the count is joined, listfirst.go) and its rows are in
// the row cache (rowcache.go), two when some are not, three before a
// hint; it equals the FINAL reference in order,
// with ties on created_at, a deleted person and a person updated in a
// later unmerged insert; a page the hour cannot fill and the list's end
// still come out exact by the general path.
func TestListFirstPageOneStatement(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 4, 400
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	created := func(id uint64) time.Time {
		if id > 300 { // the newest hour, 3 persons a second (ties)
			return newest.Add(-time.Duration(n-id) / 3 * time.Second)
		}
		return newest.Add(-time.Duration(n-id) * time.Hour)
	}
	var b fold.Batch
	for id := uint64(1); id <= n; id++ {
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{"n": float64(id)}, CreatedAt: created(id), Version: id})
	}
	if err := store.WriteBatch(ctx, nil, b, chstore.BatchMarker{Consumer: "c", FirstSeq: 1, LastSeq: n}); err != nil {
		t.Fatal(err)
	}
	later := fold.Batch{Persons: []fold.PersonRow{
		{ProjectID: project, ID: 390, Properties: map[string]any{}, CreatedAt: created(390), IsDeleted: true, Version: n + 1},
		{ProjectID: project, ID: 380, Properties: map[string]any{"n": "changed"}, CreatedAt: created(380), Version: n + 2},
	}}
	if err := store.WriteBatch(ctx, nil, later, chstore.BatchMarker{Consumer: "c", FirstSeq: n + 1, LastSeq: n + 2}); err != nil {
		t.Fatal(err)
	}
	want := listReference(t, store, project)
	// stmts is the statements a page must take (0: any): the project's
	// first page has no hint yet (three), a page whose rows were not read
	// before reads them (two), and a page the window cannot fill leaves a
	// wider one.
	for _, c := range []struct{ offset, limit, stmts int }{{0, 50, 3}, {0, 1, 1}, {20, 70, 2}, {20, 70, 1}, {0, 150, 0}, {0, 150, 1}, {10, 60, 1},
		{350, 100, 0}, {len(want) - 1, 10, 0}, {len(want), 10, 0}, {0, 50, 1}} {
		var got []chstore.PersonRecord
		var total uint64
		stmts := statements(t, store, func() (err error) {
			got, total, err = store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Offset: c.offset, Limit: c.limit})
			return err
		})
		ids := make([]uint64, len(got))
		for i, p := range got {
			ids[i] = p.ID
			if p.ID == 380 && p.Properties["n"] != "changed" {
				t.Errorf("person 380 %v, want its newest row", p.Properties)
			}
		}
		end := min(c.offset+c.limit, len(want))
		if !slices.Equal(ids, want[c.offset:end]) || total != uint64(len(want)) {
			t.Errorf("page %+v: %v (total %d), want %v (%d)", c, ids, total, want[c.offset:end], len(want))
		}
		if c.stmts != 0 && stmts != uint64(c.stmts) {
			t.Errorf("page %+v took %d statements, want %d", c, stmts, c.stmts)
		}
		t.Logf("page %+v: %d statements", c, stmts)
	}
	// Persons newer than the hint's newest: its window still holds them
	// (a prefix of the order), in two statements (their rows are new),
	// then one.
	var newer fold.Batch
	for id := uint64(n + 3); id < n+33; id++ {
		newer.Persons = append(newer.Persons, fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{}, CreatedAt: newest.Add(time.Duration(id-n) * time.Minute), Version: id})
	}
	if err := store.WriteBatch(ctx, nil, newer, chstore.BatchMarker{Consumer: "c", FirstSeq: n + 3, LastSeq: n + 32}); err != nil {
		t.Fatal(err)
	}
	want = listReference(t, store, project)
	for _, wantStmts := range []uint64{2, 1} {
		var got []chstore.PersonRecord
		var total uint64
		stmts := statements(t, store, func() (err error) {
			got, total, err = store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Limit: 50})
			return err
		})
		ids := make([]uint64, len(got))
		for i, p := range got {
			ids[i] = p.ID
		}
		if !slices.Equal(ids, want[:50]) || total != uint64(len(want)) || stmts != wantStmts {
			t.Errorf("after newer persons: %v (total %d, %d statements), want %v (%d, %d)", ids, total, stmts, want[:50], len(want), wantStmts)
		}
	}
}
