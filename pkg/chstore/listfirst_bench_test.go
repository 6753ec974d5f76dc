package chstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// BenchmarkFirstPageRowCacheAB measures the first page (the first 100 of the
// list, 16 clients) with the row cache (rowcache.go) and without, in
// alternating rounds against one server, so load from elsewhere falls on
// both alike. It reports each variant's requests/s, p50 and p99, and per
// page the server's CPU and decompressed bytes (system.events deltas:
// the test's server runs nothing else). PERSONHUB_FIRST_PERSONS persons
// (default 1M) with the bench's properties, 8 s apart. Run alone:
//
//	PERSONHUB_FIRST_PERSONS=300000 go test -run '^$' -bench FirstPageRowCacheAB -benchtime 4x ./pkg/chstore/
func BenchmarkFirstPageRowCacheAB(b *testing.B) {
	n := envPersons("PERSONHUB_FIRST_PERSONS")
	store := testenv.ClickHouse(b)
	ctx := context.Background()
	const project = 7
	writeListPersons(b, store, project, n)
	type variant struct {
		name  string
		store *chstore.Store
	}
	variants := []variant{{"cache", store}, {"nocache", store.WithoutRowCache()}}
	const clients, perRound = 16, 400
	took := map[string][]time.Duration{}
	elapsed := map[string]time.Duration{}
	events := map[string]map[string]uint64{}
	page := func(s *chstore.Store) {
		list, _, err := s.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Limit: 100})
		if err != nil || len(list) != 100 {
			b.Errorf("page: %d rows, %v", len(list), err)
		}
	}
	for _, v := range variants { // the hint and the cache, as after the first request
		page(v.store)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range variants {
			before := serverEvents(b, store)
			var mu sync.Mutex
			var wg sync.WaitGroup
			next := make(chan struct{}, perRound)
			for range perRound {
				next <- struct{}{}
			}
			close(next)
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range next {
						t0 := time.Now()
						page(v.store)
						d := time.Since(t0)
						mu.Lock()
						took[v.name] = append(took[v.name], d)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed[v.name] += time.Since(start)
			after := serverEvents(b, store)
			if events[v.name] == nil {
				events[v.name] = map[string]uint64{}
			}
			for k, a := range after {
				events[v.name][k] += a - before[k]
			}
		}
	}
	b.StopTimer()
	for _, v := range variants {
		d := took[v.name]
		b.ReportMetric(float64(len(d))/elapsed[v.name].Seconds(), v.name+"/req/s")
		pages := float64(len(d))
		b.ReportMetric(float64(events[v.name]["UserTimeMicroseconds"]+events[v.name]["SystemTimeMicroseconds"])/pages/1000, v.name+"/server-cpu-ms/page")
		b.ReportMetric(float64(events[v.name]["CompressedReadBufferBytes"])/pages/1024, v.name+"/decompressed-KiB/page")
	}
	reportP99(b, took)
}

// serverEvents reads the server's cumulative counters of interest.
func serverEvents(b *testing.B, store *chstore.Store) map[string]uint64 {
	rows, err := store.Conn().Query(context.Background(), "SELECT event, value FROM system.events WHERE event IN ('UserTimeMicroseconds', 'SystemTimeMicroseconds', 'CompressedReadBufferBytes')")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k string
		var v uint64
		if err := rows.Scan(&k, &v); err != nil {
			b.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// reportP99 reports each case's p50 and p99 in milliseconds.
func reportP99(b *testing.B, took map[string][]time.Duration) {
	reportQuantiles(b, took)
	for k, d := range took {
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, k+"/p99-ms")
	}
}

// writeListPersons writes n persons of project with the bench's
// properties, created 8 s apart up to a fixed newest.
func writeListPersons(b *testing.B, store *chstore.Store, project uint64, n int) {
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	writePersons(b, store, n, func(id int) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: uint64(id), Version: uint64(id),
			Properties: map[string]any{"email": fmt.Sprintf("user%d@example.com", id), "name": fmt.Sprintf("User %d", id), "plan": "free",
				"visits": id % 500, "initial_referrer": fmt.Sprintf("https://www.search.example.org/?q=term%d", id%10000), "signup_page": "/pricing"},
			DistinctIDs: []string{fmt.Sprintf("d%d", id)}, CreatedAt: newest.Add(-time.Duration(n-id) * 8 * time.Second)}
	})
}
