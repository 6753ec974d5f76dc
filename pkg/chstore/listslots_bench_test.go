package chstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// BenchmarkDeepPagesAB measures deep pages (offset 0, 10k, 100k, limit
// 100) by the slot counts (listslots.go) and by the windows (listdeep.go),
// interleaved in one process against one server, so load from elsewhere
// falls on both alike; it reports each case's p50 and p90. The project
// has PERSONHUB_DEEP_PERSONS persons (default 1M), created 8 s apart as in
// the bench, written by WriteBatch (so person_order, person_counts and
// person_windows as the ingester writes them). Run alone:
//
//	go test -run '^$' -bench DeepPagesAB -benchtime 30x ./pkg/chstore/
func BenchmarkDeepPagesAB(b *testing.B) {
	n := envPersons("PERSONHUB_DEEP_PERSONS")
	store := testenv.ClickHouse(b)
	ctx := context.Background()
	const project = 5
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	writePersons(b, store, n, func(id int) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: uint64(id), Version: uint64(id),
			Properties: map[string]any{"plan": "free", "n": id}, CreatedAt: newest.Add(-time.Duration(n-id) * 8 * time.Second)}
	})
	type variant struct {
		name string
		list func(context.Context, chstore.ListQuery) ([]chstore.PersonRecord, uint64, error)
	}
	variants := []variant{{"slots", store.ListPersons}, {"windows", store.ListByWindows}}
	offsets := []int{0, 10_000, 100_000}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, off := range offsets {
			for _, v := range variants {
				start := time.Now()
				page, _, err := v.list(ctx, chstore.ListQuery{ProjectID: project, Limit: 100, Offset: off})
				if err != nil {
					b.Fatal(err)
				}
				if len(page) != min(100, max(n-off, 0)) {
					b.Fatalf("%s offset %d: %d rows", v.name, off, len(page))
				}
				k := fmt.Sprintf("%s/offset=%d", v.name, off)
				took[k] = append(took[k], time.Since(start))
			}
		}
	}
	b.StopTimer()
	reportQuantiles(b, took)
}

// writePersons writes persons 1..n, row(id) each, in batches of 100k
// (as the ingester would: person_order, person_counts and person_windows
// too).
func writePersons(b *testing.B, store *chstore.Store, n int, row func(id int) fold.PersonRow) {
	const chunk = 100_000
	for from := 1; from <= n; from += chunk {
		var batch fold.Batch
		to := min(from+chunk-1, n)
		for id := from; id <= to; id++ {
			batch.Persons = append(batch.Persons, row(id))
		}
		if err := store.WriteBatch(context.Background(), nil, batch, chstore.BatchMarker{Consumer: "c", FirstSeq: uint64(from), LastSeq: uint64(to)}); err != nil {
			b.Fatal(err)
		}
	}
}

// envPersons is the persons a benchmark writes: the variable's value, or
// 1M.
func envPersons(name string) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// reportQuantiles reports each case's p50 and p90 in milliseconds.
func reportQuantiles(b *testing.B, took map[string][]time.Duration) {
	for k, d := range took {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, k+"/p50-ms")
		b.ReportMetric(float64(d[len(d)*9/10].Microseconds())/1000, k+"/p90-ms")
	}
}
