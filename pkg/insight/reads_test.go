package insight

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/testenv"
)

// The tests here count the rows the routes read (the analysis figures, docs/performance.md)
// over 40 days of events whose answers are known by construction.

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

// TestStickinessCountsIntervalsExactly: over 40 days of daily activity
// every person is in exactly 40 intervals, by uniqUpTo (up to 100) and by
// uniqExact beyond.
func TestStickinessCountsIntervalsExactly(t *testing.T) {
	st, day0 := dailyEvents(t)
	for days, want := range map[string]int{"39": 0, "40": dailyPersons, "41": 0, "101": 0} {
		q := url.Values{"events": {`[{"id":"$pageview","type":"events"}]`}, "entity_id": {"$pageview"}, "entity_type": {"events"},
			"date_from": {day0.Format(time.DateOnly)}, "date_to": {day0.AddDate(0, 0, 39).Format(time.DateOnly)}, "stickiness_days": {days}}
		f, err := ParseFilter(q, time.UTC, day0.AddDate(0, 2, 0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Stickiness(context.Background(), 1, f, q, Page{})
		if err != nil {
			t.Fatalf("stickiness_days=%s: %v", days, err)
		}
		if len(got) != want {
			t.Errorf("stickiness_days=%s: %d persons, want %d", days, len(got), want)
		}
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
