package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
)

// session is one run's state, phase by phase.
type session struct {
	o       options
	p       plan
	res     *Result
	lg      progressLog
	tmp     string
	ch      *chServer
	n       *natsEnv
	profile func(name string) string
	log     *slog.Logger
	cfg     ingest.Config

	project  uint64
	orgID    string
	key      string
	cp       *controlplane.Store
	store    *chstore.Store // the ingester's database, for checks
	watcher  *progress.Watcher
	ing      *childProc
	api      *apiServer
	apiStore *chstore.Store
	rawStore *chstore.Store
	// reader measures GET person's rows (readerchild.go).
	reader   *readerChild
	mainLast uint64 // last stream sequence of the main dataset
	// The scale run's plan and the end of its main events' span.
	sp      scalePlan
	scaleTo time.Time
	// mainGen generated the main events; the cold restart continues it.
	mainGen *generator
	// purgeLog is the deleter's debug log, every purge of the run in one.
	purgeLog string
}

const benchDB = "bench"

func (s *session) close() {
	if s.ing != nil {
		if err := s.ing.stop(); err != nil {
			s.lg.f("ingester stop: %v", err)
		}
	}
	if s.reader != nil {
		s.reader.stop()
	}
	if s.api != nil {
		s.api.stop()
	}
	for _, st := range []*chstore.Store{s.apiStore, s.rawStore} {
		if st != nil {
			st.Close()
		}
	}
	if s.watcher != nil {
		s.watcher.Stop()
	}
	if s.cp != nil {
		s.cp.Close()
	}
	if s.store != nil {
		if os.Getenv("CLICKHOUSE_ADDR") != "" {
			_ = s.store.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS "+benchDB)
		}
		s.store.Close()
	}
}

func (s *session) run(ctx context.Context) error {
	if err := s.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if s.o.scale > 0 {
		return s.scale(ctx)
	}
	if s.o.only == "g9" {
		// Its own events and ingesters; nothing else needed.
		if err := s.g9(ctx); err != nil {
			s.res.Project.G9Err = err.Error()
			s.lg.f("G9 failed: %v", err)
		}
		return ctx.Err()
	}
	events := s.generate()
	if err := s.publishMain(ctx, events); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	all := s.o.only == ""
	if all || s.o.only == "g1" {
		if err := s.rawConsumes(ctx); err != nil {
			return fmt.Errorf("raw consume: %w", err)
		}
	}
	if s.o.only == "g1" {
		// The ingester's own work alone, for profiling it (the ingest
		// ratio and CPU per event).
		return s.ingestMain(ctx)
	}
	if all {
		if err := s.inserts(ctx, events); err != nil {
			return fmt.Errorf("G2 inserts: %w", err)
		}
	}
	events = nil
	if err := s.ingestMain(ctx); err != nil {
		return fmt.Errorf("G1 ingest: %w", err)
	}
	if err := s.fill(ctx); err != nil {
		return fmt.Errorf("fill persons: %w", err)
	}
	if s.o.runs("g5") {
		if err := s.reads(ctx); err != nil {
			return fmt.Errorf("reads: %w", err)
		}
		if err := s.g5f(ctx); err != nil {
			s.res.Project.G5fErr = err.Error()
			s.lg.f("G5f failed: %v", err)
		}
	}
	// The analysis before the purge, which deletes persons its events belong to.
	if s.o.runs("g10") {
		if err := s.g10(ctx); err != nil {
			s.res.Project.G10Err = err.Error()
			s.lg.f("G10 failed: %v", err)
		}
	}
	if s.o.runs("g7") {
		if err := s.purge(ctx); err != nil {
			s.res.Project.PurgeErr = err.Error()
			s.lg.f("G7 purge failed: %v", err)
		}
	}
	if !all {
		return ctx.Err()
	}
	if s.p.soak > 0 {
		s.lg.f("soak: %s at %d events/s", s.p.soak, s.p.soakRate)
		sk := soak(ctx, s.n.pubs, s.watcher, s.ing, s.project, freshGenerator(s.o.seed+2, 5*s.p.ids, "soak_"), s.p.soak, s.p.soakRate)
		s.res.Project.Soak = &sk
		s.lg.f("soak: RSS %s MiB, growth %.1f%%", rssList(sk.RSSBytes), sk.GrowthPct)
	}
	// The transformations last: their cases each start their own ingester, so the main one
	// stops first (two would share the consumer).
	if err := s.ing.stop(); err != nil {
		s.lg.f("ingester stop: %v", err)
	}
	s.ing = nil
	if err := s.g9(ctx); err != nil {
		s.res.Project.G9Err = err.Error()
		s.lg.f("G9 failed: %v", err)
	}
	return ctx.Err()
}

func (s *session) setup(ctx context.Context) error {
	sc := stream.Config{Compression: s.cfg.Streams.Compression}
	if s.o.scale > 0 {
		// 50M unique message ids: a shorter dedupe window than the
		// default's 10 minutes keeps the embedded server's map of them
		// (and its collector's work) a tenth as large while publishing;
		// nothing is read through it.
		sc.DuplicateWindow = time.Minute
	}
	if err := stream.Ensure(ctx, s.n.js, sc); err != nil {
		return err
	}
	cp, err := controlplane.Open(ctx, s.n.js, s.log)
	if err != nil {
		return err
	}
	s.cp = cp
	org, err := cp.CreateOrganization(ctx, "bench")
	if err != nil {
		return err
	}
	proj, err := cp.CreateProject(ctx, org.ID, "bench")
	if err != nil {
		return err
	}
	secret, _, err := cp.CreateKey(ctx, org.ID, "bench", []string{"*"})
	if err != nil {
		return err
	}
	s.project, s.orgID, s.key = proj.ID, org.ID, secret
	if s.store, err = s.ch.openDB(ctx, benchDB); err != nil {
		return err
	}
	kv, err := progress.Open(ctx, s.n.js)
	if err != nil {
		return err
	}
	s.watcher, err = progress.Watch(ctx, kv, s.cfg.Consumer)
	return err
}

func (s *session) generate() []genEvent {
	s.lg.f("generating %d events over %d distinct ids (seed %d)", s.p.events, s.p.ids, s.o.seed)
	g := newGenerator(s.o.seed, s.p.ids)
	events := make([]genEvent, s.p.events)
	mut := 0
	for i := range events {
		events[i] = g.next()
		if events[i].Mutating {
			mut++
		}
	}
	s.res.Dataset = Dataset{Seed: s.o.seed, Events: s.p.events, MutatingEvents: mut, DistinctIDs: s.p.ids, PersonsTarget: s.p.persons,
		PersonRowsModel: personRowsModel(events, []int{s.cfg.BatchSize, 100_000, 250_000, len(events)})}
	return events
}

func (s *session) publishMain(ctx context.Context, events []genEvent) error {
	s.lg.f("publishing %d events", len(events))
	pr, err := publishAll(ctx, s.n.pubs, s.project, events)
	if err != nil {
		return err
	}
	s.mainLast = pr.lastSeq
	s.res.Dataset.MeanEventBytes = float64(pr.bytes) / float64(pr.n)
	s.res.Dataset.PublishPerSecond = float64(pr.n) / pr.elapsed.Seconds()
	s.lg.f("published at %.0f msg/s, %.0f B/event, last seq %d", s.res.Dataset.PublishPerSecond, s.res.Dataset.MeanEventBytes, pr.lastSeq)
	return nil
}

func (s *session) rawConsumes(ctx context.Context) error {
	b := &s.res.Baseline
	var err error
	if b.ConsumeAckEach, err = rawConsume(ctx, s.n.js, "bench_raw_ack_each", 0, s.p.events, 1, s.cfg.BatchSize); err != nil {
		return err
	}
	s.lg.f("raw consume, ack each: %.0f msg/s", b.ConsumeAckEach.PerSecond)
	if b.ConsumeAckAll500, err = rawConsume(ctx, s.n.js, "bench_raw_ackall", 0, s.p.events, 500, s.cfg.BatchSize); err != nil {
		return err
	}
	s.lg.f("raw consume, AckAll every 500th: %.0f msg/s", b.ConsumeAckAll500.PerSecond)
	// The ingester's own policy (AckNone): not the ingest's baseline
	// (the target is set against ack each), reported beside it.
	if b.ConsumeNoAck, err = rawConsume(ctx, s.n.js, "bench_raw_noack", 0, s.p.events, 0, s.cfg.BatchSize); err != nil {
		return err
	}
	s.lg.f("raw consume, no ack: %.0f msg/s", b.ConsumeNoAck.PerSecond)
	return nil
}

func (s *session) inserts(ctx context.Context, events []genEvent) error {
	rows := make([]eventstore.Row, len(events))
	for i, e := range events {
		rows[i] = e.row(s.project, uint64(i+1))
	}
	ic, err := compareInserts(ctx, s.ch, s.tmp, rows, s.cfg.BatchSize)
	if err != nil {
		return err
	}
	s.res.Baseline.Insert = ic
	s.lg.f("events insert: clickhouse-client %.0f rows/s, store.WriteRows %.0f rows/s", ic.Client.PerSecond, ic.Store.PerSecond)
	return nil
}

// waitFirstDelivery polls the ingester's consumer until it has delivered.
func (s *session) waitFirstDelivery(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if c, err := s.n.js.Consumer(ctx, stream.Events, s.cfg.Consumer); err == nil {
			if info, err := c.Info(ctx); err == nil && info.Delivered.Consumer > 0 {
				return nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("the ingester delivered nothing within a minute")
}

func (s *session) count(ctx context.Context, sql string, args ...any) uint64 {
	var n uint64
	if err := s.store.Conn().QueryRow(rawCtx(ctx), sql, args...).Scan(&n); err != nil {
		s.lg.f("count %q: %v", sql, err)
	}
	return n
}

func (s *session) livePersons(ctx context.Context) uint64 {
	return s.count(ctx, "SELECT count() FROM persons FINAL WHERE project_id = ? AND is_deleted = 0", s.project)
}

// ingestMain is the ingest and person rows run: the ingester child folds the pre-published
// dataset; the clock runs from its first delivery to the watermark of the
// last event's commit.
func (s *session) ingestMain(ctx context.Context) error {
	var err error
	s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester.log"), s.cfg)
	if err != nil {
		return err
	}
	if err := s.ing.startCPUProfile(s.profile("ingester-g1.cpu.pprof")); err != nil {
		return err
	}
	if err := s.waitFirstDelivery(ctx); err != nil {
		return err
	}
	meter := newCPUMeter(s.ing.pid, s.ch.pid, os.Getpid())
	busy0 := systemBusy()
	start := time.Now()
	// The bench process's own profile: the NATS server, and the bench.
	stopSelf := cpuProfile(s.profile("bench-g1.cpu.pprof"))
	s.lg.f("G1: ingesting %d events", s.p.events)
	if err := s.watcher.Wait(ctx, s.mainLast, time.Hour); err != nil {
		return fmt.Errorf("waiting for seq %d: %w", s.mainLast, err)
	}
	elapsed := time.Since(start)
	cpu := meter.stop()
	other := (systemBusy() - busy0).Seconds() - cpu[0] - cpu[1] - cpu[2]
	stopSelf()
	_ = s.ing.stopCPUProfile()
	// The heap profile's alloc_space is the ingest's allocation: the child has
	// done nothing else.
	_ = s.ing.heapProfile(s.profile("ingester-g1.heap.pprof"))
	in := &s.res.Project.Ingest
	in.OtherCPUSeconds = max(0, other)
	in.CPUCapacitySeconds = elapsed.Seconds() * float64(runtime.NumCPU())
	in.Rate = rate(s.p.events, elapsed)
	in.IngesterCPUPerEventUS = cpu[0] / float64(s.p.events) * 1e6
	in.ClickHouseCPUPerEvtUS = cpu[1] / float64(s.p.events) * 1e6
	in.BenchNATSCPUPerEventUS = cpu[2] / float64(s.p.events) * 1e6
	in.EventsInTable = s.count(ctx, "SELECT count() FROM events")
	in.PersonRowsInTable = s.count(ctx, "SELECT count() FROM persons")
	in.PersonsLive = s.livePersons(ctx)
	in.PersonsEver = s.count(ctx, "SELECT count() FROM persons FINAL WHERE project_id = ?", s.project)
	in.PersonRowsMetric = s.ing.metric("ingester_person_rows_total")
	in.DistinctIDRows = s.ing.metric("ingester_distinct_id_rows_total")
	in.Batches = s.ing.metric("ingester_batches_total")
	in.FoldSeconds = s.ing.metric("ingester_fold_seconds_sum")
	in.FlushSeconds = s.ing.metric("ingester_flush_seconds_sum")
	if int(in.EventsInTable) < s.p.events {
		return fmt.Errorf("events table holds %d rows after the commit of %d events", in.EventsInTable, s.p.events)
	}
	s.lg.f("G1: %.0f events/s, ingester %.1f us/event, ClickHouse %.1f us/event; %d live persons, %.0f person rows",
		in.PerSecond, in.IngesterCPUPerEventUS, in.ClickHouseCPUPerEvtUS, in.PersonsLive, in.PersonRowsMetric)
	return nil
}

// fill brings the persons table to the plan's size with $set events for
// new ids, then records the ingester's memory.
func (s *session) fill(ctx context.Context) error {
	live := s.livePersons(ctx)
	nFill := s.p.persons - int(live)
	var peak int64
	if nFill > 0 {
		g := newGenerator(s.o.seed+7, s.p.ids)
		events := make([]genEvent, nFill)
		for i := range events {
			events[i] = fillEvent(g, i)
		}
		s.lg.f("filling to %d persons: %d new persons", s.p.persons, nFill)
		start := time.Now()
		pr, err := publishAll(ctx, s.n.pubs, s.project, events)
		if err != nil {
			return err
		}
		if err := s.watcher.Wait(ctx, pr.lastSeq, time.Hour); err != nil {
			return err
		}
		s.res.Project.Fill = rate(nFill, time.Since(start))
		s.res.Dataset.FillEvents = nFill
	}
	s.res.Project.PersonsTotal = s.livePersons(ctx)
	rss, hwm := procRSS(s.ing.pid)
	peak = max(peak, hwm)
	s.res.Project.RSSAt1MBytes, s.res.Project.RSSPeakBytes = rss, peak
	s.res.Project.HeapInuseBytes = s.ing.metric("go_memstats_heap_inuse_bytes")
	s.res.Project.CachedPersonsMax = s.cfg.MaxCachedPersons
	if err := s.ing.heapProfile(s.profile("ingester-persons.heap.pprof")); err != nil {
		s.lg.f("heap profile: %v", err)
	}
	s.lg.f("%d persons; ingester RSS %.0f MiB (peak %.0f MiB)", s.res.Project.PersonsTotal, mib(rss), mib(peak))
	return nil
}
