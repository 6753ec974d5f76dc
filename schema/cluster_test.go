package schema_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// local rewrites a statement of the cluster DDL for the test server,
// in database db. The Distributed tables stay: the test server defines a
// one-shard cluster personhub of itself (pkg/chlocal).
func local(st, db string) string {
	st = strings.ReplaceAll(testenv.WithoutReplication(st), "personhub.", db+".")
	return strings.ReplaceAll(st, "Distributed(personhub, personhub,", "Distributed(personhub, "+db+",")
}

// table is what must agree between a table of the migrations and its
// counterpart of the cluster DDL.
type table struct {
	engine, partition, sorting, columns string
}

func tables(t *testing.T, st *chstore.Store, db string) map[string]table {
	t.Helper()
	ctx := context.Background()
	rows, err := st.Conn().Query(ctx, `SELECT name, engine, engine_full, partition_key, sorting_key, create_table_query FROM system.tables WHERE database = ?`, db)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]table{}
	for rows.Next() {
		var name, engine, full, part, sort, create string
		if err := rows.Scan(&name, &engine, &full, &part, &sort, &create); err != nil {
			t.Fatal(err)
		}
		if engine == "MaterializedView" {
			// With its query, so that a migration replacing a view
			// of the cluster DDL (over events_local) by one over the
			// Distributed table shows.
			_, query, _ := strings.Cut(create, " AS SELECT ")
			out[name] = table{engine: engine + " AS SELECT " + query}
			continue
		}
		// The engine with its arguments and settings (index_granularity).
		engine = full[:strings.Index(full+" PARTITION BY", " PARTITION BY")]
		engine, _, _ = strings.Cut(engine, " ORDER BY")
		_, settings, _ := strings.Cut(full, " SETTINGS ")
		out[name] = table{engine: engine + " " + settings, partition: part, sorting: sort}
	}
	rows.Close()
	// In definition order (18.16's system.columns has no position).
	cols, err := st.Conn().Query(ctx, `SELECT table, name, type FROM system.columns WHERE database = ?`, db)
	if err != nil {
		t.Fatal(err)
	}
	defer cols.Close()
	for cols.Next() {
		var tbl, name, typ string
		if err := cols.Scan(&tbl, &name, &typ); err != nil {
			t.Fatal(err)
		}
		tb := out[tbl]
		tb.columns += name + " " + typ + ", "
		out[tbl] = tb
	}
	return out
}

// TestClusterDDL: the cluster DDL of docs/operations.md runs (on 18.16
// here, with the Replicated engines as their plain counterparts) and has,
// for every table the migrations make, a <table>_local with the same
// columns, engine and keys, and a Distributed table <table> over it,
// sharded as the doc says; nothing else. The binaries then accept the
// database: `ingester migrate` records the migrations without error.
func TestClusterDDL(t *testing.T) {
	ref := testenv.ClickHouse(t)
	testenv.RequireClusters(t, ref)
	ctx := context.Background()
	var refDB string
	if err := ref.Conn().QueryRow(ctx, "SELECT currentDatabase()").Scan(&refDB); err != nil {
		t.Fatal(err)
	}
	db := refDB + "_cluster"
	if err := ref.Conn().Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ref.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	shards := map[string]string{}
	shardKey := regexp.MustCompile(`Distributed\(personhub, personhub, (\w+)_local, (.+)\)$`)
	for _, st := range testenv.ClusterDDL(t) {
		if m := shardKey.FindStringSubmatch(st); m != nil {
			shards[m[1]] = m[2]
		}
		if err := ref.Conn().Exec(ctx, local(st, db)); err != nil {
			t.Fatalf("%v\n%s", err, local(st, db))
		}
	}

	want, got := tables(t, ref, refDB), tables(t, ref, db)
	for name, w := range want {
		if strings.HasPrefix(w.engine, "MaterializedView") {
			// A view sits on each shard over the local tables, under
			// its own name (the doc's DDL); its target is checked as a
			// table.
			if v, ok := got[name]; !ok || !strings.HasPrefix(v.engine, "MaterializedView") {
				t.Errorf("view %s is not in the cluster DDL as a materialized view", name)
			}
			continue
		}
		l, ok := got[name+"_local"]
		switch {
		case !ok:
			t.Errorf("table %s has no %s_local in the cluster DDL", name, name)
		case l != w:
			t.Errorf("%s_local differs from %s:\n got %+v\nwant %+v", name, name, l, w)
		}
		d, ok := got[name]
		wantKey := "project_id"
		if name == "ingest_batches" || name == "ingest_intents" || name == "ingest_repairs" {
			wantKey = "cityHash64(consumer)"
		} else if name == "schema_migrations" {
			wantKey = "version"
		}
		switch {
		case !ok:
			t.Errorf("table %s has no Distributed table in the cluster DDL", name)
		case !strings.HasPrefix(d.engine, "Distributed(personhub, "+db+", "+name+"_local"):
			t.Errorf("%s: engine %s, want Distributed over %s_local", name, d.engine, name)
		case d.columns != w.columns:
			t.Errorf("%s: Distributed columns %s, want %s", name, d.columns, w.columns)
		case shards[name] != wantKey:
			t.Errorf("%s sharded by %q, want %q", name, shards[name], wantKey)
		}
	}
	for name := range got {
		if _, ok := want[strings.TrimSuffix(name, "_local")]; !ok {
			t.Errorf("the cluster DDL makes %s, which no migration does", name)
		}
	}

	addr := testenv.ClickHouseAddr(t)
	st, err := chstore.Open(ctx, chstore.Config{Addr: addr, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("ingester migrate on the cluster tables: %v", err)
	}
	if err := st.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tables(t, ref, db); fmt.Sprint(after) != fmt.Sprint(got) {
		t.Errorf("ingester migrate changed the cluster tables")
	}
}
