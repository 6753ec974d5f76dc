//go:build chdb

package portability

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
)

// TestMigrationsOnBothVersions applies every migration to an empty
// database of ClickHouse 18.16 and of current ClickHouse, then once more
// (nothing left to run), then every one again over the migrated tables,
// as after a run interrupted before its record: each must succeed. The
// two databases must end with the same tables and columns.
func TestMigrationsOnBothVersions(t *testing.T) {
	ctx := context.Background()
	all, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	const db = "portability_migrations"
	engines := []engine{newServer(t), newInProcess(t)}
	schemas := make([]string, len(engines))
	for i, e := range engines {
		if _, err := e.run(statement{query: "CREATE DATABASE " + ident(db)}); err != nil {
			t.Fatalf("%s: %v", e.name(), err)
		}
		tg := target{e: e, db: db}
		ran, err := chstore.ApplyMigrations(ctx, tg)
		if err != nil {
			t.Fatalf("%s, from empty: %v", e.name(), err)
		}
		if len(ran) != len(all) {
			t.Fatalf("%s: ran %d of %d migrations from empty", e.name(), len(ran), len(all))
		}
		if ran, err := chstore.ApplyMigrations(ctx, tg); err != nil || len(ran) != 0 {
			t.Fatalf("%s, migrated: ran %d, %v; want none", e.name(), len(ran), err)
		}
		if _, err := e.run(statement{db: db, query: "TRUNCATE TABLE schema_migrations"}); err != nil {
			t.Fatal(err)
		}
		if ran, err := chstore.ApplyMigrations(ctx, tg); err != nil || len(ran) != len(all) {
			t.Fatalf("%s, every migration again over its own tables: ran %d of %d, %v", e.name(), len(ran), len(all), err)
		}
		schemas[i], err = e.run(statement{query: "SELECT table, name, type, default_kind, default_expression FROM system.columns WHERE database = " +
			quote(db) + " ORDER BY table, name"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d migrations applied from empty, and again", e.name(), len(all))
	}
	if schemas[0] != schemas[1] {
		t.Errorf("the migrated columns differ:\n%s:\n%s\n%s:\n%s", engines[0].name(), schemas[0], engines[1].name(), schemas[1])
	}
}

// TestNewestTestedIsThisEngine: chstore.NewestTested, which the docs and
// docker-compose.yml's pin are held to, is the engine these tests run.
func TestNewestTestedIsThisEngine(t *testing.T) {
	e := newInProcess(t)
	v, err := chstore.ParseVersion(e.version)
	if err != nil {
		t.Fatal(err)
	}
	if v != chstore.NewestTested {
		t.Errorf("chstore.NewestTested is %v, the engine tested is %v: update it and docs/operations.md", chstore.NewestTested, v)
	}
}
