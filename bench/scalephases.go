package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/testenv"
)

// ScaleWindow is S4 at one window: each actor route and the bare count
// of the window's events of the route's names.
type ScaleWindow struct {
	Days   int       `json:"days"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Events uint64    `json:"events"`
	Reads  []Latency `json:"reads"`
}

// scaleFunnel is the funnel of S4: the main dataset's event names.
var scaleFunnel = []string{"$pageview", "$autocapture", "checkout_step"}

// scaleAnalysis is S4: the actor routes over windows of 7, 15 and 30 days
// ending on the main events' last whole day, each against a bare count of
// its window's events of the same names.
func (s *session) scaleAnalysis(ctx context.Context) error {
	end := s.scaleTo.Truncate(24 * time.Hour)
	stop := s.api.cpuProfile(s.profile("api-s4.cpu.pprof"))
	defer stop()
	for _, days := range s.sp.windows {
		from := end.AddDate(0, 0, -days)
		w := ScaleWindow{Days: days, From: from, To: end,
			Events: s.count(ctx, "SELECT count() FROM events WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)",
				s.project, from.Unix(), end.Unix())}
		for _, r := range analysisRoutes(s.project, from, end, scaleFunnel) {
			body, err := s.api.get(ctx, r.path)
			if err != nil {
				return fmt.Errorf("%s over %d days: %w", r.name, days, err)
			}
			if n, err := peopleIn(body); err != nil || n == 0 {
				return fmt.Errorf("%s over %d days: %d persons on the first page (%v)", r.name, days, n, err)
			}
			api := func(ctx context.Context, i int) error { _, err := s.api.get(ctx, r.path); return err }
			ls := measureSet(ctx, "idle", 1, s.sp.analysis,
				namedOp{name: "S4 " + r.name + layerRaw, op: s.windowScan(from, end, r.events)},
				namedOp{name: "S4 " + r.name + layerAPI, op: api})
			for _, l := range ls {
				s.lg.f("S4 %d days (%d events): %s", days, w.Events, l)
			}
			w.Reads = append(w.Reads, ls...)
		}
		s.res.Scale.Analysis = append(s.res.Scale.Analysis, w)
	}
	return nil
}

// ScaleReplay is S5: every table rebuilt from the log into a second
// database by a second ingester, and each table's state compared.
type ScaleReplay struct {
	Messages uint64 `json:"messages"`
	// Committed of Messages; Finished when the replay reached the end
	// (Rate is then the whole replay's, else what was committed).
	Committed uint64       `json:"committed"`
	Finished  bool         `json:"finished"`
	Rate      Rate         `json:"rate"`
	Progress  []ScalePoint `json:"progress"`
	Tables    []TableSum   `json:"tables"`
	Identical bool         `json:"identical"`
}

// TableSum is one state query (testenv.StateQueries, the tests' replay
// comparison) over both databases: its rows and the sum of their hashes.
type TableSum struct {
	Query      string `json:"query"`
	Rows       uint64 `json:"rows"`
	Sum        uint64 `json:"sum"`
	ReplayRows uint64 `json:"replay_rows"`
	ReplaySum  uint64 `json:"replay_sum"`
	// Seconds the query took over both databases.
	Seconds float64 `json:"seconds,omitempty"`
}

const replayDB = "bench_replay"

// scaleReplay is S5's replay: a second ingester rebuilds every table
// from the log into a database of its own, alone on the machine while it
// is timed. It returns the comparison of the two databases to run next
// (which drops the replay's database), or an error.
func (s *session) scaleReplay(ctx context.Context) (compare func() error, err error) {
	last, err := s.lastSeq(ctx)
	if err != nil {
		return nil, err
	}
	// Only the replay's ingester runs while it is timed; the main one
	// runs again after, for the phases that follow, whatever happened.
	if err := s.ing.stop(); err != nil {
		return nil, err
	}
	s.ing = nil
	defer func() {
		var err error
		if s.ing, err = startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester-after.log"), s.cfg); err != nil {
			s.lg.f("restarting the ingester: %v", err)
		}
	}()
	db, err := s.ch.openDB(ctx, replayDB)
	if err != nil {
		return nil, err
	}
	// The replay's database goes once it is compared, or now when
	// there is nothing to compare.
	drop := func() {
		db.Close()
		dropDB(context.WithoutCancel(ctx), s.ch, replayDB)
	}
	defer func() {
		if compare == nil {
			drop()
		}
	}()
	cfg := s.cfg
	cfg.Consumer = "bench_replay"
	kv, err := progress.Open(ctx, s.n.js)
	if err != nil {
		return nil, err
	}
	w, err := progress.Watch(ctx, kv, cfg.Consumer)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	ing, err := startIngester(s.n.url, s.ch.addr, replayDB, filepath.Join(s.tmp, "ingester-replay.log"), cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ing.stop() }()
	s.lg.f("S5: replaying %d messages into %s", last, replayDB)
	sm := sampleWatermark(w, 0, ing.pid, nil)
	start := time.Now()
	err = w.Wait(ctx, last, 3*time.Hour)
	rp := &ScaleReplay{Messages: last, Progress: sm.stop()}
	s.res.Scale.Replay = rp
	if err != nil {
		// The rate of what was committed, for the record; S5 is judged
		// only on a finished replay.
		if n := len(rp.Progress); n > 0 {
			p := rp.Progress[n-1]
			rp.Committed = p.Events
			rp.Rate = rate(int(p.Events), time.Duration(p.Seconds*float64(time.Second)))
		}
		return nil, err
	}
	rp.Committed, rp.Finished = last, true
	rp.Rate = rate(int(last), time.Since(start))
	if err := ing.stop(); err != nil {
		return nil, err
	}
	s.lg.f("S5: replayed at %.0f messages/s", rp.Rate.PerSecond)
	return func() error {
		defer drop()
		return s.compareReplay(ctx, rp)
	}, nil
}

// compareReplay runs every state query over the bench's database and the
// replay's and records their rows and sums in rp.
func (s *session) compareReplay(ctx context.Context, rp *ScaleReplay) error {
	s.lg.f("S5: comparing the tables")
	rp.Identical = true
	for _, q := range testenv.StateQueries() {
		// One database after the other: two of these side by side (the
		// hourly sums group 60M rows by five keys) took 23.7 GB of
		// ClickHouse's memory at ten times, and the kernel killed it.
		start := time.Now()
		sum := TableSum{Query: q}
		var err error
		if sum.Rows, sum.Sum, err = s.stateSum(ctx, benchDB, q); err == nil {
			sum.ReplayRows, sum.ReplaySum, err = s.stateSum(ctx, replayDB, q)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		sum.Seconds = time.Since(start).Seconds()
		rp.Tables = append(rp.Tables, sum)
		if sum.Rows != sum.ReplayRows || sum.Sum != sum.ReplaySum {
			rp.Identical = false
			s.lg.f("S5: differs: %s: %d rows (sum %x) vs %d (sum %x)", firstLine(q), sum.Rows, sum.Sum, sum.ReplayRows, sum.ReplaySum)
		}
		s.lg.f("S5: %s: %d rows, %.0fs for both", firstLine(q), sum.Rows, sum.Seconds)
	}
	s.lg.f("S5: %d state queries, identical: %v", len(rp.Tables), rp.Identical)
	return nil
}

// stateSum is a state query's row count and the sum of its rows' hashes:
// equal sums mean equal rows whatever their order (the query's ORDER BY
// is dropped: a sort of 50M rows buys nothing here). 18.16's cityHash64
// takes no UUID, so those columns are hashed as text.
func (s *session) stateSum(ctx context.Context, db, q string) (rows, sum uint64, err error) {
	if i := strings.LastIndex(q, "ORDER BY"); i > 0 {
		q = q[:i]
	}
	st, err := s.ch.open(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	conn := st.Conn()
	probe, err := conn.Query(rawCtx(ctx), "SELECT * FROM ("+q+") LIMIT 0")
	if err != nil {
		return 0, 0, err
	}
	var cols []string
	for _, ct := range probe.ColumnTypes() {
		c := "`" + strings.ReplaceAll(ct.Name(), "`", "\\`") + "`"
		if strings.Contains(ct.DatabaseTypeName(), "UUID") {
			c = "toString(" + c + ")"
		}
		cols = append(cols, c)
	}
	probe.Close()
	err = conn.QueryRow(rawCtx(ctx), "SELECT count(), sum(cityHash64("+strings.Join(cols, ", ")+")) FROM ("+q+")").Scan(&rows, &sum)
	return rows, sum, err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// ScaleDisk is S7: ClickHouse's bytes on disk per table, and the events
// and persons tables against hand-tuned tables of the same columns.
type ScaleDisk struct {
	Tables        []TableDisk `json:"tables"`
	Events        uint64      `json:"events"`
	Persons       uint64      `json:"persons"`
	EventBytes    float64     `json:"bytes_per_event"`  // every table kept per event
	PersonBytes   float64     `json:"bytes_per_person"` // every table kept per person
	EventsTable   float64     `json:"events_table_bytes_per_event"`
	EventsTuned   float64     `json:"tuned_events_bytes_per_event"`
	PersonsTable  float64     `json:"persons_table_bytes_per_person"`
	PersonsTuned  float64     `json:"tuned_persons_bytes_per_person"`
	TunedOrdering string      `json:"tuned_events_ordering"`
}

// TableDisk is one table's active parts.
type TableDisk struct {
	Table        string `json:"table"`
	Rows         uint64 `json:"rows"`
	Bytes        uint64 `json:"bytes_on_disk"`
	Uncompressed uint64 `json:"uncompressed_bytes"`
	Parts        uint64 `json:"parts"`
}

// The tables kept per event (the rest are per person or bookkeeping).
var perEventTables = map[string]bool{"events": true, "events_by_distinct_id": true, "events_hourly": true, "person_last_seen": true}

// tunedEvents is the hand-tuned events table: the same columns, ordered
// by person and time so that one person's consecutive events, whose
// properties repeat, compress together; a plain MergeTree, merged to one
// part per partition.
const tunedEvents = `CREATE TABLE %s.events_tuned (project_id UInt64, uuid UUID, event String, distinct_id String, person_id UInt64,
  person_uuid UUID, timestamp DateTime('UTC'), timestamp_ms UInt16, properties String, seq UInt64)
ENGINE = MergeTree PARTITION BY toYYYYMM(timestamp) ORDER BY (project_id, distinct_id, timestamp)`

// tunedPersons is the hand-tuned persons table: the newest version of
// each live person once, a plain MergeTree merged to one part.
const tunedPersons = `CREATE TABLE %s.persons_tuned (project_id UInt64, id UInt64, uuid UUID, properties String, property_keys Array(String),
  property_values Array(String), distinct_ids Array(String), created_at DateTime('UTC'), is_identified UInt8, is_deleted UInt8,
  version UInt64, property_times String) ENGINE = MergeTree ORDER BY (project_id, id)`

func (s *session) scaleDiskUse(ctx context.Context) error {
	conn := s.store.Conn()
	s.settle(ctx)
	d := &ScaleDisk{TunedOrdering: "(project_id, distinct_id, timestamp)"}
	s.res.Scale.Disk = d
	var err error
	if d.Tables, err = tableDisk(ctx, s, benchDB); err != nil {
		return err
	}
	d.Events = s.count(ctx, "SELECT count() FROM events")
	d.Persons = s.count(ctx, "SELECT count() FROM persons FINAL WHERE is_deleted = 0")
	var evBytes, pBytes, evTable, pTable uint64
	for _, t := range d.Tables {
		switch {
		case perEventTables[t.Table]:
			evBytes += t.Bytes
		case strings.HasPrefix(t.Table, "person") || strings.HasPrefix(t.Table, "email"):
			pBytes += t.Bytes
		}
		if t.Table == "events" {
			evTable = t.Bytes
		}
		if t.Table == "persons" {
			pTable = t.Bytes
		}
	}
	per := func(b, n uint64) float64 { return float64(b) / float64(max(n, 1)) }
	d.EventBytes, d.PersonBytes = per(evBytes, d.Events), per(pBytes, d.Persons)
	d.EventsTable, d.PersonsTable = per(evTable, d.Events), per(pTable, d.Persons)
	for _, q := range []string{
		fmt.Sprintf(tunedEvents, benchDB),
		"INSERT INTO events_tuned (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq) SELECT project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq FROM events",
		"OPTIMIZE TABLE events_tuned FINAL",
		fmt.Sprintf(tunedPersons, benchDB),
		"INSERT INTO persons_tuned (project_id, id, uuid, properties, property_keys, property_values, distinct_ids, created_at, is_identified, is_deleted, version, property_times) " +
			"SELECT project_id, id, uuid, properties, property_keys, property_values, distinct_ids, created_at, is_identified, is_deleted, version, property_times FROM persons FINAL WHERE is_deleted = 0",
		"OPTIMIZE TABLE persons_tuned FINAL",
	} {
		if err := conn.Exec(rawCtx(ctx), q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	defer func() {
		for _, t := range []string{"events_tuned", "persons_tuned"} {
			_ = conn.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+t)
		}
	}()
	tuned, err := tableDisk(ctx, s, benchDB)
	if err != nil {
		return err
	}
	for _, t := range tuned {
		switch t.Table {
		case "events_tuned":
			d.EventsTuned = per(t.Bytes, t.Rows)
		case "persons_tuned":
			d.PersonsTuned = per(t.Bytes, t.Rows)
		}
	}
	s.lg.f("S7: %.1f B/event in every event table (events %.1f, tuned %.1f); %.1f B/person (persons %.1f, tuned %.1f)",
		d.EventBytes, d.EventsTable, d.EventsTuned, d.PersonBytes, d.PersonsTable, d.PersonsTuned)
	return nil
}

func tableDisk(ctx context.Context, s *session, db string) ([]TableDisk, error) {
	rows, err := s.store.Conn().Query(rawCtx(ctx), `SELECT table, sum(rows), sum(bytes_on_disk), sum(data_uncompressed_bytes), count()
		FROM system.parts WHERE active AND database = ? GROUP BY table ORDER BY table`, db)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TableDisk
	for rows.Next() {
		var t TableDisk
		if err := rows.Scan(&t.Table, &t.Rows, &t.Bytes, &t.Uncompressed, &t.Parts); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// scalePurges is S6: the purge at each size, the persons of each size
// including the smaller's, so the deleter's queue (every pending
// request) is the raw side's set.
func (s *session) scalePurges(ctx context.Context) error {
	sizes := s.sp.purges
	if s.o.only != "" {
		// S6's row is its largest size; the smaller ones draw the curve.
		sizes = sizes[len(sizes)-1:]
	}
	if s.ing == nil {
		return fmt.Errorf("no ingester to queue the deletions")
	}
	ids, err := s.samplePersons(ctx, sizes[len(sizes)-1], ^uint64(0))
	if err != nil {
		return err
	}
	queued := 0
	for _, n := range sizes {
		n = min(n, len(ids))
		s.lg.f("S6: deleting %d persons with their events", n)
		if err := s.queueDeletions(ctx, ids[queued:n]); err != nil {
			return err
		}
		queued = n
		pg, err := s.measurePurge(ctx, ids[:n])
		if err != nil {
			return err
		}
		s.res.Scale.Purges = append(s.res.Scale.Purges, pg)
		s.lg.f("S6 %d persons (%d of %d events): raw ALTER DELETE %.2fs, deleter %.2fs (%.2fx)", n, pg.EventsToDelete, pg.EventsTotal,
			pg.RawSeconds, pg.RunnerSeconds, ratio(pg.RunnerSeconds, pg.RawSeconds))
	}
	return nil
}
