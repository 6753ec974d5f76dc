package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestClusterSurvivesTheLossOfANode: on a 3-node JetStream cluster with
// the stream, its consumers and the ingesters' buckets at 3 replicas,
// three partition ingesters fold a workload while the stream's leader
// is shut down in the middle of it and publishing goes on. Nothing is
// lost or doubled: the stream holds each message once, at the sequence a
// single server gives it, and ClickHouse ends with exactly the state of
// one ingester on one server.
func TestClusterSurvivesTheLossOfANode(t *testing.T) {
	msgs := testenv.Workload(47, 2400, 200)
	want := reference(t, msgs)

	ctx := context.Background()
	c := testenv.StartCluster(t, 3)
	streams := stream.Config{Replicas: 3, Partitions: 3}
	if err := stream.Ensure(ctx, c.JS, streams); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	half := len(msgs) / 2
	first := publishSpreadRetrying(t, c.JS, 0, msgs[:half], 3, 30*time.Second)

	// The API's watchers of the partitions' watermarks, started before
	// the loss, must follow them after it.
	kv, err := progress.OpenReplicated(ctx, c.JS, 3)
	if err != nil {
		t.Fatal(err)
	}
	var watchers []*progress.Watcher
	for k := range 3 {
		w, err := progress.Watch(ctx, kv, stream.ConsumerName("cluster", k, 3))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watchers = append(watchers, w)
	}

	var cancels []context.CancelFunc
	var dones []<-chan error
	for k := range 3 {
		cfg := partitioned("cluster", k, 3)
		cfg.Streams = streams
		// The default TTL: a leader election on the lease bucket takes
		// seconds, and a lease that expires meanwhile stops its holder.
		cfg.LeaseTTL = 10 * time.Second
		// The lane off: the reference is the log's order on one server;
		// with the lane the ingesters would fold commands published
		// during the run ahead (recorded, TestWriteLanePartitions), which
		// a fold on another stream cannot follow.
		cfg.WriteLane = false
		cancel, done := startIngester(t, cfg, c.JS, store)
		cancels, dones = append(cancels, cancel), append(dones, done)
	}
	// running fails the test when an ingester ended.
	running := func() {
		for k, done := range dones {
			select {
			case err := <-done:
				t.Fatalf("partition %d ended: %v", k, err)
			default:
			}
		}
	}
	// Mid-ingest: the first batches are committed, most are not.
	testenv.WaitFor(t, time.Minute, "a first commit", func() (bool, error) {
		running()
		for k := range 3 {
			if seq, err := store.LastCommitted(ctx, stream.ConsumerName("cluster", k, 3)); seq > 0 || err != nil {
				return err == nil, err
			}
		}
		return false, nil
	})
	leader := c.StreamLeader(t, stream.Events)
	c.Shutdown(leader)
	t.Logf("shut down %s, the leader of %s", c.Name(leader), stream.Events)

	rest := publishSpreadRetrying(t, c.JS, half, msgs[half:], 3, 30*time.Second)
	for k := range 3 {
		rest[k] = max(rest[k], first[k])
		name := stream.ConsumerName("cluster", k, 3)
		// Up to three minutes: after the loss the stream and the consumers
		// elect new leaders and the ingesters resume from their commits,
		// which on a loaded 2-core machine (go test runs two packages at
		// once) took over a minute in one CI run; what is checked is the
		// end state below, not how fast it comes.
		testenv.WaitFor(t, 3*time.Minute, name+" committing its last message", func() (bool, error) {
			running()
			seq, err := store.LastCommitted(ctx, name)
			return seq >= rest[k], err
		})
	}
	for k, cancel := range cancels {
		cancel()
		if err := <-dones[k]; err != nil {
			t.Errorf("partition %d: %v", k, err)
		}
	}

	s, err := c.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.State; st.Msgs != uint64(len(msgs)) || st.LastSeq != uint64(len(msgs)) || rest[3] != uint64(len(msgs)) {
		t.Fatalf("stream holds %d messages through seq %d (last ack %d), want %d", st.Msgs, st.LastSeq, rest[3], len(msgs))
	}
	if info.Cluster == nil || info.Cluster.Leader == c.Name(leader) {
		t.Fatalf("stream leader after the loss: %+v", info.Cluster)
	}
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("after losing a node:\n%s", testenv.FirstDiff(got, want))
	}
	for k, w := range watchers {
		if err := w.Wait(ctx, rest[k], 10*time.Second); err != nil {
			t.Errorf("watermark of partition %d, watched since before the loss: %v (at %d, want %d)", k, err, w.Seq(), rest[k])
		}
	}
}

// TestUnavailable: what the start retries (a cluster without a leader)
// and what stops it.
func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("consumer x: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{context.Canceled, false},
		{jetstream.ErrStreamNotFound, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10052, Description: "stream configuration update can not change ..."}, false},
		{errors.New("the stream is partitioned 3 ways and this ingester is configured for 4"), false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// personEvents is a join of the analysis routes' shape (events with
// their distinct ids' overrides, then persons, all FINAL) counted per
// project and person.
const personEvents = `SELECT project_id, pid, count() FROM (
    SELECT project_id, if(o_pid = 0, person_id, o_pid) AS pid FROM events
    ANY LEFT JOIN (SELECT project_id, distinct_id, person_id AS o_pid, is_deleted AS o_deleted FROM person_distinct_id_overrides FINAL) AS overrides USING project_id, distinct_id
    WHERE o_deleted = 0
) AS attributed ALL INNER JOIN (SELECT project_id, id AS pid FROM persons FINAL WHERE is_deleted = 0) AS live USING project_id, pid
GROUP BY project_id, pid ORDER BY project_id, pid`

// personEventCounts runs personEvents, on the local tables of database
// db when given.
func personEventCounts(t *testing.T, store *chstore.Store, db string) []string {
	t.Helper()
	q := personEvents
	if db != "" {
		q = regexp.MustCompile(`FROM (\w+)`).ReplaceAllString(q, "FROM "+db+".${1}_local")
	}
	rows, err := store.Conn().Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var project, pid, n uint64
		if err := rows.Scan(&project, &pid, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %d %d", project, pid, n))
	}
	return out
}

// TestShardedClickHouseEqualsOneServer: three partition ingesters write
// through the Distributed tables of docs/operations.md's cluster DDL,
// over two shards (projects split between them by project_id), as the
// service's cluster user; every table read back through them with FINAL,
// and a join of the analysis routes' shape, equal one ingester's on one
// server's plain tables.
func TestShardedClickHouseEqualsOneServer(t *testing.T) {
	msgs := testenv.Workload(53, 3000, 200)
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	// From message 1: person ids (stream sequences) then differ in parity
	// from their projects, so a layout that shards persons by id instead
	// of project puts them on the other shard than their events.
	last := publishSpread(t, n.JS, 1, msgs, 1)
	single := testenv.ClickHouse(t)
	runUntil(t, testConfig("single"), n.JS, single, last[1])

	sharded := testenv.ShardedClickHouse(t)
	// A stream of its own, partitioned 3 ways, with the same messages.
	m := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), m.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	parts := publishSpread(t, m.JS, 1, msgs, 3)
	runPartitions(t, m.JS, sharded, "sharded", 3, parts)
	if got, want := testenv.Snapshot(t, sharded), testenv.Snapshot(t, single); got != want {
		t.Fatalf("sharded tables differ from one server's:\n%s", testenv.FirstDiff(got, want))
	}
	// distributed_product_mode = 'local' runs a join on each shard over
	// its local tables; co-sharded by project, the union of those is
	// the join over everything. (Run per shard database here: on this
	// one server the shards' local tables are in databases of their own,
	// which the rewritten subqueries of a Distributed query do not name.)
	want := personEventCounts(t, single, "")
	var got []string
	for _, db := range []string{"personhub_shard1", "personhub_shard2"} {
		got = append(got, personEventCounts(t, single, db)...)
	}
	slices.SortFunc(got, cmpRow)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) == 0 {
		t.Fatalf("the join per shard differs from one server's:\n%s", testenv.FirstDiff(strings.Join(got, "\n"), strings.Join(want, "\n")))
	}
	// Both shards hold rows: the test spans shards.
	for _, db := range []string{"personhub_shard1", "personhub_shard2"} {
		var rows uint64
		if err := single.Conn().QueryRow(context.Background(), "SELECT count() FROM "+db+".events_local").Scan(&rows); err != nil || rows == 0 {
			t.Fatalf("%s.events_local holds %d rows (%v)", db, rows, err)
		}
	}
}

// cmpRow orders "project pid n" rows as personEvents does.
func cmpRow(a, b string) int {
	var pa, ia, pb, ib uint64
	fmt.Sscan(a, &pa, &ia)
	fmt.Sscan(b, &pb, &ib)
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	return cmp.Compare(ia, ib)
}
