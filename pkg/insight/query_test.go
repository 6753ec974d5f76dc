package insight

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestScanReadsOverridesNotEveryPerson: the scan joins the overrides, not
// person_distinct_ids; persons only for person columns; and the command
// filter (which reads properties) only when a named event may be a command.
func TestScanReadsOverridesNotEveryPerson(t *testing.T) {
	base := scan{project: 1, to: time.Unix(2e9, 0), f: newFilters()}
	cases := []struct {
		name    string
		s       func(scan) scan
		persons bool
		cmd     bool
	}{
		{"any event", func(s scan) scan { return s }, false, true},
		{"captured names", func(s scan) scan { s.names = []string{"$pageview", "signed_up"}; return s }, false, false},
		{"$set may be a command", func(s scan) scan { s.names = []string{"$pageview", "$set"}; return s }, false, true},
		{"a command name", func(s scan) scan { s.names = []string{"$delete_person"}; return s }, false, true},
		{"person filter", func(s scan) scan { s.f = newFilters(); s.f.person = true; return s }, true, true},
	}
	for _, c := range cases {
		sql, args := c.s(base).sql()
		if strings.Contains(sql, "person_distinct_ids") || !strings.Contains(sql, "person_distinct_id_overrides FINAL") {
			t.Errorf("%s: not read through the overrides: %s", c.name, sql)
		}
		if got := strings.Contains(sql, "FROM persons FINAL"); got != c.persons {
			t.Errorf("%s: reads persons %v, want %v", c.name, got, c.persons)
		}
		if got := strings.Contains(sql, "position(properties"); got != c.cmd {
			t.Errorf("%s: command filter %v, want %v", c.name, got, c.cmd)
		}
		if n := strings.Count(sql, "?"); n != len(args) {
			t.Errorf("%s: %d placeholders, %d args", c.name, n, len(args))
		}
	}
}

// TestPathNamesCutTheScan: a path over named event types cuts the scan by
// those names (PREWHERE), and over any name (no type, custom_event) not.
func TestPathNamesCutTheScan(t *testing.T) {
	cases := []struct {
		query string
		names []string
	}{
		{`include_event_types=["$pageview"]`, []string{"$pageview"}},
		{`include_event_types=["$pageview","$screen"]&include_custom_events=["signed_up"]`, []string{"$pageview", "$screen", "signed_up"}},
		{`include_custom_events=["signed_up"]`, []string{"signed_up"}},
		{`path_type=$screen`, []string{"$screen"}},
		{``, nil},
		{`include_event_types=["$pageview","custom_event"]`, nil},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parsePaths(q)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if !slices.Equal(p.names, c.names) {
			t.Errorf("%s: names %q, want %q", c.query, p.names, c.names)
		}
	}
}

// TestLifecycleReadsCreatedAtOnlyForNew: returning and dormant never read
// persons (a returning person was active before, so is not new); new and
// resurrecting read the persons created in the target interval as a set,
// never a join with every person of the project.
func TestLifecycleReadsCreatedAtOnlyForNew(t *testing.T) {
	pv := "$pageview"
	f := &Filter{Interval: Day, Loc: time.UTC, Range: Range{From: time.Unix(1.7e9, 0), To: time.Unix(1.71e9, 0)}}
	s := scan{project: 1, from: f.Range.From, to: f.Range.To, f: newFilters(), where: cond{"event = ?", []any{pv}}, names: []string{pv}}
	for typ, persons := range map[string]bool{"returning": false, "dormant": false, "new": true, "resurrecting": true} {
		sql, args := lifecycleSQL(s, 1, f, time.Unix(1.705e9, 0), typ, Page{Limit: 10})
		if got := strings.Contains(sql, "persons FINAL"); got != persons {
			t.Errorf("%s: reads persons %v, want %v: %s", typ, got, persons, sql)
		}
		if strings.Contains(sql, "JOIN (SELECT id AS pid") {
			t.Errorf("%s: joins the project's persons: %s", typ, sql)
		}
		if n := strings.Count(sql, "?"); n != len(args) {
			t.Errorf("%s: %d placeholders, %d args", typ, n, len(args))
		}
	}
}

// TestScanReadsTheRangeDays: a scan states its range on the sort key's
// date, so a one-day request reads that day's granules, not the
// project's: 40 days of 10k events around it stay unread (ClickHouse
// 18.16 does not derive the date from the timestamp condition).
func TestScanReadsTheRangeDays(t *testing.T) {
	st, day0 := dailyEvents(t)
	day := day0.AddDate(0, 0, 20).Format(time.DateOnly)
	q := url.Values{"events": {`[{"id":"$pageview","type":"events"}]`}, "entity_id": {"$pageview"}, "entity_type": {"events"},
		"date_from": {day}, "date_to": {day}, "stickiness_days": {"1"}}
	f, err := ParseFilter(q, time.UTC, day0.AddDate(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, read := countRead()
	got, err := st.Stickiness(ctx, 1, f, q, Page{})
	if err != nil {
		t.Fatal(err)
	}
	// Every person sends events every day: all are active on that day alone.
	if len(got) != dailyPersons {
		t.Fatalf("%d persons active on %s, want %d", len(got), day, dailyPersons)
	}
	t.Logf("read %d rows", read.Load())
	if n := read.Load(); n > dailyEventsPerDay+4*8192 {
		t.Fatalf("a one-day scan read %d rows of %d: not by the sort key's date", n, 40*dailyEventsPerDay)
	}
}

// TestLifecycleReadsTheIntervalsItNeeds: over a 30-day range, returning
// and dormant read the target's and the previous day's events; new and
// resurrecting the range up to the target's day, not after it.
func TestLifecycleReadsTheIntervalsItNeeds(t *testing.T) {
	st, day0 := dailyEvents(t)
	for _, c := range []struct {
		typ  string
		days int
		want int // every person is active every day: all return, none is anything else
	}{{"returning", 2, dailyPersons}, {"dormant", 2, 0}, {"new", 11, 0}, {"resurrecting", 11, 0}} {
		q := url.Values{"events": {`[{"id":"$pageview","type":"events"}]`}, "date_from": {day0.AddDate(0, 0, 5).Format(time.DateOnly)},
			"date_to": {day0.AddDate(0, 0, 34).Format(time.DateOnly)}, "target_date": {day0.AddDate(0, 0, 14).Format(time.DateOnly)}, "lifecycle_type": {c.typ}}
		f, err := ParseFilter(q, time.UTC, day0.AddDate(0, 2, 0))
		if err != nil {
			t.Fatal(err)
		}
		ctx, read := countRead()
		got, err := st.Lifecycle(ctx, 1, f, q, Page{}, day0.AddDate(0, 2, 0))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("%s: %d persons, want %d", c.typ, len(got), c.want)
		}
		t.Logf("%s: read %d rows", c.typ, read.Load())
		if n := read.Load(); n > uint64(c.days*dailyEventsPerDay+4*8192) {
			t.Errorf("%s read %d rows: more than %d days' events", c.typ, n, c.days)
		}
	}
}

// TestRetentionReadsFromTheSelectedInterval: recurring retention reads
// the selected interval and those after it (its cohort query that
// interval again), not the intervals before.
func TestRetentionReadsFromTheSelectedInterval(t *testing.T) {
	st, day0 := dailyEvents(t)
	q := url.Values{"target_entity": {`{"id":"$pageview","type":"events"}`}, "period": {"Day"}, "total_intervals": {"30"},
		"selected_interval": {"20"}, "date_to": {day0.AddDate(0, 0, 29).Format(time.DateOnly)}}
	now := day0.AddDate(0, 2, 0)
	f, err := ParseFilter(RetentionQuery(q), time.UTC, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, read := countRead()
	got, err := st.Retention(ctx, 1, f, q, Page{}, now)
	if err != nil {
		t.Fatal(err)
	}
	// Every person is active every day: all are in the cohort, back in each later interval.
	if len(got) != dailyPersons {
		t.Fatalf("%d persons, want %d", len(got), dailyPersons)
	}
	for _, a := range got {
		if fmt.Sprint(a.Appearances) != fmt.Sprint(slices.Repeat([]int{1}, 10)) {
			t.Fatalf("person %d appears %v, want back every day", a.PersonID, a.Appearances)
		}
	}
	t.Logf("read %d rows", read.Load())
	if n := read.Load(); n > 11*dailyEventsPerDay+8*8192 {
		t.Fatalf("read %d rows: more than the 10 days from the selected one and its cohort's", n)
	}
}

const dailyEventsPerDay, dailyPersons = 10000, 1000

// dailyEvents fills a fresh database with 40 days of $pageview events of
// project 1 from the day it returns, dailyEventsPerDay a day, each day
// from every one of dailyPersons persons (person_id, no overrides).
func dailyEvents(t *testing.T) (*Store, time.Time) {
	store := testenv.ClickHouse(t)
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := store.Conn().Exec(context.Background(), `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, timestamp, properties, seq)
		SELECT 1, generateUUIDv4(), '$pageview', concat('d', toString(number % ?)), number % ? + 1,
			toDateTime(?) + intDiv(number, ?) * 86400 + (number % ?) * 8, '{}', number + 1 FROM system.numbers LIMIT ?`,
		dailyPersons, dailyPersons, day0.Unix(), dailyEventsPerDay, dailyEventsPerDay, 40*dailyEventsPerDay); err != nil {
		t.Fatal(err)
	}
	return New(store.Conn(), nil), day0
}

// countRead is a context whose queries add the rows they read to read.
func countRead() (context.Context, *atomic.Uint64) {
	read := &atomic.Uint64{}
	return clickhouse.Context(context.Background(), clickhouse.WithProgress(func(p *clickhouse.Progress) { read.Add(p.Rows) })), read
}
