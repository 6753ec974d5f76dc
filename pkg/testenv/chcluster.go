package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
)

// The ClickHouse cluster layout of docs/operations.md ("On a ClickHouse
// cluster") on the one test server: no ZooKeeper here, so no ON CLUSTER
// and the plain engines for the Replicated ones; the Distributed tables
// are real, over clusters of the test server itself (pkg/chlocal's
// configuration).

// ClusterDDL returns the statements of the cluster DDL in
// docs/operations.md (the section's first sql block), CREATE DATABASE
// left out.
func ClusterDDL(t testing.TB) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### On a ClickHouse cluster\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "On a ClickHouse cluster" section`)
	}
	_, block, ok := strings.Cut(section, "```sql\n")
	if !ok {
		t.Fatal("the section has no sql block")
	}
	block, _, _ = strings.Cut(block, "```")
	var out []string
	for _, st := range strings.Split(block, ";\n") {
		if st = strings.TrimSpace(st); st != "" && !strings.HasPrefix(st, "CREATE DATABASE") {
			out = append(out, st)
		}
	}
	return out
}

// replicatedEngine matches a Replicated engine's path and replica
// arguments.
var replicatedEngine = regexp.MustCompile(`Replicated(\w*MergeTree)\('[^']*', '\{replica\}'(, )?`)

// WithoutReplication rewrites a statement of ClusterDDL for one server
// without ZooKeeper: no ON CLUSTER, each Replicated*MergeTree as its
// plain counterpart with the same other arguments.
func WithoutReplication(st string) string {
	st = strings.ReplaceAll(st, " ON CLUSTER personhub", "")
	return strings.ReplaceAll(replicatedEngine.ReplaceAllString(st, "${1}("), "MergeTree()", "MergeTree")
}

// RequireClusters fails the test unless the server defines the clusters
// and the user of pkg/chlocal's configuration: a server given by
// CLICKHOUSE_ADDR needs them too.
func RequireClusters(t testing.TB, st *chstore.Store) {
	t.Helper()
	var n uint64
	err := st.Conn().QueryRow(context.Background(),
		"SELECT count() FROM (SELECT DISTINCT cluster FROM system.clusters WHERE cluster IN ('personhub', 'personhub_two_shards'))").Scan(&n)
	if err != nil || n != 2 {
		t.Fatalf("the ClickHouse server lacks the clusters personhub and personhub_two_shards (%v): give a server of CLICKHOUSE_ADDR the remote_servers and the user personhub_cluster of pkg/chlocal's configuration", err)
	}
}

// Shard databases of the two-shard cluster personhub_two_shards: the
// test server's configuration names them (a replica's default database),
// so one test at a time per server uses them.
var shardDatabases = []string{"personhub_shard1", "personhub_shard2"}

// clusterView finds the name a cluster DDL statement gives a materialized
// view.
var clusterView = regexp.MustCompile(`MATERIALIZED VIEW IF NOT EXISTS personhub\.(\w+)`)

// ShardedClickHouse returns a store on a database whose tables are the
// cluster DDL's Distributed tables over two shards (the local tables in
// personhub_shard1 and personhub_shard2), as the user personhub_cluster
// with the settings docs/operations.md gives the service; `ingester
// migrate` has recorded the migrations. Everything is dropped when the
// test ends.
func ShardedClickHouse(t testing.TB) *chstore.Store {
	t.Helper()
	addr := ClickHouseAddr(t)
	name := fmt.Sprintf("test_%d_%d_sharded", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := chstore.Open(ctx, chstore.Config{Addr: addr, Database: "default"})
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	RequireClusters(t, admin)
	exec := func(ctx context.Context, st string) {
		if err := admin.Conn().Exec(ctx, st); err != nil {
			t.Fatalf("%v\n%s", err, st)
		}
	}
	t.Cleanup(func() {
		for _, db := range append([]string{name}, shardDatabases...) {
			_ = admin.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
		}
	})
	for _, db := range append([]string{name}, shardDatabases...) {
		exec(ctx, "DROP DATABASE IF EXISTS "+db)
		exec(ctx, "CREATE DATABASE "+db)
	}
	for _, st := range ClusterDDL(t) {
		st = WithoutReplication(st)
		if !strings.Contains(st, "ENGINE = Distributed(") {
			for _, db := range shardDatabases {
				exec(ctx, strings.ReplaceAll(st, "personhub.", db+"."))
			}
			// On a cluster a view lives in the database of the
			// Distributed tables, so the ingester's migrations find
			// it and create none. Here the shards are databases of
			// their own: without its name in ours, a migration would
			// create the view again on the Distributed events, and
			// every insert would reach the view's table twice.
			if m := clusterView.FindStringSubmatch(st); m != nil {
				exec(ctx, "CREATE VIEW "+name+"."+m[1]+" AS SELECT 1")
			}
			continue
		}
		// personhub.<t> AS personhub.<t>_local: the columns of shard 1's;
		// the shards from the replicas' default databases ('').
		st = strings.Replace(st, "personhub.", name+".", 1)
		st = strings.Replace(st, "personhub.", shardDatabases[0]+".", 1)
		exec(ctx, strings.Replace(st, "Distributed(personhub, personhub,", "Distributed(personhub_two_shards, '',", 1))
	}
	st, err := chstore.Open(ctx, chstore.Config{Addr: addr, Database: name, Username: "personhub_cluster"})
	if err != nil {
		t.Fatalf("open clickhouse as personhub_cluster: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("ingester migrate on the cluster tables: %v", err)
	}
	return st
}
