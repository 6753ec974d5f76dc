package ingest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestNATSRestartLosesNoMessage: the NATS server restarted while the
// ingester folds small batches. The client loses messages in flight (and
// drops some as a slow consumer while it reconnects); JetStream does not
// deliver them again to a consumer that acknowledges nothing. The
// ingester must notice the hole and fold every event, in order:
// the state equals an uninterrupted run with the default batch size.
func TestNATSRestartLosesNoMessage(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(13, 12000, 400))
	ref := testenv.ClickHouse(t)
	cfg := testConfig("reference")
	cfg.BatchSize = DefaultConfig().BatchSize
	runUntil(t, cfg, n.JS, ref, last)
	want := testenv.Snapshot(t, ref)

	store := testenv.ClickHouse(t)
	cfg = testConfig("restarted")
	cfg.BatchSize, cfg.BatchWait = 150, 5*time.Millisecond
	cancel, done := startIngester(t, cfg, n.JS, store)
	testenv.WaitCommitted(t, store, cfg.Consumer, last/4, time.Minute)
	n.ShutdownServer()
	time.Sleep(time.Second)
	n.StartServer(t)
	testenv.WaitCommitted(t, store, cfg.Consumer, last, time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("state after a NATS restart differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}

// markerStore records the range of every batch the ingester commits.
type markerStore struct {
	*chstore.Store
	mu      sync.Mutex
	batches [][2]uint64
}

func (s *markerStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	err := s.Store.WriteBatch(ctx, events, b, m)
	if err == nil {
		s.mu.Lock()
		s.batches = append(s.batches, [2]uint64{m.FirstSeq, m.LastSeq})
		s.mu.Unlock()
	}
	return err
}

func (s *markerStore) ranges() [][2]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// TestCaughtUpBatchIsFlushedAtOnce: a batch closes when the stream
// has nothing more for the consumer, not when BatchWait runs out. An API
// write reaching an idle ingester is folded at once, and a backlog still
// goes in one batch. BatchWait is an hour here, so every commit below
// can only come from the caught-up rule (collect, pending.last): a batch
// that waited for BatchWait would never be committed within the test.
func TestCaughtUpBatchIsFlushedAtOnce(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := &markerStore{Store: testenv.ClickHouse(t)}
	cfg := testConfig("idle")
	cfg.BatchSize, cfg.BatchWait = DefaultConfig().BatchSize, time.Hour
	cfg.ShutdownGrace = 50 * time.Millisecond

	// A backlog waiting at start: one batch, closed at its last message
	// (the first 49 arrive with messages pending behind them).
	backlog := make([]string, 50)
	for i := range backlog {
		backlog[i] = fmt.Sprintf(`{"event":"$pageview","distinct_id":"d%d","$set":{"n":%d}}`, i%7, i)
	}
	publish(t, n.JS, 1, backlog)
	cancel, done := startIngester(t, cfg, n.JS, store)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitCommitted(t, store.Store, cfg.Consumer, 50, 30*time.Second)

	// Then lone writes to an idle ingester, as the API's PATCHes come:
	// each is its own batch, committed without waiting for BatchWait.
	for seq := uint64(51); seq <= 53; seq++ {
		// A project of its own: publish derives the message id from
		// the project and the index, and the stream drops repeats.
		publish(t, n.JS, seq, []string{fmt.Sprintf(`{"event":"$set","distinct_id":"d1","$set":{"mark":%d}}`, seq)})
		testenv.WaitCommitted(t, store.Store, cfg.Consumer, seq, 30*time.Second)
	}
	want := [][2]uint64{{1, 50}, {51, 51}, {52, 52}, {53, 53}}
	if got := store.ranges(); !slices.Equal(got, want) {
		t.Fatalf("batches committed %v, want %v", got, want)
	}
}

// TestLostTailIsFolded: the client loses the last messages of the stream
// on their first delivery (as a full buffer drops them: "slow consumer"),
// so no later delivery shows the hole, and the consumer, which
// acknowledges nothing, never delivers them again. The last message
// received said the stream held more, so after StallWait the ingester
// recreates the consumer and folds them.
func TestLostTailIsFolded(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(19, 600, 50))
	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)

	store := testenv.ClickHouse(t)
	stop := startLossy(t, n.JS, store, 500*time.Millisecond, func(seq uint64) bool { return seq+20 > last })
	testenv.WaitCommitted(t, store, "lossy", last, time.Minute)
	if dropped := stop(); dropped != 20 {
		t.Fatalf("dropped %d deliveries, want the last 20", dropped)
	}
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after a lost tail differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestLostBurstAfterCatchingUpIsFolded: the ingester has folded all the
// stream held (the last message said nothing more was pending); then
// the client loses a whole burst on its first delivery. No message shows
// a hole or a pending count and the consumer never delivers the burst
// again: the ingester must learn it from the consumer's count of
// deliveries, and fold the burst.
func TestLostBurstAfterCatchingUpIsFolded(t *testing.T) {
	n := testenv.StartNATS(t, "")
	msgs := testenv.Workload(23, 400, 40)
	first := testenv.PublishWorkload(t, n.JS, 0, msgs[:380])

	store := testenv.ClickHouse(t)
	stop := startLossy(t, n.JS, store, 300*time.Millisecond, func(seq uint64) bool { return seq > first })
	testenv.WaitCommitted(t, store, "lossy", first, time.Minute)
	last := testenv.PublishWorkload(t, n.JS, 380, msgs[380:])
	testenv.WaitCommitted(t, store, "lossy", last, time.Minute)
	if dropped := stop(); dropped != 20 {
		t.Fatalf("dropped %d deliveries, want the burst's 20", dropped)
	}
	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after a lost burst differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}

// startLossy runs the ingester "lossy" whose client loses each message
// that lose picks on its first delivery, as a full buffer drops it
// ("slow consumer"). stop ends it and returns the number lost.
func startLossy(t *testing.T, js jetstream.JetStream, store Store, stallWait time.Duration, lose func(seq uint64) bool) (stop func() int) {
	t.Helper()
	cfg := testConfig("lossy")
	cfg.StallWait = stallWait
	ing, err := New(cfg, js, store, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dropped := map[uint64]bool{}
	ing.dropDelivery = func(seq uint64) bool {
		mu.Lock()
		defer mu.Unlock()
		if !lose(seq) || dropped[seq] {
			return false
		}
		dropped[seq] = true
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	return func() int {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return len(dropped)
	}
}
