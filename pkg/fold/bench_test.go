package fold

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/event"
)

// benchBatch makes n parsed inputs in the mix of make bench's dataset
// (bench/dataset.go): 80% captured events, 8% $set, 4% $set_once, 2%
// $unset, 4% $identify, 2% $create_alias, over ids distinct ids.
func benchBatch(tb testing.TB, r *rand.Rand, seq uint64, n, ids int) []Input {
	user := func() string { return fmt.Sprintf("user_%07d", r.IntN(ids*3/4)) }
	anon := func() string { return fmt.Sprintf("anon_%07d", ids*3/4+r.IntN(ids/4)) }
	anyID := func() string {
		if r.IntN(4) < 3 {
			return user()
		}
		return anon()
	}
	inputs := make([]Input, 0, n)
	for range n {
		seq++
		props, extra, name, id := `{"$current_url":"https://app.example.com/docs/1","$browser":"Firefox","$lib":"web"`, "", "$pageview", anyID()
		switch k := r.IntN(100); {
		case k < 8:
			name, id = "$set", user()
			extra = fmt.Sprintf(`,"$set":{"email":"%s@example.com","plan":"pro","visits":%d}`, id, r.IntN(500))
		case k < 12:
			extra = `,"$set_once":{"signup_page":"docs"}`
		case k < 14:
			name, extra = "$set", `,"$unset":["visits"]`
		case k < 18:
			name, id = "$identify", user()
			props += fmt.Sprintf(`,"$anon_distinct_id":%q`, anon())
		case k < 20:
			name, id = "$create_alias", user()
			props += fmt.Sprintf(`,"alias":%q`, user())
		}
		msg := fmt.Sprintf(`{"uuid":%q,"event":%q,"distinct_id":%q,"timestamp":%q,"properties":%s}%s}`,
			uuid.New().String(), name, id, time.Unix(int64(seq), 0).UTC().Format(time.RFC3339), props, extra)
		ev, err := event.Parse([]byte(msg))
		if err != nil {
			tb.Fatal(err, msg)
		}
		inputs = append(inputs, Input{ProjectID: 1, Seq: seq, Event: ev})
	}
	return inputs
}

// BenchmarkFoldBatch folds batches of 20k events of make bench's mix into
// a Folder already holding their persons: the ingester's fold (Prepare,
// Apply, Flush) without ClickHouse. ns/event is the figure to read.
func BenchmarkFoldBatch(b *testing.B) {
	const batch, ids = 20000, 100000
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	f := New(newMemStore())
	fold := func(inputs []Input) {
		if err := f.Prepare(ctx, inputs); err != nil {
			b.Fatal(err)
		}
		for k := range inputs {
			if _, err := f.Apply(ctx, inputs[k]); err != nil {
				b.Fatal(err)
			}
		}
		f.Flush()
	}
	seq := uint64(0)
	var batches [][]Input
	for range 8 {
		inputs := benchBatch(b, r, seq, batch, ids)
		seq += batch
		fold(inputs) // warm the cache
		batches = append(batches, inputs)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		inputs := batches[n%len(batches)]
		// Later sequences, so the guard lets every event change state.
		for k := range inputs {
			inputs[k].Seq += uint64(len(batches)) * batch
		}
		fold(inputs)
		n++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*batch), "ns/event")
	// The process's CPU (GC included) is steadier than the wall clock on a
	// shared machine, and is what make bench's ingest figure counts.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n*batch), "cpu-ns/event")
}

// cpuTime is the CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
