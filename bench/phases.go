package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/stream"
)

// samplePersons returns live person ids of the main project in a fixed
// pseudo-random order.
func (s *session) samplePersons(ctx context.Context, n int, maxID uint64) ([]uint64, error) {
	return s.samplePersonsOf(ctx, s.project, n, maxID)
}

func (s *session) samplePersonsOf(ctx context.Context, project uint64, n int, maxID uint64) ([]uint64, error) {
	rows, err := s.store.Conn().Query(rawCtx(ctx),
		"SELECT id FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 AND id <= ? ORDER BY cityHash64(id) LIMIT ?",
		project, maxID, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no live persons")
	}
	return ids, rows.Err()
}

// readOps are GET person at the three layers, and the list's first page.
type readOps struct {
	rawGet, storeGet, apiGet func(ctx context.Context, i int) error
	apiList                  func(ctx context.Context, i int) error
}

func (s *session) readOps(ids []uint64) readOps {
	raw, st, api, project := s.rawStore.Conn(), s.apiStore, s.api, s.project
	id := func(i int) uint64 { return ids[i%len(ids)] }
	return readOps{
		rawGet:   func(ctx context.Context, i int) error { return rawGetPerson(ctx, raw, project, id(i)) },
		storeGet: func(ctx context.Context, i int) error { _, err := st.GetPerson(ctx, project, id(i)); return err },
		apiGet: func(ctx context.Context, i int) error {
			_, err := api.get(ctx, api.personPath(id(i)))
			return err
		},
		apiList: api.listOp(project, fixed("")),
	}
}

const (
	nameGet          = "GET person"
	nameList         = "list first page"
	nameListFiltered = "list first page, property filter"
	layerRaw         = ": bare driver"
	layerStore       = ": store"
	layerAPI         = ": HTTP API"
)

// reads measures GET person and the list (bare driver, store, HTTP API)
// idle and under ingest load, and PATCH-to-visible.
func (s *session) reads(ctx context.Context) error {
	if err := s.startReaders(ctx); err != nil {
		return err
	}
	ids, err := s.samplePersons(ctx, 5000, ^uint64(0))
	if err != nil {
		return err
	}
	s.res.Dataset.ReadSamplePerson = len(ids)
	ops := s.readOps(ids)
	// GET person's rows are measured by the reader child, apart from
	// the load generator and NATS (readerchild.go); the store's row, a
	// call into this process's store, stays here.
	if s.reader, err = startReader(s, ids); err != nil {
		return err
	}
	rawGet := namedOp{name: nameGet + layerRaw, run: s.reader.run("raw-get")}
	apiGet := namedOp{name: nameGet + layerAPI, run: s.reader.run("api-get")}
	p := s.p
	// Bare-driver lines are baselines; the others the project's.
	record := func(ls []Latency) {
		for _, l := range ls {
			if strings.HasSuffix(l.Name, layerRaw) {
				s.res.Baseline.Reads = append(s.res.Baseline.Reads, l)
			} else {
				s.res.Project.Reads = append(s.res.Project.Reads, l)
			}
			s.lg.f("%s", l)
		}
	}
	s.settle(ctx)
	s.lg.f("reads, idle")
	stopProf := s.profileReads("idle")
	// GET person at three layers.
	for _, c := range []struct {
		conc int
		b    budget
	}{{1, p.get1}, {16, p.get16}} {
		set := []namedOp{rawGet}
		if c.conc == 1 {
			set = append(set, namedOp{name: nameGet + layerStore, op: ops.storeGet})
		}
		record(measureSet(ctx, "idle", c.conc, c.b, append(set, apiGet)...))
	}
	if err := s.g5(ctx, ids, record); err != nil {
		return fmt.Errorf("G5: %w", err)
	}
	stopProf()

	s.lg.f("PATCH-to-visible, idle")
	patchIDs := ids[:min(len(ids), 500)]
	pt, vis, pending, err := s.api.patchVisible(ctx, patchIDs, p.patchIdle, "idle")
	if err != nil {
		return err
	}
	pt.Load, vis.Load = "idle", "idle"
	s.res.Project.PatchIdle = [2]Latency{pt, vis}
	s.res.Project.PatchPending += pending
	s.lg.f("%s", vis)
	if l, err := s.insertProbe(ctx); err == nil {
		s.res.Project.OneRowInsert = l
		s.lg.f("%s", l)
	} else {
		s.lg.f("one-row insert probe: %v", err)
	}

	s.lg.f("reads while ingesting (backlog kept at %d events)", 2*s.cfg.BatchSize)
	load := startLoad(ctx, s.n.pubs, s.watcher, s.project, freshGenerator(s.o.seed+1, s.p.ids, "load_"), 2*s.cfg.BatchSize)
	time.Sleep(2 * time.Second)
	stopProf = s.profileReads("load")
	record(measureSet(ctx, "ingesting", 1, p.get1, rawGet, apiGet))
	record(measureSet(ctx, "ingesting", 16, p.get16, apiGet))
	// The list while ingesting has no target of its own (issue #12); c=1
	// is kept to show what ingest does to it.
	record(measureSet(ctx, "ingesting", 1, p.list1, namedOp{name: nameList + layerAPI, op: ops.apiList}))
	stopProf()
	pt, vis, pending, perr := s.api.patchVisible(ctx, patchIDs[len(patchIDs)/2:], p.patchLoad, "load")
	pt.Load, vis.Load = "ingesting", "ingesting"
	s.res.Project.PatchLoad = [2]Latency{pt, vis}
	s.res.Project.PatchPending += pending
	s.res.Project.Load = load.stop(s.watcher)
	if perr != nil {
		return perr
	}
	s.lg.f("%s", vis)
	s.lg.f("ingest under read load: %.0f events/s", s.res.Project.Load.IngestPerSec)
	return s.drain(ctx)
}

// profileReads profiles the API child and this process (the bare
// driver, the embedded NATS server, the clients) during a read phase
// until the returned function is called.
func (s *session) profileReads(phase string) func() {
	api := s.api.cpuProfile(s.profile("api-reads-" + phase + ".cpu.pprof"))
	self := cpuProfile(s.profile("bench-reads-" + phase + ".cpu.pprof"))
	return func() {
		self()
		api()
		heapProfile(s.profile("bench-reads-" + phase + ".heap.pprof"))
	}
}

// startReaders opens the API's and the bare driver's connections and
// starts the HTTP API, once.
func (s *session) startReaders(ctx context.Context) error {
	if s.api != nil {
		return nil
	}
	var err error
	if s.apiStore, err = s.ch.open(ctx, benchDB); err != nil {
		return err
	}
	if s.rawStore, err = s.ch.open(ctx, benchDB); err != nil {
		return err
	}
	s.api, err = startAPI(s)
	return err
}

// insertProbe times one-row inserts through the driver (PrepareBatch,
// Append, Send: how chstore writes every table) into a scratch copy of the
// schema: the floor under each of the inserts a small batch makes.
func (s *session) insertProbe(ctx context.Context) (Latency, error) {
	const db = "bench_probe"
	st, err := s.ch.openDB(ctx, db)
	if err != nil {
		return Latency{}, err
	}
	defer st.Close()
	defer dropDB(ctx, s.ch, db)
	ls := measureSet(ctx, "idle", 1, budget{N: 100, Max: 10 * time.Second}, namedOp{name: "INSERT of one row (PrepareBatch+Send)", op: func(ctx context.Context, i int) error {
		b, err := st.Conn().PrepareBatch(ctx, "INSERT INTO ingest_batches (consumer, first_seq, last_seq, events, persons, distinct_ids, flushed_at)")
		if err != nil {
			return err
		}
		if err := b.Append("probe", uint64(i), uint64(i), uint32(1), uint32(0), uint32(0), time.Now().UTC()); err != nil {
			b.Abort()
			return err
		}
		return b.Send()
	}})
	return ls[0], nil
}

// settle waits (a bounded time) for ClickHouse's background merges to
// finish, so idle reads are measured on a quiet server.
func (s *session) settle(ctx context.Context) {
	limit := 90 * time.Second
	if s.p.mode == "quick" {
		limit = 10 * time.Second
	}
	if _, quiet, err := waitMerges(rawCtx(ctx), s.store.Conn(), limit); err != nil || quiet {
		if err != nil {
			s.lg.f("waiting for merges: %v", err)
		}
		return
	}
	s.res.Notes = append(s.res.Notes, fmt.Sprintf("background merges still running after %s when idle reads started", limit))
}

// drain waits until the ingester has committed everything in the stream.
func (s *session) drain(ctx context.Context) error {
	last, err := s.lastSeq(ctx)
	if err != nil {
		return err
	}
	return s.watcher.Wait(ctx, last, 30*time.Minute)
}

// lastSeq is the events stream's last sequence.
func (s *session) lastSeq(ctx context.Context) (uint64, error) {
	st, err := s.n.js.Stream(ctx, stream.Events)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// purge: N persons of the main dataset are deleted with their
// events through the log ($delete_person with $delete_events, as the API
// publishes it); once the ingester has queued the requests, the deleter and
// the raw ALTER DELETE each purge a copy of the tables.
func (s *session) purge(ctx context.Context) error {
	ids, err := s.samplePersons(ctx, s.p.deletePersons, s.mainLast)
	if err != nil {
		return err
	}
	s.lg.f("G7: deleting %d persons with their events", len(ids))
	if err := s.queueDeletions(ctx, ids); err != nil {
		return err
	}
	for i := range max(1, s.o.purgeRuns) {
		pg, err := s.measurePurge(ctx, ids)
		if err != nil {
			return err
		}
		if i == 0 {
			s.res.Project.Purge = &pg
		} else {
			s.res.Project.PurgeRepeats = append(s.res.Project.PurgeRepeats, pg)
		}
		s.lg.f("G7 (run %d): raw ALTER DELETE %.2fs, deletion.Runner %.2fs (%.2fx, %d mutations)", i+1,
			pg.RawSeconds, pg.RunnerSeconds, pg.RunnerSeconds/pg.RawSeconds, pg.RunnerMutation)
	}
	return nil
}

// queueDeletions publishes $delete_person with $delete_events for each
// person, as the API does, and waits until the ingester has queued the
// requests.
func (s *session) queueDeletions(ctx context.Context, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	// Seeded by the batch's first person: two batches' commands never
	// share a uuid (the stream would drop the second as a duplicate).
	g := newGenerator(s.o.seed+9+ids[0], 1)
	events := make([]genEvent, len(ids))
	for i, id := range ids {
		props, err := json.Marshal(map[string]any{event.PropPersonID: id, event.PropDeleteEvents: true,
			event.PropActor: event.Actor{KeyID: "bench", KeyLabel: "bench", OrganizationID: s.orgID}})
		if err != nil {
			return err
		}
		events[i] = genEvent{UUID: g.uuid(), Name: event.DeletePerson, DistinctID: "bench", TS: time.Now().UTC(),
			Props: string(props), Command: true}
	}
	pr, err := publishAll(ctx, s.n.pubs, s.project, events)
	if err != nil {
		return err
	}
	if err := s.watcher.Wait(ctx, pr.lastSeq, 30*time.Minute); err != nil {
		return err
	}
	queued := s.count(ctx, "SELECT count() FROM person_deletion_requests FINAL WHERE status = 'pending'")
	if int(queued) < len(ids) {
		return fmt.Errorf("%d deletion requests queued, want %d", queued, len(ids))
	}
	return nil
}

// measurePurge times the raw ALTER DELETE of ids' events and the
// deleter's run over every queued request, each on a copy of the tables;
// the runner's own log (debug: each step's time) goes next to the
// results, to tell where a purge's time goes.
func (s *session) measurePurge(ctx context.Context, ids []uint64) (Purge, error) {
	if s.purgeLog == "" {
		s.purgeLog = s.profile("purge-runner.log")
	}
	logFile, err := os.OpenFile(s.purgeLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Purge{}, err
	}
	defer logFile.Close()
	runnerLog := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return measurePurge(ctx, s.ch, benchDB, s.project, ids, runnerLog)
}
