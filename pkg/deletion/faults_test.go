package deletion

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/testenv"
)

// afterMutation runs hook right after the deleter's ALTER TABLE events
// DELETE has been issued for real, to inject what can happen while a
// mutation runs.
type afterMutation struct {
	driver.Conn
	hook func()
}

func (c *afterMutation) Exec(ctx context.Context, query string, args ...any) error {
	err := c.Conn.Exec(ctx, query, args...)
	if err == nil && strings.HasPrefix(query, "ALTER TABLE events DELETE") {
		c.hook()
	}
	return err
}

// Shutdown while a mutation runs: the run stops without marking anything,
// the requests stay running, and the next run completes them, keeping the
// event counts taken before the mutation.
func TestShutdownLeavesRequestsForNextRun(t *testing.T) {
	conn := testenv.ClickHouse(t).Conn()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFixture(t, &afterMutation{Conn: conn, hook: cancel}, func(c *Config) { c.BatchSize = 1 })
	insertEvents(t, conn, ev{1, 40, 1}, ev{1, 40, 2}, ev{1, 41, 3})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 40, RequestSeq: 10})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 41, RequestSeq: 10})
	commit(t, conn, 10)

	sum, err := f.runner.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Summary{Taken: 2, Left: 2, Mutations: 1, LastSeen: 1, Interrupted: true}); sum != want {
		t.Fatalf("interrupted run %+v, want %+v", sum, want)
	}
	reqs := requests(t, conn)
	if q := reqs[key{1, 40}]; q.Status != StatusRunning || q.EventsDeleted != 2 {
		t.Errorf("request 1/40 after shutdown: %+v, want running with 2 events counted", q)
	}
	if q := reqs[key{1, 41}]; q.Status != StatusRunning {
		t.Errorf("request 1/41 after shutdown: %+v, want running", q)
	}

	f.runner.conn = conn // no more shutdowns
	sum = f.runOnce(t)
	if sum.Verified != 2 || sum.Failed != 0 {
		t.Fatalf("next run %+v", sum)
	}
	reqs = requests(t, conn)
	if q := reqs[key{1, 40}]; q.Status != StatusVerified || q.EventsDeleted != 2 {
		t.Errorf("request 1/40: %+v, want verified with 2 events deleted", q)
	}
	if got := eventsOf(t, conn, 1, 40); len(got) != 0 {
		t.Errorf("events remain: %v", got)
	}
}

// An event written after the mutation was created is not deleted by it:
// verification finds it, the request fails for this run (pending again),
// and the next run deletes it.
func TestVerificationFindsLateEvents(t *testing.T) {
	conn := testenv.ClickHouse(t).Conn()
	f := newFixture(t, conn, nil)
	late := true
	f.runner.conn = &afterMutation{Conn: conn, hook: func() {
		if late {
			late = false
			insertEvents(t, conn, ev{1, 50, 7})
		}
	}}
	insertEvents(t, conn, ev{1, 50, 1}, ev{1, 51, 2})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 50, RequestSeq: 10})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 51, RequestSeq: 10})
	commit(t, conn, 10)

	sum := f.runOnce(t)
	// 1/50's late event is left: its hourly counts are rebuilt from it.
	if want := (Summary{Taken: 2, Verified: 1, Failed: 1, EventsDeleted: 1, Mutations: 1, Recounted: 1, LastSeen: 2}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	reqs := requests(t, conn)
	if q := reqs[key{1, 50}]; q.Status != StatusPending || q.StartedAt.Unix() <= 0 || q.EventsDeleted != 1 {
		t.Errorf("request 1/50: %+v, want pending again with its start time and count", q)
	}
	if q := reqs[key{1, 51}]; q.Status != StatusVerified {
		t.Errorf("request 1/51: %+v, want verified", q)
	}
	if f.metric(t, "deleter_failed_total") != 1 || f.metric(t, "deleter_run_errors_total") != 0 {
		t.Error("want failed_total 1 and no run error")
	}

	sum = f.runOnce(t)
	if want := (Summary{Taken: 1, Verified: 1, EventsDeleted: 1, Mutations: 1, LastSeen: 1}); sum != want {
		t.Fatalf("next run %+v, want %+v", sum, want)
	}
	if got := eventsOf(t, conn, 1, 50); len(got) != 0 {
		t.Errorf("events remain: %v", got)
	}
}

// A mutation that does not finish in time fails its requests for this run;
// the run stops and hands the requests it did not attempt back as pending.
func TestMutationTimeout(t *testing.T) {
	st := testenv.ClickHouse(t)
	conn := st.Conn()
	f := newFixture(t, conn, func(c *Config) { c.BatchSize = 1; c.MutationTimeout = 700 * time.Millisecond })
	insertEvents(t, conn, ev{1, 60, 1}, ev{1, 61, 2}, ev{1, 62, 3})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 60, RequestSeq: 10})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 61, RequestSeq: 10})
	commit(t, conn, 10)
	// A mutation that fails on every part holds the queue: mutations are
	// applied to a part in order.
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE events DELETE WHERE throwIf(seq > 0) = 1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Exec(ctx, "KILL MUTATION WHERE database = currentDatabase() AND table = 'events'")
	})

	sum := f.runOnce(t)
	if want := (Summary{Taken: 2, Failed: 1, Left: 1, Mutations: 1}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	for k, q := range requests(t, conn) {
		if q.Status != StatusPending {
			t.Errorf("request %v: %s, want pending", k, q.Status)
		}
	}
	if got := eventsOf(t, conn, 1, 61); len(got) != 1 {
		t.Errorf("events of 1/61: %v", got)
	}
	if f.metric(t, "deleter_run_errors_total") != 1 || f.metric(t, "deleter_failed_total") != 1 {
		t.Error("want one run error and one failed request")
	}
}
