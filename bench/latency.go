package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Latency summarises one measured operation at one concurrency.
type Latency struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	Load        string  `json:"load"` // "idle" or "ingesting"
	N           int     `json:"n"`
	Errors      int     `json:"errors"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	Maxms       float64 `json:"max_ms"`
	Meanms      float64 `json:"mean_ms"`
	QPS         float64 `json:"qps"`
	FirstError  string  `json:"first_error,omitempty"`
}

// budget bounds one latency measurement: at most N operations or Max
// time, whichever comes first.
type budget struct {
	N   int
	Max time.Duration
}

// namedOp is one operation to measure: op measured here, or run (when
// set) a measurement made elsewhere (the reader child, readerchild.go).
type namedOp struct {
	name string
	op   func(ctx context.Context, i int) error
	run  func(ctx context.Context, conc int, b budget, offset int) samples
}

// measure runs o with conc workers for at most b.N calls (indexes from
// offset) or b.Max.
func (o namedOp) measure(ctx context.Context, conc int, b budget, offset int) samples {
	if o.run != nil {
		return o.run(ctx, conc, b, offset)
	}
	return measureOnce(ctx, conc, b, offset, o.op)
}

// samples are the raw results of measuring one operation.
type samples struct {
	lat      []time.Duration
	errs     int
	firstErr string
	elapsed  time.Duration
}

// measureSet measures several operations that are to be compared at one
// concurrency, interleaved: five rounds, each running every operation for
// a fifth of the budget, so that a noisy neighbour or background merges hit
// all of them alike. A few unrecorded calls warm the pools first.
func measureSet(ctx context.Context, load string, conc int, b budget, ops ...namedOp) []Latency {
	const rounds = 5
	all := make([]samples, len(ops))
	for _, o := range ops {
		o.measure(ctx, min(conc, 4), budget{N: min(conc, 4), Max: 10 * time.Second}, 0)
	}
	for r := 0; r < rounds; r++ {
		rb := budget{N: max(1, b.N/rounds), Max: b.Max / rounds}
		for k, o := range ops {
			s := o.measure(ctx, conc, rb, r*rb.N)
			all[k].lat = append(all[k].lat, s.lat...)
			all[k].errs += s.errs
			all[k].elapsed += s.elapsed
			if all[k].firstErr == "" {
				all[k].firstErr = s.firstErr
			}
		}
	}
	out := make([]Latency, len(ops))
	for k, o := range ops {
		l := summarize(all[k].lat)
		l.Name, l.Concurrency, l.Load, l.Errors, l.FirstError = o.name, conc, load, all[k].errs, all[k].firstErr
		l.QPS = float64(len(all[k].lat)) / all[k].elapsed.Seconds()
		out[k] = l
	}
	return out
}

// measureOnce runs op with conc workers for at most b.N calls (indexes
// from offset) or b.Max.
func measureOnce(ctx context.Context, conc int, b budget, offset int, op func(ctx context.Context, i int) error) samples {
	var next atomic.Int64
	var mu sync.Mutex
	var s samples
	deadline := time.Now().Add(b.Max)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N || time.Now().After(deadline) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := op(ctx, offset+i)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					s.errs++
					if s.firstErr == "" {
						s.firstErr = err.Error()
					}
				} else {
					s.lat = append(s.lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	return s
}

func summarize(lat []time.Duration) Latency {
	var l Latency
	l.N = len(lat)
	if len(lat) == 0 {
		return l
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e3 }
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		return lat[max(0, min(i, len(lat)-1))]
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	l.P50ms, l.P90ms, l.P99ms, l.Maxms = ms(q(0.5)), ms(q(0.9)), ms(q(0.99)), ms(lat[len(lat)-1])
	l.Meanms = ms(sum / time.Duration(len(lat)))
	return l
}

func (l Latency) String() string {
	return fmt.Sprintf("%-34s c=%-2d %-9s n=%-5d p50=%8.2fms p99=%8.2fms qps=%7.1f err=%d",
		l.Name, l.Concurrency, l.Load, l.N, l.P50ms, l.P99ms, l.QPS, l.Errors)
}
