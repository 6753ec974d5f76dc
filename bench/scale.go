package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
)

// The ten-times run (-scale 10, targets S1-S7 of docs/performance.md):
// one project of 50M events over 50 days from 2M distinct ids, ingested
// from a pre-published stream, and a second project whose list grows to
// 10M persons. Every figure is a ratio against a baseline of the same run,
// or against the same measurement at the reference size (1M persons).

// scalePlan is the size of a scale run.
type scalePlan struct {
	factor     int
	events     int // main project, ingested end to end (S1)
	ids        int // the main project's distinct id pool
	days       int // the main events' span
	persons    int // the list project's persons at the end (S3)
	refPersons int // the reference size (S2, S3)
	purges     []int
	windows    []int // analysis windows in days, ending with the main events (S4)
	reads      budget
	keyed      budget // S3's reads by key
	analysis   budget
}

func scalePlanFor(factor int, quick bool) scalePlan {
	// One unit is the full run's size (1M persons, 5M analysis events,
	// 200k distinct ids); quick is a hundredth of it, for trying the
	// run itself.
	unit := 1.0
	if quick {
		unit = 0.01
	}
	n := func(v float64) int { return int(v * unit * float64(factor)) }
	p := scalePlan{factor: factor, events: n(5_000_000), ids: n(200_000), days: 50,
		persons: n(1_000_000), refPersons: int(1_000_000 * unit),
		purges: []int{n(1_000), n(10_000)}, windows: []int{7, 15, 30},
		reads: budget{300, 30 * time.Second}, keyed: budget{2000, 60 * time.Second}, analysis: budget{7, 90 * time.Second}}
	if quick {
		p.reads, p.keyed, p.analysis = budget{60, 5 * time.Second}, budget{200, 5 * time.Second}, budget{5, 10 * time.Second}
	}
	return p
}

// Scale is the result of a scale run.
type Scale struct {
	Factor      int `json:"factor"`
	Events      int `json:"events"`
	Mutating    int `json:"person_mutating_events"`
	DistinctIDs int `json:"distinct_id_pool"`
	Days        int `json:"days"`
	ListPersons int `json:"list_project_persons"`
	RefPersons  int `json:"reference_persons"`

	DiskFreeBytes   uint64  `json:"disk_free_bytes"`
	DiskNeededBytes uint64  `json:"disk_needed_bytes"`
	MeanEventBytes  float64 `json:"mean_event_bytes"`
	PublishPerSec   float64 `json:"publish_per_second"`
	// The stream's messages and its store's bytes on disk after the
	// replay (S7's log: per message, as compressed).
	StreamMessages  uint64 `json:"stream_messages,omitempty"`
	StreamDiskBytes uint64 `json:"stream_disk_bytes,omitempty"`

	// S1
	RawConsume      Rate         `json:"raw_consume_ack_each"`
	Ingest          Rate         `json:"ingest"`
	FirstTenthRate  float64      `json:"ingest_first_tenth_per_second"`
	LastTenthRate   float64      `json:"ingest_last_tenth_per_second"`
	IngesterCPUUS   float64      `json:"ingester_cpu_us_per_event"`
	ClickHouseCPUUS float64      `json:"clickhouse_cpu_us_per_event"`
	Progress        []ScalePoint `json:"ingest_progress"`
	FillRate        Rate         `json:"list_fill"`

	ColdRestart *ScaleCold `json:"cold_restart,omitempty"`

	// S2
	MaxCachedPersons int   `json:"max_cached_persons"`
	RSSRefPeakBytes  int64 `json:"rss_peak_at_reference_bytes"`
	// S2RefPersons is the list project's persons at S2's reference peak:
	// the reference size, or the cache's when it is larger.
	S2RefPersons        int     `json:"s2_reference_persons,omitempty"`
	RSSPeakBytes        int64   `json:"rss_peak_bytes"`
	HeapStartBytes      float64 `json:"heap_inuse_start_bytes"`
	HeapEndBytes        float64 `json:"heap_inuse_end_bytes"`
	BytesPerCachedPerso float64 `json:"heap_bytes_per_cached_person"`

	Lists    []ScaleList       `json:"lists"`    // S3, S4's property filter
	Analysis []ScaleWindow     `json:"analysis"` // S4
	Replay   *ScaleReplay      `json:"replay,omitempty"`
	Purges   []Purge           `json:"purges"` // S6
	Disk     *ScaleDisk        `json:"disk,omitempty"`
	Plots    []string          `json:"plots"`
	Errors   map[string]string `json:"errors,omitempty"`
}

// ScalePoint is one sample of an ingest: seconds since its start, events
// committed, the ingester's RSS.
type ScalePoint struct {
	Seconds  float64 `json:"s"`
	Events   uint64  `json:"events"`
	RSSBytes int64   `json:"rss"`
	// The events table's rows and bytes on disk, every tenth second.
	TableRows  uint64 `json:"events_table_rows,omitempty"`
	TableBytes uint64 `json:"events_table_bytes,omitempty"`
}

// ScaleList is the list's reads at one project size.
type ScaleList struct {
	Persons uint64    `json:"persons"`
	Reads   []Latency `json:"reads"`
	// Each API list read alone: the statements it sent (scaleBreakdown),
	// and the active parts and rows of the tables they read then.
	Statements []ReadStatement `json:"statements,omitempty"`
	Tables     []TableDisk     `json:"tables,omitempty"`
}

// s2Ref is the persons at S2's reference peak (results from before
// S2RefPersons: the reference size).
func (sc *Scale) s2Ref() int {
	if sc.S2RefPersons > 0 {
		return sc.S2RefPersons
	}
	return sc.RefPersons
}

func (s *session) scaleErr(phase string, err error) {
	if s.res.Scale.Errors == nil {
		s.res.Scale.Errors = map[string]string{}
	}
	s.res.Scale.Errors[phase] = err.Error()
	s.lg.f("%s failed: %v", phase, err)
}

// scale runs S1-S7 in order; a phase that fails is recorded and the
// next runs, except where it needs what failed.
func (s *session) scale(ctx context.Context) error {
	sp := s.sp
	sc := &Scale{Factor: sp.factor, Events: sp.events, DistinctIDs: sp.ids, Days: sp.days, ListPersons: sp.persons,
		RefPersons: sp.refPersons, MaxCachedPersons: s.cfg.MaxCachedPersons}
	s.res.Scale = sc
	if s.o.only == "s3" {
		return s.scaleListsAlone(ctx)
	}
	if err := s.scaleDisk(); err != nil {
		return err
	}
	list, err := s.cp.CreateProject(ctx, s.orgID, "scale-list")
	if err != nil {
		return err
	}
	// -only s5/s6/s7 (all false without -only): the events and the
	// phases named, without S1's baseline, S2, S3 and S4.
	all := s.o.only == ""
	if all {
		if err := s.startReaders(ctx); err != nil {
			return err
		}
	}
	g := newGenerator(s.o.seed+13, 1)
	if all {
		// The reference: the list project at 1M persons, with an ingester
		// that has seen nothing else (S3's reads), and S2's reference peak
		// once the cache is full: at 1M persons, or at the cache's size when
		// it is larger (a cache larger than the data at the reference would
		// make S2 measure the cache filling, not the data growing).
		if s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester-ref.log"), s.cfg); err != nil {
			return err
		}
		sc.HeapStartBytes = s.ing.metric("go_memstats_heap_inuse_bytes")
		if _, err := s.fillProject(ctx, list.ID, g, 0, sp.refPersons); err != nil {
			return fmt.Errorf("filling the list project: %w", err)
		}
		if err := s.scaleLists(ctx, list.ID); err != nil {
			s.scaleErr("S3 at the reference size", err)
		}
		sc.S2RefPersons = max(sp.refPersons, min(s.cfg.MaxCachedPersons, sp.persons))
		if _, err := s.fillProject(ctx, list.ID, g, sp.refPersons, sc.S2RefPersons); err != nil {
			return fmt.Errorf("filling the list project: %w", err)
		}
		_, sc.RSSRefPeakBytes = procRSS(s.ing.pid)
		s.lg.f("S2 reference: ingester RSS peak %.0f MiB at %d persons", mib(sc.RSSRefPeakBytes), sc.S2RefPersons)
		if err := s.ing.stop(); err != nil {
			return err
		}
		s.ing = nil
	}

	// S1: the main project's events, published before the ingester runs.
	first, err := s.scalePublish(ctx)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if all {
		if sc.RawConsume, err = rawConsume(ctx, s.n.js, "bench_raw_scale", first, sp.events, 1, s.cfg.BatchSize); err != nil {
			return fmt.Errorf("raw consume: %w", err)
		}
		s.lg.f("S1 raw consume, ack each: %.0f msg/s", sc.RawConsume.PerSecond)
	}
	if s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester.log"), s.cfg); err != nil {
		return err
	}
	samp := s.sampleIngest(first - 1)
	if err := s.scaleIngest(ctx, first); err != nil {
		// What the ingest did until it failed or was stopped stays in
		// the results.
		sc.Progress = samp.stop()
		_ = s.ing.stopCPUProfile()
		return fmt.Errorf("S1 ingest: %w", err)
	}
	sc.Progress = samp.stop()
	_, peak := procRSS(s.ing.pid)
	if all {
		if err := s.scaleColdRestart(ctx); err != nil {
			s.scaleErr("S1 cold restart", err)
			if s.ing == nil {
				return err
			}
		}
	}
	if all || s.o.runs("s7") {
		// The list project to its full size, the same ingester (S2's peak
		// covers it, and the first ingester's; S7 reads its persons).
		samp = s.sampleIngest(s.watcher.Seq())
		start := time.Now()
		if _, err := s.fillProject(ctx, list.ID, g, sc.S2RefPersons, sp.persons); err != nil {
			samp.stop()
			return fmt.Errorf("filling the list project: %w", err)
		}
		sc.FillRate = rate(sp.persons-sc.S2RefPersons, time.Since(start))
		sc.Progress = appendSamples(sc.Progress, samp.stop())
	}
	if all {
		_, sc.RSSPeakBytes = procRSS(s.ing.pid)
		sc.RSSPeakBytes = max(sc.RSSPeakBytes, peak)
		sc.HeapEndBytes = s.ing.metric("go_memstats_heap_inuse_bytes")
		if cached := min(sp.persons, s.cfg.MaxCachedPersons); cached > 0 {
			sc.BytesPerCachedPerso = (sc.HeapEndBytes - sc.HeapStartBytes) / float64(cached)
		}
		_ = s.ing.heapProfile(s.profile("ingester-scale.heap.pprof"))
		s.lg.f("S2: ingester RSS peak %.0f MiB (reference %.0f MiB)", mib(sc.RSSPeakBytes), mib(sc.RSSRefPeakBytes))
		s.checkpoint()
		if err := s.scaleLists(ctx, list.ID); err != nil {
			s.scaleErr("S3", err)
		}
		if err := s.scaleAnalysis(ctx); err != nil {
			s.scaleErr("S4", err)
		}
		s.checkpoint()
	}
	var compare func() error
	if s.o.runs("s5") {
		var err error
		if compare, err = s.scaleReplay(ctx); err != nil {
			s.scaleErr("S5", err)
		}
		s.checkpoint()
	}
	// The log has served the replay: its messages go, for the disk the
	// copies below need (the stream's sequence goes on). Its size on disk
	// first: the log's bytes per message, as compressed (S7).
	if st, err := s.n.js.Stream(ctx, stream.Events); err == nil {
		if info, err := st.Info(ctx); err == nil {
			sc.StreamMessages, sc.StreamDiskBytes = info.State.Msgs, dirBytes(filepath.Join(s.tmp, "nats"))
			s.lg.f("the log: %d messages, %.1f GiB on disk (%.0f B/message, compression %s)", sc.StreamMessages,
				gib(sc.StreamDiskBytes), float64(sc.StreamDiskBytes)/float64(max(sc.StreamMessages, 1)), s.cfg.Streams.Compression)
		}
		if err := st.Purge(ctx); err != nil {
			s.lg.f("purging the stream: %v", err)
		}
	}
	// S5's comparison and S7 side by side: neither is timed, and they
	// share the machine well. On 18.16 a FINAL reads in one thread, and
	// most of the comparison is FINAL reads; S7 copies the tables into
	// hand-tuned ones in the other. S6 deletes events, so it waits
	// for both.
	compared := make(chan error, 1)
	if compare != nil {
		go func() { compared <- compare() }()
	} else {
		compared <- nil
	}
	if s.o.runs("s7") {
		if err := s.scaleDiskUse(ctx); err != nil {
			s.scaleErr("S7", err)
		}
	}
	if err := <-compared; err != nil {
		s.scaleErr("S5", err)
	}
	s.checkpoint()
	if s.o.runs("s6") {
		if err := s.scalePurges(ctx); err != nil {
			s.scaleErr("S6", err)
		}
	}
	s.scalePlots()
	return ctx.Err()
}

// scaleListsAlone is `-only s3`: the list project filled to the
// reference size and read, then filled to its full size and read again,
// with no events of the main project beside it (S1-S2, S4-S7 do not
// run). Its persons need a few GB, which the full run's disk check
// would overstate.
func (s *session) scaleListsAlone(ctx context.Context) error {
	list, err := s.cp.CreateProject(ctx, s.orgID, "scale-list")
	if err != nil {
		return err
	}
	if err := s.startReaders(ctx); err != nil {
		return err
	}
	if s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester-ref.log"), s.cfg); err != nil {
		return err
	}
	g := newGenerator(s.o.seed+13, 1)
	filled := 0
	for _, size := range []int{s.sp.refPersons, s.sp.persons} {
		start := time.Now()
		if _, err := s.fillProject(ctx, list.ID, g, filled, size); err != nil {
			return fmt.Errorf("filling the list project: %w", err)
		}
		s.lg.f("S3: the list project filled to %d persons (%.0f persons/s)", size, float64(size-filled)/time.Since(start).Seconds())
		filled = size
		if err := s.scaleLists(ctx, list.ID); err != nil {
			s.scaleErr(fmt.Sprintf("S3 at %d persons", size), err)
		}
		s.checkpoint()
	}
	s.scalePlots()
	return ctx.Err()
}

// checkpoint writes the results so far where the run's results go (the
// final write replaces them): a run of hours that is killed, not
// interrupted, keeps the phases it finished.
func (s *session) checkpoint() {
	res := *s.res
	res.Goals = scaleGoals(s.res.Scale)
	res.Seconds = time.Since(s.lg.start).Seconds()
	res.Notes = append(slices.Clone(s.res.Notes), "checkpoint: written while the run went on")
	if _, err := writeJSON(s.o.out, &res); err != nil {
		s.lg.f("checkpoint: %v", err)
	}
}

// scaleDisk checks the free space where the run keeps its data against
// what it needs at its peak, during the replay: the stream (~560 B per
// message; ~160 with S2 compression, 153 in a quick run) and two
// databases of ~260 B per message each, parts not yet merged, with a
// tenth more for the merges' new parts (a 10x run filled 57 GiB halfway
// through its replay, uncompressed). The stream's
// messages are purged after the replay, which makes room for the
// hand-tuned tables beside the replay's database (S7 runs during S5's
// comparison) and, once that is dropped, for the purge's two copies.
func (s *session) scaleDisk() error {
	sp, sc := s.sp, s.res.Scale
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.tmp, &st); err != nil {
		return err
	}
	events := uint64(sp.events) + uint64(sp.persons)
	sc.DiskFreeBytes = st.Bavail * uint64(st.Bsize)
	logBytes := uint64(560)
	if s.cfg.Streams.Compression == "s2" {
		logBytes = 160
	}
	sc.DiskNeededBytes = events * (logBytes + 2*260) * 11 / 10
	s.lg.f("disk: %.1f GiB free in %s, the run needs about %.1f GiB", gib(sc.DiskFreeBytes), s.tmp, gib(sc.DiskNeededBytes))
	if sc.DiskFreeBytes < sc.DiskNeededBytes {
		return fmt.Errorf("%.1f GiB free in %s, the run needs about %.1f GiB: set TMPDIR to a larger filesystem",
			gib(sc.DiskFreeBytes), s.tmp, gib(sc.DiskNeededBytes))
	}
	return nil
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }

// dirBytes is the size of the files under dir (0 when unreadable).
func dirBytes(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
		return nil
	})
	return n
}

// fillProject publishes $set events creating persons from..to-1 of a
// project in chunks, one chunk ahead of the ingester: each chunk is
// published before the one before it is waited for, so the ingester
// always has the next chunk queued (waiting for each chunk before
// publishing the next left it idle while the bench generated and
// published), and at most two chunks are held uncommitted. It returns
// once the last chunk is committed.
func (s *session) fillProject(ctx context.Context, project uint64, g *generator, from, to int) (uint64, error) {
	var pending uint64
	for filled := from; filled < to; {
		n := min(fillChunk, to-filled)
		events := make([]genEvent, n)
		for i := range events {
			events[i] = fillEvent(g, filled+i)
		}
		pr, err := publishAll(ctx, s.n.pubs, project, events)
		if err != nil {
			return 0, err
		}
		if pending > 0 {
			if err := s.watcher.Wait(ctx, pending, time.Hour); err != nil {
				return 0, err
			}
		}
		filled, pending = filled+n, pr.lastSeq
	}
	if pending > 0 {
		if err := s.watcher.Wait(ctx, pending, time.Hour); err != nil {
			return 0, err
		}
	}
	return pending, nil
}

// scalePublish generates and publishes the main events in chunks (50M
// events do not fit in memory at once) and returns the first's sequence.
func (s *session) scalePublish(ctx context.Context) (uint64, error) {
	sp, sc := s.sp, s.res.Scale
	last, err := s.lastSeq(ctx)
	if err != nil {
		return 0, err
	}
	first := last + 1
	g := newGenerator(s.o.seed, sp.ids)
	g.step = time.Duration(sp.days) * 24 * time.Hour / time.Duration(sp.events)
	s.lg.f("S1: publishing %d events over %d distinct ids, %d days", sp.events, sp.ids, sp.days)
	// One goroutine generates the next chunk (one random sequence, so
	// the same events every run) while this one publishes the last.
	chunks := make(chan []genEvent, 1)
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(chunks)
		for done := 0; done < sp.events; {
			events := make([]genEvent, min(fillChunk, sp.events-done))
			for i := range events {
				events[i] = g.next()
			}
			select {
			case chunks <- events:
			case <-gctx.Done():
				return
			}
			done += len(events)
		}
	}()
	var bytes int64
	var took time.Duration
	for events := range chunks {
		for _, e := range events {
			if e.Mutating {
				sc.Mutating++
			}
		}
		pr, err := publishAll(ctx, s.n.pubs, s.project, events)
		if err != nil {
			return 0, err
		}
		bytes, took, s.mainLast = bytes+pr.bytes, took+pr.elapsed, pr.lastSeq
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sc.MeanEventBytes = float64(bytes) / float64(sp.events)
	sc.PublishPerSec = float64(sp.events) / took.Seconds()
	s.scaleTo = g.base.Add(time.Duration(g.n+1) * g.step)
	s.mainGen = g
	s.lg.f("S1: published at %.0f msg/s, %.0f B/event, seq %d..%d", sc.PublishPerSec, sc.MeanEventBytes, first, s.mainLast)
	return first, nil
}

// ScaleCold is the cold restart: the ingester started again with an
// empty cache on the main project and folding more of its events.
type ScaleCold struct {
	Events     int     `json:"events"`
	Seconds    float64 `json:"seconds"` // from the start to the last event's commit
	PerSecond  float64 `json:"per_second"`
	WholeReads float64 `json:"whole_project_reads"` // ingester_whole_project_reads_total
}

// scaleColdRestart stops the ingester, publishes a hundredth of the main
// events more (the generator goes on, past the span S4 reads), and
// starts it again: a restart, a refold after a crash or a lost lease,
// all begin so, with every person of the project in the store and none
// in memory. Recorded against S1's rate.
func (s *session) scaleColdRestart(ctx context.Context) error {
	sc := s.res.Scale
	n := s.sp.events / 100
	if err := s.ing.stop(); err != nil {
		return err
	}
	s.ing = nil
	var last uint64
	for done := 0; done < n; {
		events := make([]genEvent, min(fillChunk, n-done))
		for i := range events {
			events[i] = s.mainGen.next()
		}
		pr, err := publishAll(ctx, s.n.pubs, s.project, events)
		if err != nil {
			return err
		}
		done, last = done+len(events), pr.lastSeq
	}
	var err error
	if s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester-cold.log"), s.cfg); err != nil {
		return err
	}
	start := time.Now()
	if err := s.watcher.Wait(ctx, last, time.Hour); err != nil {
		return err
	}
	took := time.Since(start)
	sc.ColdRestart = &ScaleCold{Events: n, Seconds: took.Seconds(), PerSecond: float64(n) / took.Seconds(),
		WholeReads: s.ing.metric("ingester_whole_project_reads_total")}
	s.lg.f("S1 cold restart: %d events at %.0f events/s (%.2fx S1's rate), %.0f projects read whole",
		n, sc.ColdRestart.PerSecond, ratio(sc.ColdRestart.PerSecond, sc.Ingest.PerSecond), sc.ColdRestart.WholeReads)
	return nil
}

// appendSamples appends b to a, b's clock going on from a's end.
func appendSamples(a, b []ScalePoint) []ScalePoint {
	var off float64
	var events uint64
	if len(a) > 0 {
		off, events = a[len(a)-1].Seconds, a[len(a)-1].Events
	}
	for _, p := range b {
		p.Seconds += off
		p.Events += events
		a = append(a, p)
	}
	return a
}

// sampler records an ingest's progress and the ingester's RSS twice a
// second until stopped.
type sampler struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	pts   []ScalePoint
}

func (s *session) sampleIngest(before uint64) *sampler {
	disk := func() (rows, bytes uint64) {
		_ = s.store.Conn().QueryRow(context.Background(), "SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE active AND database = ? AND table = 'events'",
			benchDB).Scan(&rows, &bytes)
		return rows, bytes
	}
	return sampleWatermark(s.watcher, before, s.ing.pid, disk)
}

// sampleWatermark samples w's progress past before and pid's RSS, and
// disk's figures (when given) every tenth second.
func sampleWatermark(w *progress.Watcher, before uint64, pid int, disk func() (rows, bytes uint64)) *sampler {
	sm := &sampler{stopc: make(chan struct{})}
	start := time.Now()
	sm.wg.Add(1)
	go func() {
		defer sm.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			rss, _ := procRSS(pid)
			seq := w.Seq()
			pt := ScalePoint{Seconds: time.Since(start).Seconds(), Events: max(seq, before) - before, RSSBytes: rss}
			if disk != nil && len(sm.pts)%20 == 0 {
				pt.TableRows, pt.TableBytes = disk()
			}
			sm.pts = append(sm.pts, pt)
			select {
			case <-sm.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return sm
}

func (sm *sampler) stop() []ScalePoint {
	close(sm.stopc)
	sm.wg.Wait()
	return sm.pts
}

// scaleIngest is S1: the ingester folds the pre-published main events;
// the clock runs from its first delivery to the last event's commit.
func (s *session) scaleIngest(ctx context.Context, first uint64) error {
	sc := s.res.Scale
	if err := s.ing.startCPUProfile(s.profile("ingester-s1.cpu.pprof")); err != nil {
		return err
	}
	if err := s.waitFirstDelivery(ctx); err != nil {
		return err
	}
	meter := newCPUMeter(s.ing.pid, s.ch.pid)
	start := time.Now()
	// The watermark polled every 50 ms: each commit's events are taken
	// as folded evenly since the commit before, so the tenths' times are
	// read off the line through the commits.
	n := uint64(s.sp.events)
	commits := []commitPoint{{0, first - 1}}
	for {
		seq := s.watcher.Seq()
		if seq > commits[len(commits)-1].seq {
			commits = append(commits, commitPoint{time.Since(start), seq})
		}
		if seq >= s.mainLast {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > 3*time.Hour {
			return fmt.Errorf("the ingest did not reach seq %d in 3 hours (at %d)", s.mainLast, seq)
		}
	}
	tTenth, tNine := commitTime(commits, first-1+n/10), commitTime(commits, first-1+n*9/10)
	elapsed := time.Since(start)
	cpu := meter.stop()
	_ = s.ing.stopCPUProfile()
	sc.Ingest = rate(s.sp.events, elapsed)
	sc.IngesterCPUUS = cpu[0] / float64(s.sp.events) * 1e6
	sc.ClickHouseCPUUS = cpu[1] / float64(s.sp.events) * 1e6
	if tTenth > 0 {
		sc.FirstTenthRate = float64(n/10) / tTenth.Seconds()
	}
	if last := commits[len(commits)-1].at - tNine; last > 0 {
		sc.LastTenthRate = float64(n-n*9/10) / last.Seconds()
	}
	s.lg.f("S1: %.0f events/s (first tenth %.0f, last tenth %.0f); ingester %.1f us/event, ClickHouse %.1f us/event",
		sc.Ingest.PerSecond, sc.FirstTenthRate, sc.LastTenthRate, sc.IngesterCPUUS, sc.ClickHouseCPUUS)
	if got := s.count(ctx, "SELECT count() FROM events WHERE project_id = ?", s.project); got < n {
		return fmt.Errorf("events table holds %d rows of the project after the commit of %d events", got, n)
	}
	return nil
}

// commitPoint is a commit seen by the watermark: when, and up to which
// sequence.
type commitPoint struct {
	at  time.Duration
	seq uint64
}

// commitTime interpolates when seq was folded, between the commits
// around it.
func commitTime(cs []commitPoint, seq uint64) time.Duration {
	for i := 1; i < len(cs); i++ {
		if cs[i].seq >= seq {
			a, b := cs[i-1], cs[i]
			f := float64(seq-a.seq) / float64(b.seq-a.seq)
			return a.at + time.Duration(f*float64(b.at-a.at))
		}
	}
	return cs[len(cs)-1].at
}

// scaleLists is S3 at the list project's current size: the first page,
// email=, distinct_id= and search=, with the bare GET person; and S4's
// property filter with the bare scan of its columns. c=1, idle.
func (s *session) scaleLists(ctx context.Context, project uint64) error {
	s.settle(ctx)
	ids, err := s.samplePersonsOf(ctx, project, 1000, ^uint64(0))
	if err != nil {
		return err
	}
	probes, err := s.sampleProbes(ctx, project, 1000)
	if err != nil {
		return err
	}
	ops, err := s.g5Ops(project, ids)
	if err != nil {
		return err
	}
	a := s.api
	pr := func(i int) probe { return probes[i%len(probes)] }
	keyed := []namedOp{
		{name: nameList + layerAPI, op: ops.list},
		{name: nameListEmail + layerAPI, op: a.listOp(project, func(i int) string { return "email=" + url.QueryEscape(pr(i).email) })},
		{name: nameListDistinctID + layerAPI, op: a.listOp(project, func(i int) string { return "distinct_id=" + url.QueryEscape(pr(i).distinctID) })},
		{name: nameListSearchMail + layerAPI, op: a.listOp(project, func(i int) string {
			e := pr(i).email
			return "search=" + url.QueryEscape(e[:strings.IndexByte(e, '@')+1])
		})},
	}
	// The reads by key (S3) in a set of their own, 2,000 each: their p99
	// is the 20th slowest, not the 3rd of 300, and no whole-table scan
	// runs between them: at 10M persons the property filter's scans take
	// seconds each, and among them `email=`'s p99 was 57.8 ms where alone
	// it was 41.1 ms, a tail that grew with the scans, not with the key
	// reads. The scan and the property filter (S4) follow, alone.
	ls := measureSet(ctx, "idle", 1, s.sp.keyed, append([]namedOp{{name: nameGetG5 + layerRaw, op: ops.rawGet}}, keyed...)...)
	ls = append(ls, measureSet(ctx, "idle", 1, s.sp.reads,
		namedOp{name: nameScan + layerRaw, op: ops.scan}, namedOp{name: nameListFiltered + layerAPI, op: ops.filtered})...)
	pt := ScaleList{Persons: s.count(ctx, "SELECT count() FROM persons FINAL WHERE project_id = ? AND is_deleted = 0", project), Reads: ls}
	for _, l := range ls {
		s.lg.f("S3 %d persons: %s", pt.Persons, l)
	}
	pt.Statements = s.scaleBreakdown(ctx, pt.Persons, keyed)
	if tables, err := tableDisk(ctx, s, benchDB); err == nil {
		for _, t := range tables {
			if strings.HasPrefix(t.Table, "person") {
				pt.Tables = append(pt.Tables, t)
				s.lg.f("S3 %d persons: table %s, %d active parts, %d rows", pt.Persons, t.Table, t.Parts, t.Rows)
			}
		}
	}
	s.res.Scale.Lists = append(s.res.Scale.Lists, pt)
	return nil
}

// writePlot writes one plot next to the results.
func (s *session) writePlot(name string, p plot) {
	path := s.profile(name + ".svg")
	if err := os.WriteFile(path, []byte(p.svg()), 0o644); err != nil {
		s.lg.f("plot %s: %v", name, err)
		return
	}
	s.res.Scale.Plots = append(s.res.Scale.Plots, path)
}
