package chstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// BenchmarkListKeptAB measures the unfiltered first page and the page at
// offset 100,000 (16 clients) with their keys kept by the watermark
// (listmark.go) against reading them every time, in alternating rounds
// against one server: "read" (no watermark: every page reads, as main),
// "kept" (an idle project: the watermark stands) and "moving" (the
// watermark moves every 200 ms, a batch committed at the ingester's
// batch wait). Per page: requests/s, p50/p99, the server's CPU.
// PERSONHUB_FIRST_PERSONS persons (default 1M), 8 s apart. Run alone:
//
//	PERSONHUB_FIRST_PERSONS=300000 go test -run '^$' -bench ListKeptAB -benchtime 3x ./pkg/chstore/
func BenchmarkListKeptAB(b *testing.B) {
	n := envPersons("PERSONHUB_FIRST_PERSONS")
	store := testenv.ClickHouse(b)
	ctx := context.Background()
	const project = 9
	writeListPersons(b, store, project, n)
	offsets := []int{0}
	if n > 100_100 {
		offsets = append(offsets, 100_000)
	}
	var seq atomic.Uint64 // the "moving" watermark
	seq.Store(uint64(n))
	variants := map[string]func() chstore.Watermark{
		"read":   func() chstore.Watermark { return chstore.Watermark{} },
		"kept":   func() chstore.Watermark { return chstore.Watermark{Committed: uint64(n), Known: true} },
		"moving": func() chstore.Watermark { return chstore.Watermark{Committed: seq.Load(), Known: true} },
	}
	names := []string{"read", "kept", "moving"}
	const clients, perRound = 16, 400
	took := map[string][]time.Duration{}
	elapsed := map[string]time.Duration{}
	cpu := map[string]uint64{}
	page := func(offset int, mark chstore.Watermark) {
		list, _, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Offset: offset, Limit: 100, Mark: mark})
		if err != nil || len(list) != 100 {
			b.Errorf("page at %d: %d rows, %v", offset, len(list), err)
		}
	}
	for _, off := range offsets { // the hint and the row cache, as after the first request
		page(off, chstore.Watermark{})
	}
	stop := make(chan struct{})
	go func() {
		for t := time.NewTicker(200 * time.Millisecond); ; {
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
				seq.Add(1)
			}
		}
	}()
	defer close(stop)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, off := range offsets {
			for _, v := range names {
				name := fmt.Sprintf("%s@%d", v, off)
				store.ForgetMarks() // "kept" stands still while "moving" moves
				before := serverEvents(b, store)
				var mu sync.Mutex
				var wg sync.WaitGroup
				var next atomic.Int64
				start := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= perRound {
							t0 := time.Now()
							page(off, variants[v]())
							d := time.Since(t0)
							mu.Lock()
							took[name] = append(took[name], d)
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				elapsed[name] += time.Since(start)
				after := serverEvents(b, store)
				cpu[name] += after["UserTimeMicroseconds"] + after["SystemTimeMicroseconds"] - before["UserTimeMicroseconds"] - before["SystemTimeMicroseconds"]
			}
		}
	}
	b.StopTimer()
	for name, d := range took {
		b.ReportMetric(float64(len(d))/elapsed[name].Seconds(), name+"/req/s")
		b.ReportMetric(float64(cpu[name])/float64(len(d))/1000, name+"/server-cpu-ms/page")
	}
	reportP99(b, took) // sorts each case's samples
}
