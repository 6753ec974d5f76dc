package chstore_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestValueCountsFollowChanges is the differential test of the kept value
// counts: rounds of random person rows (values changed, the key removed,
// JSON null and empty values, persons deleted and created, in buckets
// spread over the id space) are written as the ingester writes them,
// some as an uncommitted batch that a refold follows with lower versions
// (a crash), and after each round CountPropertyValues must equal the
// direct query and a Go reference of the newest rows, while recounting
// only the changed buckets.
func TestValueCountsFollowChanges(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 8))
	const project = 3
	newest := map[uint64]fold.PersonRow{} // the reference: persons FINAL
	seq := uint64(1000)
	var ids []uint64
	for b := range 12 { // persons in 12 buckets of 16384 ids
		for i := range 40 {
			ids = append(ids, uint64(b)*16384*3+uint64(i)*97+1)
		}
	}
	values := []any{"free", "pro", "team", "enterprise", "", nil, 7}
	row := func(id uint64, version uint64) fold.PersonRow {
		p := fold.PersonRow{ProjectID: project, ID: id, UUID: person.UUIDFor(project, fmt.Sprint(id)),
			Properties: map[string]any{"email": fmt.Sprintf("p%d@x", id)}, DistinctIDs: []string{fmt.Sprint(id)},
			CreatedAt: time.Unix(1e9, 0).UTC(), Version: version}
		switch k := rng.IntN(10); {
		case k < 8:
			p.Properties["plan"] = values[rng.IntN(len(values))]
		case k < 9:
			p.IsDeleted = true
		}
		return p
	}
	write := func(rows []fold.PersonRow) {
		t.Helper()
		if err := store.WriteRows(ctx, nil, fold.Batch{Persons: rows}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if cur, ok := newest[r.ID]; !ok || r.Version > cur.Version {
				newest[r.ID] = r
			}
		}
	}
	// changes makes n rows of distinct persons of a few buckets, each a
	// version above from, and returns them with the last version used.
	changes := func(n int, from uint64) ([]fold.PersonRow, uint64) {
		buckets := map[uint64]bool{}
		for len(buckets) < 2 {
			buckets[ids[rng.IntN(len(ids))]/16384] = true
		}
		var rows []fold.PersonRow
		seen := map[uint64]bool{}
		for len(rows) < n {
			id := ids[rng.IntN(len(ids))]
			if !buckets[id/16384] || seen[id] || newest[id].IsDeleted {
				continue
			}
			seen[id] = true
			from++
			rows = append(rows, row(id, from))
		}
		return rows, from
	}
	reference := func() []chstore.PropertyValue {
		counts := map[string]uint64{}
		for _, p := range newest {
			v, ok := p.Properties["plan"]
			if p.IsDeleted || !ok || v == nil || v == "" {
				continue
			}
			counts[fmt.Sprint(v)]++
		}
		var out []chstore.PropertyValue
		for v, n := range counts {
			out = append(out, chstore.PropertyValue{Name: v, Count: n})
		}
		slices.SortFunc(out, func(a, b chstore.PropertyValue) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
		})
		return out
	}
	// check compares the kept counts with the reference (and the direct
	// query with it); asOf, when set, is what the kept counts must be
	// instead: until the watermark moves, they are those of the last
	// commit seen (rows of a batch in flight are not shown yet, as a
	// write is not before its commit), with no statement run.
	check := func(round string, committed uint64, asOf []chstore.PropertyValue) {
		t.Helper()
		got, err := store.CountPropertyValues(ctx, project, "plan", "", committed)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := store.PropertyValues(ctx, project, "plan", "")
		if err != nil {
			t.Fatal(err)
		}
		want := reference()
		if asOf == nil {
			asOf = want
		}
		if !slices.Equal(got, asOf) || !slices.Equal(direct, want) {
			t.Fatalf("%s: kept counts %v, want %v; direct %v, reference %v", round, got, asOf, direct, want)
		}
	}
	var initial []fold.PersonRow
	for _, id := range ids {
		seq++
		initial = append(initial, row(id, seq))
	}
	write(initial)
	committed := seq
	check("initial", committed, nil)
	for round := range 25 {
		name := fmt.Sprintf("round %d", round)
		if round%5 == 4 {
			// Versions of the crashed batch start 50 above the commit, so
			// the refold's are lower and distinct (a refold writes the
			// same row for the same version; a test must not write two).
			rows, last := changes(1+rng.IntN(8), seq+50)
			// A crash: the batch's rows are written, not committed; reads
			// see them. Its refold comes back as a smaller batch whose
			// versions are lower than some of the crashed rows (still
			// above the commit), then the rest commits.
			before := reference()
			write(rows)
			check(name+" (uncommitted rows)", committed, before)
			refold, last2 := changes(1+rng.IntN(4), seq)
			write(refold)
			check(name+" (refold, not yet committed)", committed, before)
			seq, committed = max(last, last2), max(last, last2)
			check(name+" (committed)", committed, nil)
			continue
		}
		rows, last := changes(1+rng.IntN(8), seq)
		before := reference()
		write(rows)
		check(name+" (before the commit is seen)", committed, before)
		seq, committed = last, last
		check(name, committed, nil)
		check(name+" (again)", committed, nil)
	}
	full, partial := store.ValueRecounts()
	if full != 1 || partial < 20 {
		t.Fatalf("recounts: %d full, %d partial; want 1 full and the rest partial", full, partial)
	}
}

// TestValueCountsReadChangedBucketsOnly: after a write, values/ reads the
// changed bucket's persons and a few rows of person_buckets, not the
// project's persons (a scan of their version column read every row).
func TestValueCountsReadChangedBucketsOnly(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 4, 120_000 // over 7 buckets of 16384 ids
	rows := make([]fold.PersonRow, n)
	for i := range rows {
		id := uint64(i + 1)
		rows[i] = fold.PersonRow{ProjectID: project, ID: id, UUID: person.UUIDFor(project, fmt.Sprint(id)),
			Properties: map[string]any{"plan": []string{"free", "pro", "team"}[i%3]}, DistinctIDs: []string{fmt.Sprint(id)},
			CreatedAt: time.Unix(1e9, 0).UTC(), Version: id}
	}
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: rows}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CountPropertyValues(ctx, project, "plan", "", n); err != nil {
		t.Fatal(err)
	}
	// One person of the middle bucket changes plan.
	changed := rows[60_000]
	changed.Properties, changed.Version = map[string]any{"plan": "enterprise"}, n+1
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: []fold.PersonRow{changed}}); err != nil {
		t.Fatal(err)
	}
	var read atomic.Uint64
	counted := clickhouse.Context(ctx, clickhouse.WithProgress(func(p *clickhouse.Progress) { read.Add(p.Rows) }))
	got, err := store.CountPropertyValues(counted, project, "plan", "", n+1)
	if err != nil {
		t.Fatal(err)
	}
	// Person 60001 (i = 60000) had "free".
	want := []chstore.PropertyValue{{Name: "pro", Count: 40_000}, {Name: "team", Count: 40_000}, {Name: "free", Count: 39_999}, {Name: "enterprise", Count: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("values %v, want %v", got, want)
	}
	// A bucket (16384 ids) and the granules (1024 rows) around it.
	if r := read.Load(); r > 16384+4*1024+100 {
		t.Fatalf("read %d rows after a write to one person of %d", r, n)
	}
}
