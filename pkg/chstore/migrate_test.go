package chstore_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestMigrationsRunAgain: a migrate interrupted after some statements of a
// migration ran (before its version was recorded) runs again: CREATE ...
// IF NOT EXISTS, an ADD COLUMN whose column exists (18.16 has no IF NOT
// EXISTS there), the idempotent backfill of 0006.
func TestMigrationsRunAgain(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	if err := store.Conn().Exec(ctx, "DROP TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	ran, err := store.Migrate(ctx)
	if err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if len(ran) == 0 {
		t.Fatal("nothing ran again")
	}
	if err := store.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEventsByDistinctIDBackfill: migration 0009's view copies every
// behaviour event inserted into events (not the API's $actor commands),
// and its backfill copies the events stored before it, once: running the
// migration again copies nothing twice.
func TestEventsByDistinctIDBackfill(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	conn := store.Conn()
	insert := func(from, to int) { insertSpread(t, conn, from, to) }
	check := func(when string) { checkCopy(t, conn, when) }
	insert(0, 300)
	check("after inserts through the view")
	// Events stored before the migration: the copy is empty, and the
	// migration's statements run again (as after an interrupted migrate).
	if err := conn.Exec(ctx, "TRUNCATE TABLE events_by_distinct_id"); err != nil {
		t.Fatal(err)
	}
	insert(300, 400) // the copy now lacks rows 0..299 only
	migrations, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version != 9 {
			continue
		}
		for range 2 {
			for _, st := range m.Statements {
				if err := conn.Exec(ctx, st); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
			}
		}
	}
	check("after the backfill, twice")
}

// insertSpread inserts events from..to-1 an hour apart from 2026-03-01 (a
// third of them the API's $actor commands, two projects).
func insertSpread(t *testing.T, conn driver.Conn, from, to int) {
	t.Helper()
	if err := conn.Exec(context.Background(), `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)
		SELECT 1 + number % 2, generateUUIDv4(), if(number % 3 = 0, '$set', 'view'), concat('d', toString(number % 7)), number % 7, generateUUIDv4(),
		toDateTime('2026-03-01 00:00:00', 'UTC') + number * 3600, number % 1000, if(number % 3 = 0, '{"$actor":1}', '{}'), number + 1
		FROM numbers(?) WHERE number >= ?`, to, from); err != nil {
		t.Fatal(err)
	}
}

// rowsOf counts the rows of a one-column query by their text: every
// column of a row, so the copy and events compare row for row.
func rowsOf(t *testing.T, conn driver.Conn, sql string) map[string]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out[s]++
	}
	return out
}

// checkCopy fails unless events_by_distinct_id holds exactly the events
// without $actor.
func checkCopy(t *testing.T, conn driver.Conn, when string) {
	t.Helper()
	const cols = "concat(toString(project_id), '/', distinct_id, '/', event, '/', toString(timestamp), '/', toString(uuid), '/', toString(person_id), '/', toString(seq))"
	got := rowsOf(t, conn, "SELECT "+cols+" FROM events_by_distinct_id")
	want := rowsOf(t, conn, "SELECT "+cols+" FROM events WHERE visitParamHas(properties, '$actor') = 0")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("%s: copy has %d rows, events %d without $actor", when, len(got), len(want))
	}
}

// migration returns the migration of version v.
func migration(t *testing.T, v uint32) chstore.Migration {
	t.Helper()
	migrations, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(migrations, func(m chstore.Migration) bool { return m.Version == v })
	if i < 0 {
		t.Fatalf("no migration %d", v)
	}
	return migrations[i]
}

// cutAndRerun runs the first cut statements of m, as a run interrupted
// after them, then m again, whole, as Migrate runs it (its condition
// holding on a single server).
func cutAndRerun(t *testing.T, conn driver.Conn, m chstore.Migration, cut int) {
	t.Helper()
	ctx := context.Background()
	for _, st := range m.Statements[:cut] {
		if err := conn.Exec(ctx, st); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
	}
	var yes uint8
	if err := conn.QueryRow(ctx, m.OnlyIf).Scan(&yes); err != nil || yes != 1 {
		t.Fatalf("cut %d: condition %d, %v; want 1 on a single server", cut, yes, err)
	}
	for _, st := range m.Statements {
		if err := conn.Exec(ctx, st); err != nil {
			t.Fatalf("cut %d, run again: %v", cut, err)
		}
	}
}

// wantCopyTablesOnly fails unless the copy and its view are the only
// tables of their name left: a rebuild leaves nothing behind.
func wantCopyTablesOnly(t *testing.T, conn driver.Conn, cut int) {
	t.Helper()
	var left []string
	for name := range rowsOf(t, conn, "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'events_by_distinct_id%'") {
		left = append(left, name)
	}
	slices.Sort(left)
	if strings.Join(left, " ") != "events_by_distinct_id events_by_distinct_id_mv" {
		t.Fatalf("cut %d: tables %v", cut, left)
	}
}

// TestEventsByDistinctIDByMonth: migration 0019 leaves events_by_distinct_id
// partitioned by month with the same rows, its view filling the new
// table, and nothing else behind; interrupted after any of its statements,
// it runs again from the top to the same end.
func TestEventsByDistinctIDByMonth(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	conn := store.Conn()
	m := migration(t, 19)
	if m.OnlyIf == "" {
		t.Fatal("migration 19 has no condition (it must skip the cluster's Distributed table)")
	}
	insertSpread(t, conn, 0, 2000) // ~3 months
	for cut := range len(m.Statements) + 1 {
		cutAndRerun(t, conn, m, cut)
		var key string
		if err := conn.QueryRow(ctx, "SELECT partition_key FROM system.tables WHERE database = currentDatabase() AND name = 'events_by_distinct_id'").Scan(&key); err != nil {
			t.Fatal(err)
		}
		if key != "toYYYYMM(timestamp)" {
			t.Fatalf("cut %d: partition key %q", cut, key)
		}
		var parts uint64
		if err := conn.QueryRow(ctx, "SELECT uniqExact(partition) FROM system.parts WHERE database = currentDatabase() AND table = 'events_by_distinct_id' AND active").Scan(&parts); err != nil {
			t.Fatal(err)
		}
		if parts < 3 {
			t.Fatalf("cut %d: %d partitions, want one a month (3)", cut, parts)
		}
		wantCopyTablesOnly(t, conn, cut)
		// The view writes into the table now of that name.
		insertSpread(t, conn, 2000+cut*10, 2010+cut*10)
		checkCopy(t, conn, "after the migration and an insert")
	}
}

// TestEventsByDistinctIDWithMs: migration 0023 gives events_by_distinct_id
// the events' milliseconds, for the rows stored before it (a copy as 0019
// left it, without them) and those its view writes after; interrupted
// after any of its statements, it runs again from the top to the same end.
func TestEventsByDistinctIDWithMs(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	conn := store.Conn()
	m := migration(t, 23)
	if m.OnlyIf == "" {
		t.Fatal("migration 23 has no condition (it must skip the cluster's Distributed table)")
	}
	for _, st := range migration(t, 19).Statements { // the copy as it was before
		if err := conn.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	insertSpread(t, conn, 0, 2000)
	const cols = "concat(toString(project_id), '/', distinct_id, '/', toString(timestamp), '/', toString(timestamp_ms), '/', toString(uuid), '/', toString(seq))"
	for cut := range len(m.Statements) + 1 {
		cutAndRerun(t, conn, m, cut)
		insertSpread(t, conn, 2000+cut*10, 2010+cut*10)
		got := rowsOf(t, conn, "SELECT "+cols+" FROM events_by_distinct_id")
		want := rowsOf(t, conn, "SELECT "+cols+" FROM events WHERE visitParamHas(properties, '$actor') = 0")
		if len(want) == 0 || !maps.Equal(got, want) {
			t.Fatalf("cut %d: copy has %d rows with their milliseconds, events %d without $actor", cut, len(got), len(want))
		}
		wantCopyTablesOnly(t, conn, cut)
	}
}
