package deletion

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type key struct{ project, person uint64 }

// ev is an event of a person at a stream sequence.
type ev struct{ project, person, seq uint64 }

// insertEvents writes events spread over three monthly partitions.
func insertEvents(t *testing.T, conn driver.Conn, evs ...ev) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		ts := time.Date(2026, time.Month(1+i%3), 1+i%27, 12, 0, 0, 0, time.UTC)
		if err := batch.Append(e.project, uuid.New(), "$pageview", fmt.Sprintf("d%d", e.person), e.person,
			uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(e.person))), ts, uint16(0), "{}", e.seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// eventsOf returns a person's events per sequence, counting physical rows.
func eventsOf(t *testing.T, conn driver.Conn, project, person uint64) map[uint64]int {
	t.Helper()
	return rowsOf(t, conn, "events", project, person)
}

// rowsOf returns a person's rows of table (events or its copy by distinct
// id) per sequence, counting physical rows.
func rowsOf(t *testing.T, conn driver.Conn, table string, project, person uint64) map[uint64]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT seq FROM "+table+" WHERE project_id = ? AND person_id = ?", project, person)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint64]int{}
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq); err != nil {
			t.Fatal(err)
		}
		out[seq]++
	}
	return out
}

// request writes a request row the way the ingester does (version =
// request_seq), or with the given status and version.
func request(t *testing.T, r *Runner, q Request) {
	t.Helper()
	if q.Status == "" {
		q.Status = StatusPending
	}
	if q.Version == 0 {
		q.Version = q.RequestSeq
	}
	if q.RequestedAt.IsZero() {
		q.RequestedAt = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	}
	zero := time.Unix(0, 0).UTC()
	if q.StartedAt.IsZero() {
		q.StartedAt = zero
	}
	if q.VerifiedAt.IsZero() {
		q.VerifiedAt = zero
	}
	q.PersonUUID = uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(q.PersonID)))
	if err := r.write(context.Background(), []Request{q}); err != nil {
		t.Fatal(err)
	}
}

// commit writes an ingester commit marker up to seq: requests at or below
// it come from committed batches.
func commit(t *testing.T, conn driver.Conn, seq uint64) {
	t.Helper()
	ctx := context.Background()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO ingest_batches (consumer, first_seq, last_seq, events, persons, distinct_ids, flushed_at)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append("ingester", uint64(1), seq, uint32(0), uint32(0), uint32(0), time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func requests(t *testing.T, conn driver.Conn) map[key]Request {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT "+requestColumns+" FROM person_deletion_requests FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[key]Request{}
	for rows.Next() {
		var q Request
		if err := rows.Scan(&q.ProjectID, &q.PersonID, &q.PersonUUID, &q.RequestSeq, &q.Status, &q.RequestedAt,
			&q.StartedAt, &q.VerifiedAt, &q.EventsDeleted, &q.Version); err != nil {
			t.Fatal(err)
		}
		out[key{q.ProjectID, q.PersonID}] = q
	}
	return out
}

type fixture struct {
	conn   driver.Conn
	runner *Runner
	reg    *prometheus.Registry
}

func newFixture(t *testing.T, conn driver.Conn, edit func(*Config)) *fixture {
	t.Helper()
	if conn == nil {
		conn = testenv.ClickHouse(t).Conn()
	}
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	reg := prometheus.NewRegistry()
	r, err := New(conn, cfg, quietLogger(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{conn: conn, runner: r, reg: reg}
}

func (f *fixture) runOnce(t *testing.T) Summary {
	t.Helper()
	sum, err := f.runner.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// metric reads one unlabelled counter or gauge.
func (f *fixture) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestRunDeletesRequestedEventsOnly(t *testing.T) {
	f := newFixture(t, nil, nil)
	// Project 1: persons 10, 11 (deleted at 100 and 200), 12 (kept), 13
	// (deleted, no events). Person 10 also has an event at 150, after its
	// deletion (artificial: a tombstoned id gets no events): it is above
	// 10's own sequence though below the batch's largest, and must stay.
	// Project 2 has a person 10 too, not deleted.
	var evs []ev
	for seq := uint64(1); seq <= 90; seq += 10 {
		evs = append(evs, ev{1, 10, seq}, ev{1, 11, seq + 1}, ev{1, 12, seq + 2}, ev{2, 10, seq + 3})
	}
	evs = append(evs, ev{1, 10, 150}, ev{1, 11, 150}, ev{1, 11, 5}, ev{1, 11, 5})
	insertEvents(t, f.conn, evs...)
	request(t, f.runner, Request{ProjectID: 1, PersonID: 10, RequestSeq: 100})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 11, RequestSeq: 200})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 13, RequestSeq: 300})
	commit(t, f.conn, 300)

	before := time.Now().UTC().Add(-time.Second)
	sum := f.runOnce(t)
	// Person 10's event at 150 is left: its hourly counts are rebuilt.
	// The last seen times of d10 and d11 are written from the events kept.
	want := Summary{Taken: 3, Verified: 3, EventsDeleted: 9 + 12, Mutations: 1, Recounted: 1, LastSeen: 2}
	if sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if got := eventsOf(t, f.conn, 1, 10); len(got) != 1 || got[150] != 1 {
		t.Errorf("person 1/10 has events %v, want only seq 150 (after its deletion)", got)
	}
	if got := eventsOf(t, f.conn, 1, 11); len(got) != 0 {
		t.Errorf("person 1/11 has events %v, want none", got)
	}
	if got := eventsOf(t, f.conn, 1, 12); len(got) != 9 {
		t.Errorf("person 1/12 has %d events, want its 9", len(got))
	}
	if got := eventsOf(t, f.conn, 2, 10); len(got) != 9 {
		t.Errorf("person 2/10 has %d events, want its 9", len(got))
	}
	// The copy by distinct id (a materialized view of events) loses the
	// same rows and keeps the same others.
	for _, k := range []key{{1, 10}, {1, 11}, {1, 12}, {2, 10}} {
		if got, want := rowsOf(t, f.conn, "events_by_distinct_id", k.project, k.person), eventsOf(t, f.conn, k.project, k.person); !maps.Equal(got, want) {
			t.Errorf("person %d/%d: %s rows %v, events %v", k.project, k.person, "events_by_distinct_id", got, want)
		}
	}

	// The mutation ran, bounded by project, persons and sequences: person
	// 11, all of whose rows the first count found at or below its own
	// sequence, by the batch's largest; person 10, with a row above its
	// own, by its own (eventstore.Purge).
	var cmd string
	var done uint8
	if err := f.conn.QueryRow(context.Background(), "SELECT command, is_done FROM system.mutations WHERE database = currentDatabase() AND table = 'events'").Scan(&cmd, &done); err != nil {
		t.Fatal(err)
	}
	if done != 1 || !strings.Contains(cmd, "(project_id = 1) AND (seq <= 200)") || !strings.Contains(cmd, "(person_id IN (SELECT arrayJoin(CAST([11], 'Array(UInt64)'))))") ||
		!strings.Contains(cmd, "(person_id IN (SELECT arrayJoin(CAST([10], 'Array(UInt64)'))))") || !strings.Contains(cmd, "[10]") || !strings.Contains(cmd, "[100]") {
		t.Errorf("mutation %q done=%d", cmd, done)
	}

	reqs := requests(t, f.conn)
	for person, n := range map[uint64]uint64{10: 9, 11: 12, 13: 0} {
		q := reqs[key{1, person}]
		if q.Status != StatusVerified || q.EventsDeleted != n || q.StartedAt.Before(before) || q.VerifiedAt.Before(q.StartedAt) {
			t.Errorf("request 1/%d: %+v, want verified with %d events deleted and start/verify times", person, q, n)
		}
	}
	for name, v := range map[string]float64{
		"deleter_verified_total": 3, "deleter_failed_total": 0, "deleter_events_deleted_total": 21,
		"deleter_mutations_total": 1, "deleter_pending_requests": 0, "deleter_run_errors_total": 0,
	} {
		if got := f.metric(t, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if f.metric(t, "deleter_last_run_timestamp_seconds") < float64(before.Unix()) {
		t.Error("last run timestamp not set")
	}
}

func TestResumeAndIdempotence(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 20, 1}, ev{1, 20, 2}, ev{1, 21, 3})
	// 20: left running by a run that crashed before its mutation.
	// 21: left running after its mutation finished: the events it counted
	// are gone, and the count recorded in the running row is kept.
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10, Status: StatusRunning,
		StartedAt: time.Now().Add(-time.Hour), Version: uint64(time.Now().UnixNano())})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 22, RequestSeq: 12, Status: StatusRunning,
		StartedAt: time.Now().Add(-time.Hour), EventsDeleted: 4, Version: uint64(time.Now().UnixNano())})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 21, RequestSeq: 11})
	commit(t, f.conn, 12)

	sum := f.runOnce(t)
	if sum.Taken != 3 || sum.Verified != 3 || sum.EventsDeleted != 3 || sum.Mutations != 1 {
		t.Fatalf("first run %+v", sum)
	}
	first := requests(t, f.conn)
	if q := first[key{1, 22}]; q.Status != StatusVerified || q.EventsDeleted != 4 {
		t.Errorf("request 1/22 %+v: want verified keeping its 4 counted events", q)
	}

	// Nothing left: a second run takes nothing and writes nothing.
	sum = f.runOnce(t)
	if sum != (Summary{}) {
		t.Fatalf("second run %+v, want nothing done", sum)
	}
	if second := requests(t, f.conn); fmt.Sprint(second) != fmt.Sprint(first) {
		t.Errorf("second run changed requests:\n%v\n%v", first, second)
	}
	if got := f.metric(t, "deleter_mutations_total"); got != 1 {
		t.Errorf("mutations_total %v, want 1", got)
	}
}

func TestBatches(t *testing.T) {
	f := newFixture(t, nil, func(c *Config) { c.BatchSize = 2 })
	for p := uint64(1); p <= 5; p++ {
		insertEvents(t, f.conn, ev{1, p, p}, ev{1, p, p + 10}, ev{1, 100 + p, p})
		request(t, f.runner, Request{ProjectID: 1, PersonID: p, RequestSeq: 50 + p})
	}
	insertEvents(t, f.conn, ev{2, 1, 1})
	request(t, f.runner, Request{ProjectID: 2, PersonID: 1, RequestSeq: 60})
	commit(t, f.conn, 100)

	sum := f.runOnce(t)
	// Project 1: 2 + 2 + 1 persons; project 2: 1. One distinct id each.
	want := Summary{Taken: 6, Verified: 6, EventsDeleted: 11, Mutations: 4, LastSeen: 6}
	if sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	for p := uint64(1); p <= 5; p++ {
		if got := eventsOf(t, f.conn, 1, p); len(got) != 0 {
			t.Errorf("person %d keeps events %v", p, got)
		}
		if got := eventsOf(t, f.conn, 1, 100+p); len(got) != 1 {
			t.Errorf("person %d lost events: %v", 100+p, got)
		}
	}
	for k, q := range requests(t, f.conn) {
		if q.Status != StatusVerified {
			t.Errorf("request %v: %s", k, q.Status)
		}
	}
}

func TestWaitsForIngesterCommit(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 30, 5})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 30, RequestSeq: 40})
	commit(t, f.conn, 39)
	if sum := f.runOnce(t); sum != (Summary{Waiting: 1}) {
		t.Fatalf("before the commit: %+v", sum)
	}
	if got := eventsOf(t, f.conn, 1, 30); len(got) != 1 {
		t.Fatalf("events deleted before the ingester committed: %v", got)
	}
	if got := f.metric(t, "deleter_pending_requests"); got != 1 {
		t.Errorf("pending_requests %v, want 1", got)
	}
	commit(t, f.conn, 40)
	if sum := f.runOnce(t); sum.Verified != 1 || sum.EventsDeleted != 1 {
		t.Fatalf("after the commit: %+v", sum)
	}
}

// TestCopyRowsAloneAreDeleted: rows left in the copy by distinct id when
// the events are already gone (a run that stopped between the two
// mutations, or an events-only ALTER by an operator) still make the
// request's mutation run, and the request is verified only without them.
func TestCopyRowsAloneAreDeleted(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 20, 1}, ev{1, 20, 2}, ev{1, 21, 3})
	ctx := context.Background()
	if err := f.conn.Exec(ctx, "ALTER TABLE events DELETE WHERE person_id = 20"); err != nil {
		t.Fatal(err)
	}
	if err := f.runner.waitMutations(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, f.conn, "events_by_distinct_id", 1, 20); len(got) != 2 {
		t.Fatalf("copy rows of 1/20 before the run: %v, want 2", got)
	}
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10})
	commit(t, f.conn, 10)
	sum := f.runOnce(t)
	if want := (Summary{Taken: 1, Verified: 1, Mutations: 1, LastSeen: 1}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if got := rowsOf(t, f.conn, "events_by_distinct_id", 1, 20); len(got) != 0 {
		t.Errorf("copy rows of 1/20 after the run: %v, want none", got)
	}
	if got := rowsOf(t, f.conn, "events_by_distinct_id", 1, 21); len(got) != 1 {
		t.Errorf("copy rows of 1/21: %v, want its 1", got)
	}
}

// TestLargeQueueIsOneMutation: with the default settings a queue of
// 100,000 persons (ids of a ten-billion-message stream, so every statement
// that lists them is megabytes long, past the server's default
// max_query_size) is one batch: one mutation, every request verified,
// and the events of persons not queued kept.
func TestLargeQueueIsOneMutation(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 requests")
	}
	f := newFixture(t, nil, nil)
	const n = 100_000
	const base = 9_000_000_000
	var evs []ev
	reqs := make([]Request, n)
	zero := time.Unix(0, 0).UTC()
	for i := range reqs {
		p := uint64(base + 2*i)
		evs = append(evs, ev{1, p, uint64(base + i)})
		reqs[i] = Request{ProjectID: 1, PersonID: p, PersonUUID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(p))),
			RequestSeq: 2 * base, Status: StatusPending, RequestedAt: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC),
			StartedAt: zero, VerifiedAt: zero, Version: 2 * base}
	}
	kept := []uint64{base + 1, base + 2*n + 1}
	for _, p := range kept {
		evs = append(evs, ev{1, p, base})
	}
	insertEvents(t, f.conn, evs...)
	if err := f.runner.write(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	commit(t, f.conn, 2*base)

	sum := f.runOnce(t)
	if sum.Taken != n || sum.Verified != n || sum.Failed != 0 || sum.Mutations != 1 || sum.EventsDeleted != n {
		t.Fatalf("summary %+v, want %d taken and verified, %d events deleted, one mutation", sum, n, n)
	}
	var left uint64
	if err := f.conn.QueryRow(context.Background(), "SELECT count() FROM events WHERE project_id = 1").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != uint64(len(kept)) {
		t.Errorf("%d events left, want the %d of the persons not queued", left, len(kept))
	}
	for _, p := range kept {
		if got := eventsOf(t, f.conn, 1, p); len(got) != 1 {
			t.Errorf("person %d lost events: %v", p, got)
		}
	}
}
