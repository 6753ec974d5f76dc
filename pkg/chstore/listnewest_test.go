package chstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/testenv"
)

// mergedPartPersons writes n persons of project 5 (created in the order
// of their ids, three a minute, so a page is a few granules; every tenth
// "enterprise") and merges them into one part, then writes rows outside
// it: newer versions that stop or start matching, a deletion, a version
// older than the merged row (as a refold writes), and new persons.
func mergedPartPersons(t *testing.T, store *chstore.Store, n uint64) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(id, version uint64, plan string, deleted bool) fold.PersonRow {
		return fold.PersonRow{ProjectID: 5, ID: id, Properties: map[string]any{"plan": plan, "n": float64(id)},
			CreatedAt: at.Add(time.Duration(id/3) * time.Minute), IsDeleted: deleted, Version: version}
	}
	plan := func(id uint64) string {
		if id%10 == 0 {
			return "enterprise"
		}
		return "free"
	}
	var b fold.Batch
	for id := uint64(1); id <= n; id++ {
		b.Persons = append(b.Persons, row(id, 1000+id, plan(id), false))
	}
	write := func(b fold.Batch) {
		t.Helper()
		if err := store.WriteRows(ctx, nil, b); err != nil {
			t.Fatal(err)
		}
	}
	write(b)
	if err := store.Conn().Exec(ctx, "OPTIMIZE TABLE persons FINAL"); err != nil {
		t.Fatal(err)
	}
	// Newer: 10 and 20 stop matching, 3 and 4 start, 30 is deleted, 40
	// changes but still matches; 50 gets an older matching row, 7 an
	// older matching row under a newer free one; n+1, n+2 are new.
	newer := uint64(10 * n)
	write(fold.Batch{Persons: []fold.PersonRow{row(10, newer+1, "free", false), row(20, newer+2, "pro", false),
		row(3, newer+3, "enterprise", false), row(4, newer+4, "enterprise", false), row(30, newer+5, "enterprise", true),
		row(40, newer+6, "enterprise", false), row(n+1, newer+7, "enterprise", false), row(n+2, newer+8, "free", false)}})
	write(fold.Batch{Persons: []fold.PersonRow{row(50, 1, "enterprise", false), row(7, 2, "enterprise", false)}})
}

// TestListByPropertiesMergedPartEqualsFinal: with most rows in one merged
// part and the rest outside it, the properties list (candidates settled
// by version, listnewest.go) gives every page and count the
// straightforward FINAL query gives, for positive and negative filters.
func TestListByPropertiesMergedPartEqualsFinal(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	mergedPartPersons(t, store, 3000)
	for _, filter := range []string{
		`[{"key":"plan","value":"enterprise"}]`,
		`[{"key":"plan","value":"enterprise","operator":"is_not"}]`,
		`[{"key":"plan","value":"free"}]`,
		`[{"key":"n","value":100,"operator":"lt"}]`,
	} {
		f, want := filterAndFinal(t, store, filter)
		for _, page := range [][2]int{{100, 0}, {7, 3}, {50, 250}} {
			got, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 5, Properties: f, Limit: page[0], Offset: page[1]})
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for _, p := range got {
				ids = append(ids, p.ID)
			}
			w := want[min(page[1], len(want)):min(page[1]+page[0], len(want))]
			if !slices.Equal(ids, w) || total != uint64(len(want)) {
				t.Errorf("%s limit %d offset %d: %v (count %d), want %v (count %d)", filter, page[0], page[1], ids, total, w, len(want))
			}
		}
	}
}

// filterAndFinal parses filter and lists project 5 by it through FINAL.
func filterAndFinal(t *testing.T, store *chstore.Store, filter string) (propfilter.Clause, []uint64) {
	t.Helper()
	f, err := propfilter.Parse(filter)
	if err != nil {
		t.Fatal(err)
	}
	want, err := finalIDs(context.Background(), store, f)
	if err != nil {
		t.Fatal(err)
	}
	return f, want
}

// finalIDs is the list of project 5 by the straightforward FINAL query.
func finalIDs(ctx context.Context, store *chstore.Store, f propfilter.Clause) ([]uint64, error) {
	var rows []struct {
		ID uint64 `ch:"id"`
	}
	err := store.Conn().Select(ctx, &rows, "SELECT id FROM persons FINAL WHERE project_id = 5 AND is_deleted = 0 AND "+f.SQL+" ORDER BY created_at DESC, id DESC", f.Args...)
	ids := make([]uint64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids, err
}

// TestListByPropertiesReadsTheProjectOnce: a properties list over a
// merged project counts exactly and reads its rows once (the candidates' scan) plus the few
// outside the merged part, not a second time to verify the candidates by
// key (that was 2x the bare count's rows).
func TestListByPropertiesReadsTheProjectOnce(t *testing.T) {
	store := testenv.ClickHouse(t)
	const n = 60000
	mergedPartPersons(t, store, n)
	// 2,000 persons across the project change plan outside the merged
	// part: more candidates than are worth verifying by key, so the
	// part's highest version settles them.
	var b fold.Batch
	for id := uint64(7); id < n; id += n / 2000 {
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: 5, ID: id, Properties: map[string]any{"plan": "enterprise"},
			CreatedAt: time.Unix(1.7e9, 0).UTC(), Version: 20 * n})
	}
	if err := store.WriteRows(context.Background(), nil, b); err != nil {
		t.Fatal(err)
	}
	f, err := propfilter.Parse(`[{"key":"plan","value":"enterprise"}]`)
	if err != nil {
		t.Fatal(err)
	}
	q := chstore.ListQuery{ProjectID: 5, Properties: f, Limit: 100}
	var total uint64
	list := func(ctx context.Context) (err error) { _, total, err = store.ListPersons(ctx, q); return err }
	if err := list(context.Background()); err != nil { // the merged part's highest version, once
		t.Fatal(err)
	}
	bare := rowsRead(t, func(ctx context.Context) error {
		return store.Conn().Exec(ctx, "SELECT count() FROM persons WHERE project_id = 5 AND "+f.SQL, f.Args...)
	})
	read := rowsRead(t, list)
	t.Logf("list read %d rows, the bare count %d", read, bare)
	if want, err := finalIDs(context.Background(), store, f); err != nil || total != uint64(len(want)) {
		t.Errorf("count %d, want %d (%v)", total, len(want), err)
	}
	if read > bare+bare/4 {
		t.Errorf("list read %d rows, over 1.25x the bare count's %d", read, bare)
	}
}

// unmergedPersons writes n persons of project 5 (every tenth
// "enterprise") in inserts of chunk rows with ClickHouse's merges stopped, then
// changes every seventh person's plan in later inserts, as right after a
// fill: no part is merged, so the candidates cannot be settled from a
// merged part. Merges stay stopped until the test ends.
func unmergedPersons(t *testing.T, store *chstore.Store, n uint64, chunk int) {
	t.Helper()
	ctx := context.Background()
	if err := store.Conn().Exec(ctx, "SYSTEM STOP MERGES persons"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Conn().Exec(context.Background(), "SYSTEM START MERGES persons") })
	row := func(id, version uint64, plan string) fold.PersonRow {
		return fold.PersonRow{ProjectID: 5, ID: id, Properties: map[string]any{"plan": plan, "n": float64(id)},
			CreatedAt: time.Unix(1.7e9+int64(id/3)*60, 0).UTC(), Version: version}
	}
	var b fold.Batch
	flush := func() {
		t.Helper()
		if err := store.WriteRows(ctx, nil, b); err != nil {
			t.Fatal(err)
		}
		b = fold.Batch{}
	}
	for id := uint64(1); id <= n; id++ {
		plan := "free"
		if id%10 == 0 {
			plan = "enterprise"
		}
		if b.Persons = append(b.Persons, row(id, id, plan)); len(b.Persons) == chunk {
			flush()
		}
	}
	flush()
	for id := uint64(7); id <= n; id += 7 {
		plan := "enterprise"
		if id%10 == 0 {
			plan = "pro" // its old row matches, its new one does not
		}
		if b.Persons = append(b.Persons, row(id, n+id, plan)); len(b.Persons) == chunk {
			flush()
		}
	}
	flush()
}

// TestListByPropertiesUnmergedReadsTheProjectOnce: right after a fill,
// with no part merged, a properties list (after its first, which reads the
// project's newest versions once) reads the project once, the candidates'
// scan, plus its page: it settles candidates by version, not by a read by
// key of each (2x the bare count's rows before).
func TestListByPropertiesUnmergedReadsTheProjectOnce(t *testing.T) {
	store := testenv.ClickHouse(t)
	// Parts of several granules, as the ingester's: a read by key reads
	// a granule of every part whose key range holds the key, and with
	// parts of one granule the page alone would read the project.
	unmergedPersons(t, store, 60000, 10000)
	f, err := propfilter.Parse(`[{"key":"plan","value":"enterprise"}]`)
	if err != nil {
		t.Fatal(err)
	}
	q := chstore.ListQuery{ProjectID: 5, Properties: f, Limit: 100}
	var page []chstore.PersonRecord
	var total uint64
	list := func(ctx context.Context) (err error) { page, total, err = store.ListPersons(ctx, q); return err }
	if err := list(context.Background()); err != nil { // the newest versions, once
		t.Fatal(err)
	}
	bare := rowsRead(t, func(ctx context.Context) error {
		return store.Conn().Exec(ctx, "SELECT count() FROM persons WHERE project_id = 5 AND "+f.SQL, f.Args...)
	})
	read := rowsRead(t, list)
	t.Logf("list read %d rows, the bare count %d", read, bare)
	want, err := finalIDs(context.Background(), store, f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, p := range page {
		ids = append(ids, p.ID)
	}
	if total != uint64(len(want)) || !slices.Equal(ids, want[:100]) {
		t.Errorf("count %d, page %v; want %d, %v", total, ids, len(want), want[:100])
	}
	if read > bare+bare/4 {
		t.Errorf("list read %d rows, over 1.25x the bare count's %d", read, bare)
	}
}

// TestListByPropertiesDifferentialUnmerged: the properties list against
// the straightforward FINAL query, every page and count, over rounds of
// random writes in small unmerged inserts (plans changed both ways,
// deletions, rows inserted twice as a retried batch writes them, rows
// older than the stored ones as a refold writes them, new persons) with
// merges stopped, then started and forced between lists, so the index
// reads new parts, merged parts and parts merged away while it reads.
func TestListByPropertiesDifferentialUnmerged(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	unmergedPersons(t, store, 3000, 500)
	rng := rand.New(rand.NewPCG(12, 5))
	plans := []string{"free", "pro", "enterprise"}
	filters := []string{
		`[{"key":"plan","value":"enterprise"}]`,
		`[{"key":"plan","value":"enterprise","operator":"is_not"}]`,
		`[{"key":"plan","value":["pro","enterprise"]}]`,
		`[{"key":"n","value":1500,"operator":"lt"}]`,
		`[{"key":"gone","operator":"is_not_set"}]`,
	}
	version := uint64(100000)
	for round := 0; round < 12; round++ {
		var b fold.Batch
		for i := 0; i < 40; i++ {
			version++
			id := 1 + rng.Uint64N(3200) // some new persons
			r := fold.PersonRow{ProjectID: 5, ID: id, Properties: map[string]any{"plan": plans[rng.IntN(3)], "n": float64(id)},
				CreatedAt: time.Unix(1.7e9+int64(rng.IntN(5000))*60, 0).UTC(), Version: version, IsDeleted: rng.IntN(25) == 0}
			if rng.IntN(10) == 0 {
				r.Version = 1 + rng.Uint64N(3000) // older than the stored rows
			}
			b.Persons = append(b.Persons, r)
		}
		for _, batch := range []fold.Batch{b, b} { // the second: a retry
			if err := store.WriteRows(ctx, nil, batch); err != nil {
				t.Fatal(err)
			}
		}
		switch round {
		case 4:
			if err := store.Conn().Exec(ctx, "SYSTEM START MERGES persons"); err != nil {
				t.Fatal(err)
			}
		case 8:
			if err := store.Conn().Exec(ctx, "OPTIMIZE TABLE persons FINAL"); err != nil {
				t.Fatal(err)
			}
		}
		for _, filter := range filters {
			f, want := filterAndFinal(t, store, filter)
			limit := 1 + rng.IntN(300)
			for offset := 0; offset <= len(want); offset += limit {
				got, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 5, Properties: f, Limit: limit, Offset: offset})
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]uint64, len(got))
				for i, p := range got {
					ids[i] = p.ID
				}
				w := want[offset:min(offset+limit, len(want))]
				if !slices.Equal(ids, w) || total != uint64(len(want)) {
					t.Fatalf("round %d %s limit %d offset %d: %v (count %d), want %v (count %d)", round, filter, limit, offset, ids, total, w, len(want))
				}
			}
		}
	}
}
