package eventstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestRestoreHourlyCounts: after rows landed in events without their
// counts in events_hourly (the view detached, as an insert that died
// between the table and its views), the recovery's restore brings each
// key of the rows to the events stored: up where the counts lack them,
// down where a key's sum is above (stored modulo 2^64, the column being
// UInt64), the API's $actor events not counted, other keys untouched, and
// a second run writes nothing; events_first_seq gets each hour's lowest
// seq of the rows.
func TestRestoreHourlyCounts(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	hour := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
	row := hourlyRow(hour)
	rows := []eventstore.Row{
		row(1, "a", "d1", 7, time.Minute, "{}"),
		row(2, "a", "d1", 7, 59*time.Minute, "{}"),        // the same key
		row(3, "a", "d1", 7, 61*time.Minute, "{}"),        // the next hour
		row(4, "$set", "d1", 7, 0, `{"$actor":{"id":1}}`), // the API's: not counted
		row(5, "b", "d2", 8, 0, "{}"),                     // its key's sum is above
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if err := store.Conn().Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec("DETACH TABLE events_hourly_rows_mv")
	exec("DETACH TABLE events_first_seq_mv")
	if err := store.WriteRows(ctx, rows, fold.Batch{}); err != nil {
		t.Fatal(err)
	}
	exec("ATTACH TABLE events_hourly_rows_mv")
	exec("ATTACH TABLE events_first_seq_mv")
	// Key b counted 5 (where events holds 1), another key 7, and the
	// first key once already (its second row lost).
	ins := "INSERT INTO events_hourly (project_id, event, hour, distinct_id, person_id, events) SELECT ?, ?, toDateTime(?), ?, ?, ?"
	exec(ins, 1, "b", hour.Unix(), "d2", 8, 5)
	exec(ins, 1, "c", hour.Unix(), "d3", 9, 7)
	exec(ins, 1, "a", hour.Unix(), "d1", 7, 1)
	written, err := store.Events().Written(ctx, rows)
	if err != nil || len(written) != len(rows) {
		t.Fatalf("written: %v, %v", written, err)
	}
	want := "1\ta\t2024-03-05 10:00:00 +0000 UTC\td1\t7\t2\t\n" +
		"1\ta\t2024-03-05 11:00:00 +0000 UTC\td1\t7\t1\t\n" +
		"1\tb\t2024-03-05 10:00:00 +0000 UTC\td2\t8\t1\t\n" +
		"1\tc\t2024-03-05 10:00:00 +0000 UTC\td3\t9\t7\t\n"
	var stored []string
	for run := range 2 {
		if err := store.Events().RestoreCopies(ctx, rows, written); err != nil {
			t.Fatal(err)
		}
		if got := testenv.QueryText(t, store, testenv.HourlySumsSQL); got != want {
			t.Fatalf("run %d: events_hourly:\n%s\nwant\n%s", run+1, got, want)
		}
		stored = append(stored, testenv.QueryText(t, store, "SELECT count() FROM events_hourly"))
		// The lowest seq of each hour (schema 0017), the API's events
		// too: the view takes every event.
		first := testenv.QueryText(t, store, "SELECT project_id, hour, minMerge(min_seq) FROM events_first_seq GROUP BY project_id, hour ORDER BY hour")
		if want := "1\t2024-03-05 10:00:00 +0000 UTC\t1\t\n1\t2024-03-05 11:00:00 +0000 UTC\t3\t\n"; first != want {
			t.Fatalf("run %d: events_first_seq:\n%s\nwant\n%s", run+1, first, want)
		}
	}
	if stored[0] != stored[1] {
		t.Fatalf("the second restore wrote rows: %s then %s", stored[0], stored[1])
	}
}

// TestRestoreHourlyCountsOfAGrownBatch: the restore of a grown batch's
// keys (200k events, each its own key) fits ClickHouse's bounds on a
// statement and the ingester's deadline. Spliced into the statement as
// tuples, 20k keys were above max_ast_elements (50,000 by default: "AST is
// too big"), and in chunks of 50k under a raised bound a grown batch's
// restore took longer than the deadline: either way an ingester whose
// batch was interrupted retried it for ever (the bench's fill, and its
// ingest at ten times, on a loaded machine). The keys now go as an
// external table.
func TestRestoreHourlyCountsOfAGrownBatch(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	hour := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
	const n = 200_000
	rows := make([]eventstore.Row, n)
	for i := range rows {
		rows[i] = eventstore.Row{ProjectID: 1, UUID: uuid.New(), Event: "a", DistinctID: fmt.Sprintf("d%d", i),
			PersonID: uint64(i + 1), Timestamp: hour.Add(time.Duration(i) * time.Second), Properties: "{}", Seq: uint64(i + 1)}
	}
	if err := store.Conn().Exec(ctx, "DETACH TABLE events_hourly_rows_mv"); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteRows(ctx, rows, fold.Batch{}); err != nil {
		t.Fatal(err)
	}
	if err := store.Conn().Exec(ctx, "ATTACH TABLE events_hourly_rows_mv"); err != nil {
		t.Fatal(err)
	}
	written, err := store.Events().Written(ctx, rows)
	if err != nil || len(written) != n {
		t.Fatalf("written: %d, %v", len(written), err)
	}
	if err := store.Events().RestoreCopies(ctx, rows, written); err != nil {
		t.Fatal(err)
	}
	if got := testenv.QueryText(t, store, "SELECT count(), sum(events) FROM events_hourly"); got != fmt.Sprintf("%d\t%d\t\n", n, n) {
		t.Fatalf("events_hourly rows and sum: %q, want %d of 1", got, n)
	}
}

// TestHourlyViewCountsEachEvent: events_hourly_rows_mv (schema 0018) writes
// one row of count 1 for each counted events row, with no GROUP BY over
// the inserted block (the grouping cost more server CPU than the rows it
// saved, as measured in docs/performance.md); the sums per key readers take are
// the events' counts, the API's $actor events left out, as before.
func TestHourlyViewCountsEachEvent(t *testing.T) {
	at := hourlyRow(time.Date(2024, 6, 1, 8, 0, 0, 0, time.UTC))
	rows := []eventstore.Row{
		at(10, "view", "u1", 3, 0, "{}"),
		at(11, "$set", "u1", 3, time.Second, `{"$actor":{"id":2}}`), // not counted
		at(12, "view", "u1", 3, 30*time.Minute, "{}"),               // the key of 10, the same block
		at(13, "click", "u2", 4, 0, "{}"),
		at(14, "view", "u1", 3, 59*time.Minute, "{}"), // and again
	}
	store := testenv.ClickHouse(t)
	if err := store.WriteRows(context.Background(), rows, fold.Batch{}); err != nil {
		t.Fatal(err)
	}
	want := "1\tclick\t2024-06-01 08:00:00 +0000 UTC\tu2\t4\t1\t\n" +
		"1\tview\t2024-06-01 08:00:00 +0000 UTC\tu1\t3\t3\t\n"
	if got := testenv.QueryText(t, store, testenv.HourlySumsSQL); got != want {
		t.Fatalf("events_hourly sums:\n%s\nwant\n%s", got, want)
	}
	// One insert, one part: nothing merged the rows yet.
	if got := testenv.QueryText(t, store, "SELECT count(), max(events) FROM events_hourly"); got != "4\t1\t\n" {
		t.Fatalf("events_hourly rows, largest count: %q, want 4 rows of 1 (one per counted event)", got)
	}
}

// hourlyRow makes events rows of project 1 at an offset from hour.
func hourlyRow(hour time.Time) func(seq uint64, event, did string, person uint64, at time.Duration, props string) eventstore.Row {
	return func(seq uint64, event, did string, person uint64, at time.Duration, props string) eventstore.Row {
		return eventstore.Row{ProjectID: 1, UUID: uuid.New(), Event: event, DistinctID: did, PersonID: person,
			Timestamp: hour.Add(at), Properties: props, Seq: seq}
	}
}
