package ingest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// gatedStore holds the first fold that loads distinct id gate until the
// test opens it: the batch being folded is then known, and the test can
// publish a command while it is in hand.
type gatedStore struct {
	*chstore.Store
	gate    string
	entered chan struct{}
	open    chan struct{}
}

func (s *gatedStore) LoadDistinctIDs(ctx context.Context, projectID uint64, ids []string) (map[string]fold.DistinctIDRow, error) {
	if slices.Contains(ids, s.gate) {
		select {
		case s.entered <- struct{}{}:
			<-s.open
		default: // let go already
		}
	}
	return s.Store.LoadDistinctIDs(ctx, projectID, ids)
}

// TestWriteLaneCommitsABatchOfLanedCommandsOnly: the command that ends the
// stream is taken by the lane after the batch before it, so the main
// consumer delivers it alone, in a batch of nothing but commands the lane
// folded ahead. That batch is committed too (its marker spans the
// command): the commit point reaches the end of the stream without more
// traffic (before a8bf1fc it stayed one below until other messages came,
// and a deleter waiting on a laned DELETE's sequence waited with it).
//
// Deterministic: the batch of event b is held inside its fold until the
// lane's consumer has read the command published meanwhile, so the lane
// takes it after b, and the main consumer delivers it after b's batch.
func TestWriteLaneCommitsABatchOfLanedCommandsOnly(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	gated := &gatedStore{Store: store, gate: "b", entered: make(chan struct{}), open: make(chan struct{})}
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	a, err := testenv.Publish(ctx, n.JS, 1, testenv.Message{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}, uuid.NewString(), ts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := laneConfig("laned", true)
	ing, err := New(cfg, n.JS, gated, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ing.Run(runCtx) }()
	testenv.WaitCommitted(t, store, cfg.Consumer, a.Sequence, time.Minute)

	b, err := testenv.Publish(ctx, n.JS, 1, testenv.Message{Body: `{"event":"e","distinct_id":"b"}`}, uuid.NewString(), ts.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-gated.entered:
	case <-time.After(time.Minute):
		t.Fatal("the batch of b was not folded")
	}
	c, err := testenv.Publish(ctx, n.JS, 1, testenv.Message{
		Body:    `{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		Command: true}, uuid.NewString(), ts.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The lane was started before this fold began (the channel orders
	// the read of ing.lane after it); newest is its reader's atomic.
	testenv.WaitFor(t, time.Minute, "the lane reads the command", func() (bool, error) {
		return ing.lane.newest.Load() >= c.Sequence, nil
	})
	close(gated.open)

	testenv.WaitCommitted(t, store, cfg.Consumer, c.Sequence, 30*time.Second)
	if got := laneRecords(t, n.JS); got != 1 {
		t.Fatalf("%d lane records; want 1 (the command taken after b, seq %d)", got, b.Sequence)
	}
	p, err := store.GetPerson(ctx, 1, a.Sequence)
	if err != nil || fmt.Sprint(p.Properties["x"]) != "2" {
		t.Fatalf("person a: %v, %v; want x = 2", p, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rebuilt := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, rebuilt, c.Sequence)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store); got != want {
		t.Fatalf("a rebuild differs from the laned run:\n%s", testenv.FirstDiff(got, want))
	}
}
