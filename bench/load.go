package main

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/progress"
)

// loadGen keeps the ingester busy with fresh events while reads are
// measured: it tops the stream up so that at most `backlog` published
// events wait uncommitted. With backlog = 2 x BatchSize the ingester always
// has its next full batch buffered (it runs flat out) while a new
// event waits behind at most two batches.
type loadGen struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	stats  LoadStats
}

// LoadStats is what a load period did.
type LoadStats struct {
	Published      int     `json:"published"`
	Committed      uint64  `json:"committed_events"`
	Seconds        float64 `json:"seconds"`
	IngestPerSec   float64 `json:"ingest_per_second"`
	BacklogCap     int     `json:"backlog_cap"`
	Err            string  `json:"error,omitempty"`
	startCommitted uint64
}

func startLoad(ctx context.Context, js jetstream.JetStream, w *progress.Watcher, project uint64, g *generator, backlog int) *loadGen {
	ctx, cancel := context.WithCancel(ctx)
	l := &loadGen{cancel: cancel, done: make(chan struct{})}
	l.stats.BacklogCap = backlog
	l.stats.startCommitted = w.Seq()
	start := time.Now()
	go func() {
		defer close(l.done)
		defer func() {
			l.mu.Lock()
			l.stats.Seconds = time.Since(start).Seconds()
			l.mu.Unlock()
		}()
		var lastSeq uint64
		for ctx.Err() == nil {
			committed := w.Seq()
			if lastSeq > committed && int(lastSeq-committed) >= backlog {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			chunk := make([]genEvent, 2000)
			for i := range chunk {
				chunk[i] = g.next()
			}
			res, err := publishAll(ctx, js, project, chunk)
			l.mu.Lock()
			if err != nil && ctx.Err() == nil {
				l.stats.Err = err.Error()
			}
			l.stats.Published += res.n
			l.mu.Unlock()
			if err != nil {
				return
			}
			lastSeq = res.lastSeq
		}
	}()
	return l
}

// stop ends publishing and returns what the period did.
func (l *loadGen) stop(w *progress.Watcher) LoadStats {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Committed = w.Seq() - s.startCommitted
	if s.Seconds > 0 {
		s.IngestPerSec = float64(s.Committed) / s.Seconds
	}
	return s
}

// Soak is the memory target's long run: a steady stream of events while the ingester's
// RSS is sampled.
type Soak struct {
	Seconds        float64   `json:"seconds"`
	RatePerSecond  int       `json:"target_rate_per_second"`
	Published      int       `json:"published"`
	LagAtEnd       uint64    `json:"lag_at_end"`
	SampleEvery    float64   `json:"sample_every_seconds"`
	RSSBytes       []int64   `json:"rss_bytes"`
	HeapInuseBytes []float64 `json:"heap_inuse_bytes"`
	// GrowthPct compares the mean RSS of the last minute with the mean
	// of the first minute after a one-minute warm-up.
	GrowthPct     float64 `json:"growth_pct"`
	SlopeMBPerMin float64 `json:"slope_mb_per_min"`
	Err           string  `json:"error,omitempty"`
}

func soak(ctx context.Context, js jetstream.JetStream, w *progress.Watcher, ing *childProc, project uint64, g *generator, dur time.Duration, perSec int) Soak {
	s := Soak{RatePerSecond: perSec, SampleEvery: 10}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var mu sync.Mutex
	var lastSeq uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			chunk := make([]genEvent, perSec/10)
			for i := range chunk {
				chunk[i] = g.next()
			}
			res, err := publishAll(ctx, js, project, chunk)
			mu.Lock()
			s.Published += res.n
			if res.lastSeq > lastSeq {
				lastSeq = res.lastSeq
			}
			if err != nil && ctx.Err() == nil {
				s.Err = err.Error()
			}
			mu.Unlock()
		}
	}()
	start := time.Now()
	sample := func() {
		rss, _ := procRSS(ing.pid)
		s.RSSBytes = append(s.RSSBytes, rss)
		s.HeapInuseBytes = append(s.HeapInuseBytes, ing.metric("go_memstats_heap_inuse_bytes"))
	}
	sample()
	tick := time.NewTicker(10 * time.Second)
	for loop := true; loop; {
		select {
		case <-ctx.Done():
			loop = false
		case <-tick.C:
			sample()
		}
	}
	tick.Stop()
	<-done
	s.Seconds = time.Since(start).Seconds()
	mu.Lock()
	if lastSeq > w.Seq() {
		s.LagAtEnd = lastSeq - w.Seq()
	}
	mu.Unlock()
	s.GrowthPct, s.SlopeMBPerMin = growth(s.RSSBytes, s.SampleEvery)
	return s
}

// growth compares the last minute's mean with the mean of the second
// minute (the first is warm-up), and fits a line through every sample
// after the warm-up.
func growth(samples []int64, every float64) (pct, slopeMBPerMin float64) {
	per := int(60 / every)
	if len(samples) < 3*per {
		return 0, 0
	}
	mean := func(s []int64) float64 {
		var t float64
		for _, v := range s {
			t += float64(v)
		}
		return t / float64(len(s))
	}
	early, late := mean(samples[per:2*per]), mean(samples[len(samples)-per:])
	pct = (late - early) / early * 100
	xs := samples[per:]
	var sx, sy, sxx, sxy float64
	for i, v := range xs {
		x := float64(i) * every / 60
		y := float64(v) / (1 << 20)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(xs))
	slopeMBPerMin = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return pct, slopeMBPerMin
}
