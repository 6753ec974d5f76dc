package deletion

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

func TestDefaultScheduleIsSundayFiveUTC(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	for _, tc := range []struct {
		from time.Time
		want time.Time
	}{
		{time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC)},   // Wednesday
		{time.Date(2026, 3, 8, 4, 59, 0, 0, time.UTC), time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC)},   // Sunday, just before
		{time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), time.Date(2026, 3, 15, 5, 0, 0, 0, time.UTC)},   // at the run: the next week
		{time.Date(2026, 3, 8, 5, 30, 0, 0, paris), time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC)},      // 04:30 UTC, whatever the local zone
		{time.Date(2026, 10, 25, 6, 30, 0, 0, paris), time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)},   // DST change day in Paris: 05:30 UTC
		{time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2027, 1, 3, 5, 0, 0, 0, time.UTC)}, // across the year
	} {
		next, ok, err := NextRun(DefaultConfig().Schedule, tc.from)
		if err != nil || !ok {
			t.Fatalf("NextRun: %v %v", ok, err)
		}
		if !next.Equal(tc.want) || next.Location() != time.UTC || next.Weekday() != time.Sunday {
			t.Errorf("from %s: next %s, want %s (a Sunday, UTC)", tc.from, next, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string // empty: valid
	}{
		{"default", func(*Config) {}, ""},
		{"descriptor", func(c *Config) { c.Schedule = "@weekly" }, ""},
		{"every", func(c *Config) { c.Schedule = "@every 6h" }, ""},
		{"named day", func(c *Config) { c.Schedule = "30 2 * * SUN" }, ""},
		{"empty disables", func(c *Config) { c.Schedule = "" }, ""},
		{"blank disables", func(c *Config) { c.Schedule = "  " }, ""},
		{"garbage", func(c *Config) { c.Schedule = "sometimes" }, "schedule"},
		{"minute out of range", func(c *Config) { c.Schedule = "61 5 * * 0" }, "schedule"},
		{"six fields", func(c *Config) { c.Schedule = "0 0 5 * * 0" }, "schedule"},
		{"time zone", func(c *Config) { c.Schedule = "CRON_TZ=Europe/Paris 0 5 * * 0" }, "UTC"},
		{"batch size", func(c *Config) { c.BatchSize = 0 }, "batch-size"},
		{"timeout", func(c *Config) { c.MutationTimeout = 0 }, "mutation-timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
	if _, ok, err := NextRun("", time.Now()); ok || err != nil {
		t.Errorf("empty schedule: ok=%v err=%v, want disabled", ok, err)
	}
}

func TestPlan(t *testing.T) {
	reqs := []Request{
		{ProjectID: 2, PersonID: 1, RequestSeq: 9}, {ProjectID: 1, PersonID: 3, RequestSeq: 9},
		{ProjectID: 1, PersonID: 1, RequestSeq: 9}, {ProjectID: 1, PersonID: 2, RequestSeq: 9},
		{ProjectID: 1, PersonID: 4, RequestSeq: 9},
	}
	one := listBytes(reqs[0]) // every request here has the same size
	for _, tc := range []struct {
		name       string
		maxPersons int
		maxBytes   int
		want       string
	}{
		{"by project", 10, 1 << 20, "1:1,2,3,4 2:1"},
		{"by persons", 3, 1 << 20, "1:1,2,3 1:4 2:1"},
		{"by bytes", 10, 2 * one, "1:1,2 1:3,4 2:1"},
		{"one each", 1, 1 << 20, "1:1 1:2 1:3 1:4 2:1"},
		{"bytes below one request", 10, 1, "1:1 1:2 1:3 1:4 2:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			for _, b := range plan(reqs, tc.maxPersons, tc.maxBytes) {
				var ids []string
				for _, q := range b {
					if q.ProjectID != b[0].ProjectID {
						t.Fatalf("batch mixes projects: %v", b)
					}
					ids = append(ids, strconv.FormatUint(q.PersonID, 10))
				}
				parts = append(parts, strconv.FormatUint(b[0].ProjectID, 10)+":"+strings.Join(ids, ","))
			}
			if got := strings.Join(parts, " "); got != tc.want {
				t.Errorf("batches %q, want %q", got, tc.want)
			}
		})
	}
	// The largest ids still fit the statement budget many times over.
	big := Request{PersonID: ^uint64(0), RequestSeq: ^uint64(0)}
	if n := maxListBytes / listBytes(big); n < 1000 {
		t.Errorf("only %d persons of 20-digit ids fit a statement", n)
	}
}

// TestDefaultPlanIsOneMutation: with the default settings a queue of
// 100,000 persons of one project (person ids and sequences of a stream
// ten billion messages long) is one batch, so one mutation per table:
// each mutation rewrites every part it touches.
func TestDefaultPlanIsOneMutation(t *testing.T) {
	const n = 100_000
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{ProjectID: 7, PersonID: 9_000_000_000 + uint64(i)*7919, RequestSeq: 9_999_000_000 + uint64(i)}
	}
	cfg := DefaultConfig()
	b := plan(reqs, cfg.BatchSize, maxListBytes)
	if len(b) != 1 || len(b[0]) != n {
		sizes := make([]int, len(b))
		for i := range b {
			sizes[i] = len(b[i])
		}
		t.Fatalf("%d persons planned as batches of %v, want one", n, sizes)
	}
	if maxListBytes >= statement.MaxQuerySize/2 {
		t.Errorf("lists of up to %d bytes leave little room for the statement under max_query_size %d", maxListBytes, statement.MaxQuerySize)
	}
}

// Schedule runs deletions on its schedule and returns on cancellation; an
// empty schedule only refreshes the pending gauge.
func TestScheduleLoop(t *testing.T) {
	f := newFixture(t, nil, func(c *Config) { c.Schedule = "@every 1s"; c.PendingRefresh = 50 * time.Millisecond })
	insertEvents(t, f.conn, ev{1, 70, 1})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 70, RequestSeq: 5})
	commit(t, f.conn, 5)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.runner.Schedule(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for f.metric(t, "deleter_verified_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled run verified the request")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next run is ahead of the clock while the schedule keeps up.
	if next := f.metric(t, "deleter_next_run_timestamp_seconds"); next < float64(time.Now().Unix()) {
		t.Errorf("deleter_next_run_timestamp_seconds = %v, behind the clock %v", next, time.Now().Unix())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	off := newFixture(t, f.conn, func(c *Config) { c.Schedule = ""; c.PendingRefresh = 20 * time.Millisecond })
	request(t, off.runner, Request{ProjectID: 1, PersonID: 71, RequestSeq: 6})
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- off.runner.Schedule(ctx) }()
	deadline = time.Now().Add(10 * time.Second)
	for off.metric(t, "deleter_pending_requests") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("pending gauge not refreshed with the schedule disabled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if off.metric(t, "deleter_mutations_total") != 0 {
		t.Error("a disabled schedule ran a deletion")
	}
	if off.metric(t, "deleter_next_run_timestamp_seconds") != 0 {
		t.Error("a disabled schedule announced a next run")
	}
}
