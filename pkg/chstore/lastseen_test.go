package chstore_test

import (
	"context"
	"maps"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// checkLastSeen fails unless person_last_seen gives each distinct id the
// newest time, to the millisecond, of its events without $actor.
func checkLastSeen(t *testing.T, conn driver.Conn, when string) {
	t.Helper()
	got := rowsOf(t, conn, "SELECT concat(toString(project_id), '/', distinct_id, '/', toString(max(seen_ms))) FROM person_last_seen GROUP BY project_id, distinct_id")
	want := rowsOf(t, conn, "SELECT concat(toString(project_id), '/', distinct_id, '/', toString(max(toUInt64(timestamp) * 1000 + timestamp_ms))) "+
		"FROM events WHERE visitParamHas(properties, '$actor') = 0 GROUP BY project_id, distinct_id")
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("%s: person_last_seen %v, want from events %v", when, got, want)
	}
}

// TestPersonLastSeenBackfill: migration 0020's view keeps the newest
// behaviour event of each distinct id inserted into events (the API's
// $actor commands, a third of insertSpread's and the newest of some ids,
// left out), and its backfill gives the events stored before it; the
// migration runs again with the same result.
func TestPersonLastSeenBackfill(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	conn := store.Conn()
	insertSpread(t, conn, 0, 300)
	checkLastSeen(t, conn, "after inserts through the view")
	if err := conn.Exec(ctx, "TRUNCATE TABLE person_last_seen"); err != nil {
		t.Fatal(err)
	}
	insertSpread(t, conn, 300, 310) // the table now has the newest rows only
	migrations, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	for _, m := range migrations {
		if m.Version != 20 {
			continue
		}
		ran = true
		for range 2 {
			for _, st := range m.Statements {
				if err := conn.Exec(ctx, st); err != nil {
					t.Fatalf("%s: %v", m.Name, err)
				}
			}
		}
	}
	if !ran {
		t.Fatal("no migration 20")
	}
	checkLastSeen(t, conn, "after the backfill, twice")
}
