package deletion

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// filtered writes a pending filtered request as the ingester does.
func filtered(t *testing.T, r *Runner, project, person, seq uint64, filter string, edit func(*FilteredRequest)) FilteredRequest {
	t.Helper()
	zero := time.Unix(0, 0).UTC()
	q := FilteredRequest{ProjectID: project, RequestID: uuid.New(), PersonID: person, Filter: filter, RequestSeq: seq,
		Status: StatusPending, RequestedAt: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), StartedAt: zero, VerifiedAt: zero,
		SpanFrom: zero, SpanTo: zero, Version: seq}
	if edit != nil {
		edit(&q)
	}
	if err := r.writeFiltered(context.Background(), &q); err != nil {
		t.Fatal(err)
	}
	return q
}

// hourlyOff counts the keys of events_hourly whose sum is not the number
// of their events.
func hourlyOff(t *testing.T, f *fixture) uint64 {
	t.Helper()
	n, err := eventstore.New(f.conn).CheckHourly(context.Background(), eventstore.HourlyRegion{ProjectID: 1,
		From: time.Unix(0, 0), To: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFilteredDeletion: a person's events in a range up to the request's
// sequence go, from events and the copy; the rest stays (other months,
// later sequences, other persons); the hourly counts agree with events.
func TestFilteredDeletion(t *testing.T) {
	f := newFixture(t, nil, nil)
	var evs []ev
	for seq := uint64(1); seq <= 60; seq += 2 {
		evs = append(evs, ev{1, 10, seq}, ev{1, 11, seq + 1}) // months 1..3 in turn (insertEvents)
	}
	insertEvents(t, f.conn, evs...)
	commit(t, f.conn, 100)
	// February's events of person 10 up to sequence 40.
	filtered(t, f.runner, 1, 10, 40, `{"after":"2026-02-01T00:00:00Z","before":"2026-03-01T00:00:00Z","events":["$pageview"]}`, nil)
	want := map[uint64]int{}
	deleted := 0
	for i, e := range evs {
		if e.person != 10 {
			continue
		}
		if i%3 == 1 && e.seq <= 40 { // February
			deleted++
			continue
		}
		want[e.seq] = 1
	}
	sum := f.runOnce(t)
	if sum.Verified != 1 || sum.EventsDeleted != uint64(deleted) || sum.Failed != 0 {
		t.Fatalf("run: %+v, want %d deleted", sum, deleted)
	}
	if got := eventsOf(t, f.conn, 1, 10); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events left: %v, want %v", got, want)
	}
	if got := rowsOf(t, f.conn, "events_by_distinct_id", 1, 10); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("copies left: %v, want %v", got, want)
	}
	if n := len(eventsOf(t, f.conn, 1, 11)); n != 30 {
		t.Fatalf("another person's events: %d", n)
	}
	if n := hourlyOff(t, f); n != 0 {
		t.Fatalf("%d hourly keys disagree with events", n)
	}
	open, err := f.runner.loadOpenFiltered(context.Background())
	if err != nil || len(open) != 0 {
		t.Fatalf("open after the run: %v %v", open, err)
	}
}

// TestFilteredDeletionResumesHourly: a run stopped after the events were
// deleted and before the hourly counts were corrected leaves the request
// running with its hours recorded; the next run finds no event to delete
// and still corrects the hourly counts of those hours.
func TestFilteredDeletionResumesHourly(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 10, 1}, ev{1, 10, 2}, ev{1, 10, 3}, ev{1, 11, 4})
	commit(t, f.conn, 10)
	q := filtered(t, f.runner, 1, 0, 5, `{"events":["$pageview"],"properties":[{"key":"x","operator":"is_not_set"}]}`, func(q *FilteredRequest) {
		// What the stopped run recorded: its count and hours.
		q.Status, q.EventsDeleted = StatusRunning, 4
		q.SpanFrom, q.SpanTo = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	})
	// The stopped run's deletions, without the hourly correction.
	cond, err := mustFilter(t, q.Filter).Compile(context.Background(), q.RequestedAt)
	if err != nil {
		t.Fatal(err)
	}
	es := eventstore.New(f.conn)
	sc := eventstore.FilterScope{ProjectID: 1, Seq: 5, Cond: cond.SQL, Args: cond.Args}
	before, err := f.runner.mutationIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := es.DeleteFilteredCopies(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	if err := f.runner.waitMutations(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	if err := es.DeleteFiltered(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	if err := f.runner.waitMutations(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	if n := hourlyOff(t, f); n == 0 {
		t.Fatal("the hourly counts agree before the correction: the test tests nothing")
	}
	sum := f.runOnce(t)
	if sum.Verified != 1 || sum.EventsDeleted != 4 || sum.Mutations != 3 { // the hourly rows' only, a month each
		t.Fatalf("run: %+v", sum)
	}
	if n := hourlyOff(t, f); n != 0 {
		t.Fatalf("%d hourly keys disagree with events", n)
	}
}

func mustFilter(t *testing.T, raw string) Filter {
	t.Helper()
	f, err := ParseFilter(raw)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFilteredDeletionNeverSelectsEverything: a stored request whose
// filter constrains nothing (empty property groups, PostHog's "no
// filter") deletes nothing; it stays open and counts as failed.
func TestFilteredDeletionNeverSelectsEverything(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn, ev{1, 10, 1}, ev{1, 11, 2})
	commit(t, f.conn, 10)
	filtered(t, f.runner, 1, 0, 5, `{"properties":{"type":"AND","values":[{"type":"OR","values":[]}]}}`, nil)
	sum := f.runOnce(t)
	if sum.Verified != 0 || sum.EventsDeleted != 0 || sum.Failed != 1 {
		t.Fatalf("run: %+v, want the request failed and nothing deleted", sum)
	}
	if n := len(eventsOf(t, f.conn, 1, 10)) + len(eventsOf(t, f.conn, 1, 11)); n != 2 {
		t.Fatalf("%d of 2 events left", n)
	}
}
