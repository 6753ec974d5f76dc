package deletion

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// hourlyOf returns the hourly counts of a person (schema 0014) by hour,
// event and distinct id, summed over unmerged rows; from events, the
// same counts made from the events rows left.
func hourlyOf(t *testing.T, conn driver.Conn, project, person uint64, fromEvents bool) map[string]uint64 {
	t.Helper()
	sql := "SELECT concat(toString(hour), '/', event, '/', distinct_id), sum(events) FROM events_hourly WHERE project_id = ? AND person_id = ? GROUP BY hour, event, distinct_id"
	if fromEvents {
		sql = "SELECT concat(toString(toStartOfHour(timestamp)), '/', event, '/', distinct_id), count() FROM events WHERE project_id = ? AND person_id = ? GROUP BY toStartOfHour(timestamp), event, distinct_id"
	}
	rows, err := conn.Query(context.Background(), sql, project, person)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var k string
		var n uint64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHourlyCountsFollowDeletions: the deleter takes a person's events
// out of the hourly counts too, and only those up to the request's
// sequence: an event of the person above it stays counted, and other
// persons' counts are untouched.
func TestHourlyCountsFollowDeletions(t *testing.T) {
	f := newFixture(t, nil, nil)
	// Person 20: seqs 1, 2 and 3 are deleted (request at 10); 15 stays.
	insertEvents(t, f.conn, ev{1, 20, 1}, ev{1, 20, 2}, ev{1, 20, 3}, ev{1, 21, 4}, ev{2, 20, 5}, ev{1, 20, 15})
	before21, before2 := hourlyOf(t, f.conn, 1, 21, false), hourlyOf(t, f.conn, 2, 20, false)
	if got := hourlyOf(t, f.conn, 1, 20, false); len(got) != 4 {
		t.Fatalf("hourly counts of 1/20 before: %v, want 4 hours", got)
	}
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10})
	commit(t, f.conn, 15)
	// Its event at 15 is left, dated after the deleted ones (insertEvents:
	// March 6 against January 1 to March 3), so outside the hours the run
	// rewrites: its count there stays as it was, nobody is recounted
	// (TestHourlyBoundedByTheDeletedHours has an event left inside them).
	if sum := f.runOnce(t); sum.Verified != 1 || sum.EventsDeleted != 3 || sum.Recounted != 0 {
		t.Fatalf("run: %+v", sum)
	}
	got, want := hourlyOf(t, f.conn, 1, 20, false), hourlyOf(t, f.conn, 1, 20, true)
	if len(want) != 1 || !maps.Equal(got, want) {
		t.Fatalf("hourly counts of 1/20 after: %v, want those of its events left %v (one)", got, want)
	}
	for _, c := range []struct {
		project, person uint64
		before          map[string]uint64
	}{{1, 21, before21}, {2, 20, before2}} {
		if got := hourlyOf(t, f.conn, c.project, c.person, false); len(got) == 0 || !maps.Equal(got, c.before) {
			t.Errorf("hourly counts of %d/%d changed: %v, were %v", c.project, c.person, got, c.before)
		}
	}
	// Run again (a request re-run after a crash): nothing counted twice.
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 12})
	f.runOnce(t)
	if got := hourlyOf(t, f.conn, 1, 20, false); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a second request: %v, want %v", got, want)
	}
}

// TestHourlyRecountOnlyWithEventsLeft: a person whose events all go has
// its hourly rows deleted and not counted again (a scan of events saved);
// its counts are empty, as its events.
func TestHourlyRecountOnlyWithEventsLeft(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 20, 1}, ev{1, 20, 2}, ev{1, 21, 3})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10})
	commit(t, f.conn, 10)
	if sum := f.runOnce(t); sum.Verified != 1 || sum.Mutations != 1 || sum.Recounted != 0 {
		t.Fatalf("run: %+v, want 1 verified, 1 mutation, nobody recounted", sum)
	}
	if got := hourlyOf(t, f.conn, 1, 20, false); len(got) != 0 {
		t.Fatalf("hourly counts of 1/20: %v, want none", got)
	}
	if got := hourlyOf(t, f.conn, 1, 21, false); len(got) != 1 {
		t.Fatalf("hourly counts of 1/21: %v, want its one", got)
	}
}

// TestHourlyDriftIsRepaired: a run killed between the events' mutation
// and the hourly one left a person's hourly counts above its events; the
// next run finds the difference (through the copy, which holds what the
// view counts) and rebuilds them. A person whose counts agree, with
// nothing of its own to delete, costs no mutation.
func TestHourlyDriftIsRepaired(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 20, 1}, ev{1, 20, 2}, ev{1, 20, 15}, ev{1, 30, 40})
	ctx := context.Background()
	for _, table := range []string{"events_by_distinct_id", "events"} {
		if err := f.conn.Exec(ctx, "ALTER TABLE "+table+" DELETE WHERE person_id = 20 AND seq <= 10"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.runner.waitMutations(ctx, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if got, want := hourlyOf(t, f.conn, 1, 20, false), hourlyOf(t, f.conn, 1, 20, true); maps.Equal(got, want) {
		t.Fatalf("hourly counts of 1/20 before the run: %v, equal to its events' %v: no drift to repair", got, want)
	}
	// Person 30's only event is above its request: nothing to delete.
	request(t, f.runner, Request{ProjectID: 1, PersonID: 30, RequestSeq: 35})
	commit(t, f.conn, 40)
	if sum := f.runOnce(t); sum.Verified != 1 || sum.Mutations != 0 {
		t.Fatalf("run for 1/30: %+v, want verified without a mutation", sum)
	}
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10})
	if sum := f.runOnce(t); sum.Verified != 1 || sum.Mutations != 1 || sum.Recounted != 1 {
		t.Fatalf("run for 1/20: %+v, want 1 verified, 1 mutation, 1 recounted", sum)
	}
	got, want := hourlyOf(t, f.conn, 1, 20, false), hourlyOf(t, f.conn, 1, 20, true)
	if len(want) != 1 || !maps.Equal(got, want) {
		t.Fatalf("hourly counts of 1/20 after: %v, want those of its event left %v", got, want)
	}
}

// TestPollDelay: the poll interval follows the time waited (a hundredth),
// within its bounds.
func TestPollDelay(t *testing.T) {
	for _, c := range []struct{ waited, want time.Duration }{
		{0, pollMin}, {500 * time.Millisecond, pollMin}, {3 * time.Second, 30 * time.Millisecond},
		{20 * time.Second, 200 * time.Millisecond}, {time.Hour, pollMax},
	} {
		if got := pollDelay(c.waited); got != c.want {
			t.Errorf("pollDelay(%s) = %s, want %s", c.waited, got, c.want)
		}
	}
}
