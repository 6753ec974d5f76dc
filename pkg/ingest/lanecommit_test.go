package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// gatedStore holds the fold that loads distinct id gate (set by arm)
// until the test opens it: the batch being folded is then known, and the
// test can publish a command while it is in hand. A batch committing
// through failFrom or beyond fails, writing nothing.
type gatedStore struct {
	*chstore.Store
	mu       sync.Mutex
	gate     string
	entered  chan struct{}
	open     chan struct{}
	failFrom atomic.Uint64
}

func newGatedStore(s *chstore.Store) *gatedStore { return &gatedStore{Store: s} }

// arm sets the gate on id: entered is closed when a fold loads it, and the
// fold goes on once open is closed.
func (s *gatedStore) arm(id string) (entered, open chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.entered, s.open = id, make(chan struct{}), make(chan struct{})
	return s.entered, s.open
}

func (s *gatedStore) LoadDistinctIDs(ctx context.Context, projectID uint64, ids []string) (map[string]fold.DistinctIDRow, error) {
	s.mu.Lock()
	var open chan struct{}
	if s.gate != "" && slices.Contains(ids, s.gate) {
		s.gate, open = "", s.open
		close(s.entered)
	}
	s.mu.Unlock()
	if open != nil {
		<-open
	}
	return s.Store.LoadDistinctIDs(ctx, projectID, ids)
}

func (s *gatedStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	if f := s.failFrom.Load(); f > 0 && m.LastSeq >= f {
		return errors.New("failing from seq " + fmt.Sprint(f))
	}
	return s.Store.WriteBatch(ctx, events, b, m)
}

// laneRound publishes event b<r> and, while its batch is held in its fold,
// a command setting x = r on distinct id a; once the running lane has read
// the command the fold goes on, and the lane takes the command after b<r>.
// It returns b<r>'s and the command's sequences.
func laneRound(t *testing.T, ing *Ingester, gated *gatedStore, js jetstream.JetStream, r int) (b, c uint64) {
	t.Helper()
	ctx := context.Background()
	ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(2*r+1) * time.Second)
	id := fmt.Sprintf("b%d", r)
	entered, open := gated.arm(id)
	ev, err := testenv.Publish(ctx, js, 1, testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":%q}`, id)}, uuid.NewString(), ts)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatalf("the batch of %s was not folded", id)
	}
	cmd, err := testenv.Publish(ctx, js, 1, testenv.Message{
		Body:    fmt.Sprintf(`{"event":"$set","distinct_id":"a","$set":{"x":%d},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`, r),
		Command: true}, uuid.NewString(), ts.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The lane was started before this fold began (entered orders the
	// read of ing.lane after it); newest is its reader's atomic.
	testenv.WaitFor(t, time.Minute, "the lane reads the command", func() (bool, error) {
		return ing.lane.newest.Load() >= cmd.Sequence, nil
	})
	close(open)
	return ev.Sequence, cmd.Sequence
}

// startGated starts a laned ingester on gated once a's event is published,
// and waits for it to commit it.
func startGated(t *testing.T, js jetstream.JetStream, gated *gatedStore, cfg Config) (*Ingester, context.CancelFunc, <-chan error, uint64) {
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	a, err := testenv.Publish(ctx, js, 1, testenv.Message{Body: `{"event":"e","distinct_id":"a","$set":{"x":-1}}`}, uuid.NewString(),
		time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	ing, err := New(cfg, js, gated, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- ing.Run(runCtx) }()
	testenv.WaitCommitted(t, gated.Store, ing.cfg.Consumer, a.Sequence, time.Minute)
	return ing, cancel, done, a.Sequence
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
	gated := newGatedStore(store)
	cfg := laneConfig("laned", true)
	ing, cancel, done, a := startGated(t, n.JS, gated, cfg)
	b, c := laneRound(t, ing, gated, n.JS, 2)
	testenv.WaitCommitted(t, store, cfg.Consumer, c, 30*time.Second)
	if got := laneRecords(t, n.JS); got != 1 {
		t.Fatalf("%d lane records; want 1 (the command taken after b, seq %d)", got, b)
	}
	p, err := store.GetPerson(ctx, 1, a)
	if err != nil || fmt.Sprint(p.Properties["x"]) != "2" {
		t.Fatalf("person a: %v, %v; want x = 2", p, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rebuilt := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, rebuilt, c)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store); got != want {
		t.Fatalf("a rebuild differs from the laned run:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestWriteLaneStartsFromItsKeptPoint: after many commands went by the
// lane, a restart reads only the records of commands above its commit
// point (here one: the last command, taken after the last event, whose
// own batch failed), not the lane's whole subject, and finishes as a
// rebuild does. A replay into empty tables reads every record and gives
// the same tables, under a new consumer name and under the same name (the
// kept point was made for a commit point the empty tables do not have).
func TestWriteLaneStartsFromItsKeptPoint(t *testing.T) {
	const rounds = 20
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	gated := newGatedStore(store)
	cfg := laneConfig("laned", true)
	cfg.ShutdownGrace = 200 * time.Millisecond
	ing, cancel, done, _ := startGated(t, n.JS, gated, cfg)
	var b, c uint64
	for r := range rounds {
		b, c = laneRound(t, ing, gated, n.JS, r)
		testenv.WaitCommitted(t, store, cfg.Consumer, c, time.Minute)
	}
	// The last round (event c+1, command c+2): the command's own batch
	// fails.
	gated.failFrom.Store(c + 2)
	b, c = laneRound(t, ing, gated, n.JS, rounds)
	testenv.WaitCommitted(t, store, cfg.Consumer, b, time.Minute)
	testenv.WaitFor(t, time.Minute, "the last record", func() (bool, error) { return laneRecords(t, n.JS) == rounds+1, nil })
	cancel()
	<-done // an error: the command's batch is not committed
	if got, _ := store.LastCommitted(context.Background(), cfg.Consumer); got != b {
		t.Fatalf("committed %d before the restart; want %d (the command %d above it)", got, b, c)
	}

	read := func(cfg Config, store *chstore.Store) float64 {
		t.Helper()
		ing, err := New(cfg, n.JS, store, testenv.FailureLog(t), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ing.Run(ctx) }()
		testenv.WaitCommitted(t, store, ing.cfg.Consumer, c, time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return testutil.ToFloat64(ing.metrics.laneRecordsRead)
	}
	if got := read(cfg, store); got != 1 {
		t.Fatalf("the restart read %v lane records of %d; want 1 (the last command's, the only one above its commit point)", got, rounds+1)
	}
	want := testenv.Snapshot(t, store)
	for _, name := range []string{"rebuild", "laned"} {
		rebuilt := testenv.ClickHouse(t)
		if got := read(laneConfig(name, false), rebuilt); got != rounds+1 {
			t.Fatalf("a replay into empty tables as %q read %v lane records; want all %d", name, got, rounds+1)
		}
		if got := testenv.Snapshot(t, rebuilt); got != want {
			t.Fatalf("a replay as %q differs from the laned run:\n%s", name, testenv.FirstDiff(got, want))
		}
	}
}
