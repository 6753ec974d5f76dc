package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

	var cancels []context.CancelFunc
	var dones []<-chan error
	for k := range 3 {
		cfg := partitioned("cluster", k, 3)
		cfg.Streams = streams
		// The default TTL: a leader election on the lease bucket takes
		// seconds, and a lease that expires meanwhile stops its holder.
		cfg.LeaseTTL = 10 * time.Second
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
	testenv.WaitFor(t, 30*time.Second, "a first commit", func() (bool, error) {
		running()
		seq, err := store.LastCommitted(ctx, stream.ConsumerName("cluster", 0, 3))
		return seq > 0, err
	})
	leader := c.StreamLeader(t, stream.Events)
	c.Shutdown(leader)
	t.Logf("shut down %s, the leader of %s", c.Name(leader), stream.Events)

	rest := publishSpreadRetrying(t, c.JS, half, msgs[half:], 3, 30*time.Second)
	for k := range 3 {
		rest[k] = max(rest[k], first[k])
		name := stream.ConsumerName("cluster", k, 3)
		testenv.WaitFor(t, 45*time.Second, name+" committing its last message", func() (bool, error) {
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
	// The watermarks survived on the remaining replicas.
	kv, err := progress.Open(ctx, c.JS)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		w, err := progress.Watch(ctx, kv, stream.ConsumerName("cluster", k, 3))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Wait(ctx, rest[k], 10*time.Second); err != nil {
			t.Errorf("watermark of partition %d: %v (at %d, want %d)", k, err, w.Seq(), rest[k])
		}
		w.Stop()
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
