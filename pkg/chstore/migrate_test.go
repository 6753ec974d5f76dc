package chstore_test

import (
	"context"
	"maps"
	"testing"

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
	insert := func(from, to int) {
		t.Helper()
		if err := conn.Exec(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)
			SELECT 1 + number % 2, generateUUIDv4(), if(number % 3 = 0, '$set', 'view'), concat('d', toString(number % 7)), number % 7, generateUUIDv4(),
			toDateTime('2026-03-01 00:00:00', 'UTC') + number * 3600, 0, if(number % 3 = 0, '{"$actor":1}', '{}'), number + 1
			FROM numbers(?) WHERE number >= ?`, to, from); err != nil {
			t.Fatal(err)
		}
	}
	// rowsOf counts the rows of a one-column query by their text: every
	// column of a row, so the copy and events compare row for row.
	rowsOf := func(sql string) map[string]int {
		t.Helper()
		rows, err := conn.Query(ctx, sql)
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
	const cols = "concat(toString(project_id), '/', distinct_id, '/', event, '/', toString(timestamp), '/', toString(uuid), '/', toString(person_id), '/', toString(seq))"
	check := func(when string) {
		t.Helper()
		got := rowsOf("SELECT " + cols + " FROM events_by_distinct_id")
		want := rowsOf("SELECT " + cols + " FROM events WHERE visitParamHas(properties, '$actor') = 0")
		if len(want) == 0 || !maps.Equal(got, want) {
			t.Fatalf("%s: copy has %d rows, events %d without $actor", when, len(got), len(want))
		}
	}
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
