package insight

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// textCounter counts the statements holding text (the reads of a
// path: bounds, cuts, the hourly counts).
type textCounter struct {
	Querier
	text string
	n    atomic.Int64
}

func (c *textCounter) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	if strings.Contains(q, c.text) {
		c.n.Add(1)
	}
	return c.Querier.Query(ctx, q, args...)
}

// hourlyHistory ingests workloadWithResets (merges, refused merges,
// splits, deletions, resets of distinct ids) on 2026-04-01, and before
// it a week of $pageview and "e" events of the same ids at scattered
// minutes, across Europe/Berlin's DST change (2026-03-29 01:00 UTC).
func hourlyHistory(t *testing.T) (*chstore.Store, *testenv.NATS, uint64) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 25, 0, 0, 0, 0, time.UTC)
	for i := range 1500 {
		name := "$pageview"
		if i%4 == 0 {
			name = "e"
		}
		ts := start.Add(time.Duration(i*7) * time.Minute) // ~7 days
		publishAt(t, n, uint64(1+i%3), fmt.Sprintf("u%d", (i*37)%150), name, "{}", ts)
	}
	last := testenv.PublishWorkload(t, n.JS, 0, workloadWithResets(41, 3000, 150))
	ingestAll(t, n, store, last)
	// Then events of the live ids (merged ones among them) on 2026-04-05
	// to 04-08, after every change of owner: there the stored person is
	// the current one (storedIsCurrent).
	rows, err := store.Conn().Query(context.Background(),
		"SELECT project_id, distinct_id FROM person_distinct_ids FINAL WHERE is_deleted = 0 ORDER BY project_id, distinct_id")
	if err != nil {
		t.Fatal(err)
	}
	var live []struct {
		project uint64
		did     string
	}
	for rows.Next() {
		var p uint64
		var did string
		if err := rows.Scan(&p, &did); err != nil {
			t.Fatal(err)
		}
		live = append(live, struct {
			project uint64
			did     string
		}{p, did})
	}
	rows.Close()
	if len(live) < 100 {
		t.Fatalf("only %d live ids", len(live))
	}
	late := time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC)
	for i := range 600 {
		l := live[(i*53)%len(live)]
		last = publishAt(t, n, l.project, l.did, "$pageview", "{}", late.Add(time.Duration(i*9)*time.Minute))
	}
	ingestAll(t, n, store, last)
	return store, n, last
}

// TestHourlyCountsAnswerAsEvents: trends and retention read from the
// hourly counts give the answers of the raw scan over events, for every
// project of a history with merged, split and deleted persons, in UTC and
// in a zone with a DST change inside the range, before and after the
// deleter ran; a half-hour zone, explicit seconds and a property filter
// read events.
func TestHourlyCountsAnswerAsEvents(t *testing.T) {
	store, _, _ := hourlyHistory(t)
	ctx := context.Background()
	counter := &textCounter{Querier: store.Conn(), text: "FROM events_hourly"}
	joinless := &textCounter{Querier: counter, text: "FROM events_hourly PREWHERE"}
	fast := New(joinless, nil)
	raw := New(store.Conn(), nil)
	raw.noHourly = true
	now := time.Date(2026, 4, 3, 0, 0, 0, 0, time.UTC)
	pv := `[{"id":"$pageview","type":"events","order":0}]`
	trendsOf := func(extra url.Values) url.Values {
		q := url.Values{"events": {pv}, "entity_id": {"$pageview"}, "entity_type": {"events"}}
		for k, v := range extra {
			q[k] = v
		}
		return q
	}
	type route struct {
		name   string
		zone   string
		q      url.Values
		hourly bool // the hourly counts answer
		ret    bool
		stored bool // every project's answer groups the stored persons (no join)
	}
	routes := []route{
		{"trends day UTC", "UTC", trendsOf(url.Values{"date_from": {"2026-03-26"}, "date_to": {"2026-04-01"}}), true, false, false},
		{"trends day Berlin (DST)", "Europe/Berlin", trendsOf(url.Values{"date_from": {"2026-03-28"}, "date_to": {"2026-03-30"}}), true, false, false},
		{"trends hour Berlin (DST)", "Europe/Berlin", trendsOf(url.Values{"date_from": {"2026-03-29T00:00"}, "date_to": {"2026-03-29T05:00"}, "interval": {"hour"}}), true, false, false},
		{"trends week New York", "America/New_York", trendsOf(url.Values{"date_from": {"2026-03-20"}, "date_to": {"2026-04-02"}, "interval": {"week"}}), true, false, false},
		{"trends month", "UTC", trendsOf(url.Values{"date_from": {"2026-03-01"}, "date_to": {"2026-04-02"}, "interval": {"month"}}), true, false, false},
		{"trends weekly_active", "Europe/Berlin", url.Values{"events": {`[{"id":"$pageview","type":"events","order":0,"math":"weekly_active"}]`},
			"entity_id": {"$pageview"}, "entity_type": {"events"}, "entity_math": {"weekly_active"}, "date_from": {"2026-03-31"}, "date_to": {"2026-03-30"}}, true, false, false},
		{"trends half-hour zone", "Asia/Kolkata", trendsOf(url.Values{"date_from": {"2026-03-26"}, "date_to": {"2026-04-01"}}), false, false, false},
		{"trends explicit", "UTC", trendsOf(url.Values{"date_from": {"2026-03-26T10:15:00"}, "date_to": {"2026-03-30T10:00:00"}, "explicit_date": {"true"}}), false, false, false},
		{"trends event filter", "UTC", trendsOf(url.Values{"date_from": {"2026-03-26"}, "date_to": {"2026-04-01"},
			"properties": {`[{"key":"$current_url","value":"x","operator":"is_not","type":"event"}]`}}), false, false, false},
	}
	routes = append(routes,
		route{"trends after every change", "UTC", trendsOf(url.Values{"date_from": {"2026-04-05"}, "date_to": {"2026-04-08"}}), true, false, true},
		route{"trends across changes", "UTC", trendsOf(url.Values{"date_from": {"2026-03-30"}, "date_to": {"2026-04-08"}}), true, false, false},
		route{"retention after every change", "UTC", url.Values{"date_to": {"2026-04-08"}, "period": {"Day"}, "total_intervals": {"3"},
			"selected_interval": {"0"}, "target_entity": {`{"id":"$pageview","type":"events"}`}}, true, true, true},
		route{"retention across changes", "UTC", url.Values{"date_to": {"2026-04-08"}, "period": {"Day"}, "total_intervals": {"9"},
			"selected_interval": {"1"}, "target_entity": {`{"id":"$pageview","type":"events"}`}}, true, true, false})
	for _, zone := range []string{"UTC", "Europe/Berlin", "Asia/Kolkata"} {
		for _, typ := range []string{"retention_recurring", "retention_first_time"} {
			for _, p := range []struct {
				period string
				total  int
			}{{"Day", 8}, {"Week", 3}, {"Hour", 30}} {
				for _, sel := range []int{0, 1, 3} {
					q := url.Values{"date_to": {"2026-04-01T02:00:00"}, "period": {p.period}, "total_intervals": {fmt.Sprint(p.total)},
						"selected_interval": {fmt.Sprint(min(sel, p.total-1))}, "retention_type": {typ},
						"target_entity": {`{"id":"e","type":"events"}`}, "returning_entity": {`{"id":"$pageview","type":"events"}`}}
					routes = append(routes, route{fmt.Sprintf("retention %s %s %s %d", zone, typ, p.period, sel), zone, q, zone != "Asia/Kolkata", true, false})
				}
			}
		}
	}
	compare := func(phase string) {
		nonEmpty := 0
		for _, r := range routes {
			loc, err := time.LoadLocation(r.zone)
			if err != nil {
				t.Fatal(err)
			}
			for project := uint64(1); project <= 3; project++ {
				for _, page := range []Page{{}, {Limit: 7, Offset: 3}} {
					answer := func(st *Store) []Actor {
						pq := r.q
						if r.ret {
							pq = RetentionQuery(r.q)
						}
						f, err := ParseFilter(pq, loc, now)
						if err != nil {
							t.Fatalf("%s: %v", r.name, err)
						}
						var got []Actor
						if r.ret {
							got, err = st.Retention(ctx, project, f, r.q, page, now)
						} else {
							got, err = st.Trends(ctx, project, f, r.q, page)
						}
						if err != nil {
							t.Fatalf("%s: %v", r.name, err)
						}
						return got
					}
					before, joins := counter.n.Load(), counter.n.Load()-joinless.n.Load()
					got, want := answer(fast), answer(raw)
					if used := counter.n.Load() > before; used != r.hourly {
						t.Fatalf("%s: hourly counts read %v, want %v", r.name, used, r.hourly)
					}
					if joined := counter.n.Load()-joinless.n.Load() > joins; r.hourly && joined == r.stored {
						t.Fatalf("%s, project %d: joined the overrides %v, want %v", r.name, project, joined, !r.stored)
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s: %s, project %d, page %v:\n hourly %v\n events %v", phase, r.name, project, page, got, want)
					}
					if len(want) > 0 {
						nonEmpty++
					}
				}
			}
		}
		if nonEmpty < len(routes) {
			t.Fatalf("%s: only %d of %d answers hold persons: the comparison proves little", phase, nonEmpty, 6*len(routes))
		}
	}
	compare("ingested")
	// The deleter takes the deleted persons' events out of events and of
	// the hourly counts (pkg/deletion): the two paths still agree.
	cfg := deletion.DefaultConfig()
	cfg.Consumer = "attribution" // ingestAll's
	runner, err := deletion.New(store.Conn(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := runner.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verified == 0 || sum.EventsDeleted == 0 || sum.Failed != 0 {
		t.Fatalf("deleter run %+v: want deleted events, verified requests", sum)
	}
	compare("after the deleter")
}

// hourlyText is the hourly counts of a database, summed per key, as text;
// from events, the same counts made from the events rows.
func hourlyText(t *testing.T, store *chstore.Store, fromEvents bool) string {
	t.Helper()
	sql := "SELECT project_id, event, hour, distinct_id, person_id, sum(events) AS n FROM events_hourly GROUP BY project_id, event, hour, distinct_id, person_id"
	if fromEvents {
		sql = "SELECT project_id, event, toStartOfHour(timestamp) AS hour, distinct_id, person_id, count() AS n FROM events " +
			"WHERE visitParamHas(properties, '$actor') = 0 GROUP BY project_id, event, hour, distinct_id, person_id"
	}
	rows, err := store.Conn().Query(context.Background(), "SELECT concat(toString(project_id), '/', event, '/', toString(hour), '/', distinct_id, '/', toString(person_id), '=', toString(n)) AS r FROM ("+sql+") ORDER BY r")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		b.WriteString(r + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHourlyCountsReplayAndBackfill: the hourly counts are a projection
// of the log. The ingester's (batches of 97) equal the counts of the
// events stored; a replay of the stream into empty tables in batches of
// 13 rebuilds them key for key; and migration 0014's backfill, run twice
// after the table is emptied (an interrupted migration run again),
// counts the stored events once.
func TestHourlyCountsReplayAndBackfill(t *testing.T) {
	store, n, last := hourlyHistory(t)
	want := hourlyText(t, store, false)
	if strings.Count(want, "\n") < 1000 {
		t.Fatalf("only %d hourly keys: the comparison proves little", strings.Count(want, "\n"))
	}
	if got := hourlyText(t, store, true); got != want {
		t.Fatalf("hourly counts differ from the events stored: %s", testenv.FirstDiff(want, got))
	}
	replay := testenv.ClickHouse(t)
	runIngester(t, n, &brokenStore{Store: replay}, "replay", 13, last)
	if got := hourlyText(t, replay, false); got != want {
		t.Fatalf("the replay's hourly counts differ: %s", testenv.FirstDiff(got, want))
	}

	ctx := context.Background()
	migrations, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, m := range migrations {
		if m.Version != 14 {
			continue
		}
		for range 2 {
			for _, st := range m.Statements {
				if err := store.Conn().Exec(ctx, st); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
			}
			ran = true
		}
	}
	if !ran {
		t.Fatal("no migration 0014")
	}
	if got := hourlyText(t, store, false); got != want {
		t.Fatalf("after the backfill: %s", testenv.FirstDiff(got, want))
	}
}
