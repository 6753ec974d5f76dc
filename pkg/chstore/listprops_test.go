package chstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestListByPropertiesNewestRowOnly: a properties filter (read without
// FINAL) lists a person exactly when its newest row is live and matches,
// whatever its older rows say, for positive and negative filters, with the
// count exact and the order newest first, ties by id. The rows stay in
// separate parts (one insert each), as before ClickHouse merges them.
func TestListByPropertiesNewestRowOnly(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(id, version uint64, plan string, deleted bool, created time.Time) fold.PersonRow {
		props := map[string]any{"n": float64(id)}
		if plan != "" {
			props["plan"] = plan
		}
		return fold.PersonRow{ProjectID: 7, ID: id, Properties: props, CreatedAt: created, IsDeleted: deleted, Version: version}
	}
	write := func(rows ...fold.PersonRow) {
		t.Helper()
		if err := store.WriteRows(ctx, nil, fold.Batch{Persons: rows}); err != nil {
			t.Fatal(err)
		}
	}
	// 1: enterprise, then free (no longer listed by plan=enterprise).
	// 2: free, then enterprise. 3: enterprise, then deleted. 4: enterprise
	// twice (two matching versions, listed once). 5: enterprise, created
	// at the same second as 6 (tie: 6 first). 7: no plan, then free.
	// 8 in another project: enterprise.
	write(row(1, 1, "enterprise", false, at), row(2, 2, "free", false, at.Add(time.Hour)), row(3, 3, "enterprise", false, at),
		row(4, 4, "enterprise", false, at.Add(2*time.Hour)), row(5, 5, "enterprise", false, at.Add(3*time.Hour)),
		row(6, 6, "enterprise", false, at.Add(3*time.Hour)), row(7, 7, "", false, at))
	other := row(8, 8, "enterprise", false, at)
	other.ProjectID = 8
	write(other)
	write(row(1, 11, "free", false, at), row(2, 12, "enterprise", false, at.Add(time.Hour)), row(4, 14, "enterprise", false, at.Add(2*time.Hour)))
	write(row(3, 13, "enterprise", true, at), row(7, 17, "free", false, at))

	list := func(filter string, limit, offset int) ([]uint64, uint64) {
		t.Helper()
		f, err := propfilter.Parse(filter)
		if err != nil {
			t.Fatal(err)
		}
		got, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 7, Properties: f, Limit: limit, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, p := range got {
			ids = append(ids, p.ID)
		}
		return ids, total
	}
	for _, c := range []struct {
		filter        string
		limit, offset int
		want          []uint64
		total         uint64
	}{
		{`[{"key":"plan","value":"enterprise"}]`, 10, 0, []uint64{6, 5, 4, 2}, 4},
		{`[{"key":"plan","value":"enterprise"}]`, 2, 1, []uint64{5, 4}, 4},
		{`[{"key":"plan","value":"enterprise"}]`, 2, 4, nil, 4},
		{`[{"key":"plan","value":"free"}]`, 10, 0, []uint64{7, 1}, 2},
		{`[{"key":"plan","value":"enterprise","operator":"is_not"}]`, 10, 0, []uint64{7, 1}, 2},
		{`[{"key":"plan","operator":"is_not_set"}]`, 10, 0, nil, 0},
		{`[{"key":"plan","operator":"is_set"}]`, 10, 0, []uint64{6, 5, 4, 2, 7, 1}, 6},
		{`[{"key":"plan","value":"terp","operator":"not_icontains"}]`, 10, 0, []uint64{7, 1}, 2},
		{`{"type":"OR","values":[{"key":"plan","value":"enterprise"},{"key":"n","value":2,"operator":"lt"}]}`, 10, 0, []uint64{6, 5, 4, 2, 1}, 5},
	} {
		ids, total := list(c.filter, c.limit, c.offset)
		if !slices.Equal(ids, c.want) || total != c.total {
			t.Errorf("%s limit %d offset %d: %v (count %d), want %v (count %d)", c.filter, c.limit, c.offset, ids, total, c.want, c.total)
		}
	}
}
