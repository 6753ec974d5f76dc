package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// dyingStore is a ClickHouse that dies: after commits successful batches,
// the next write lands (all of its rows, if rows is set) without its
// commit marker, and every write from then on fails, as after the process
// was killed.
type dyingStore struct {
	*chstore.Store
	mu      sync.Mutex
	commits int
	rows    bool
	// orderOnly: the dying write lands person_order alone, as a process
	// killed after that first-stage insert and before the persons leaves
	// it.
	orderOnly bool
	// killRepair: the store dies at the person_order repair instead.
	killRepair bool
	dead       chan struct{}
}

func newDyingStore(s *chstore.Store, commits int, rows bool) *dyingStore {
	return &dyingStore{Store: s, commits: commits, rows: rows, dead: make(chan struct{})}
}

// lockAlive locks the store, or fails once it died.
func (s *dyingStore) lockAlive() error {
	s.mu.Lock()
	select {
	case <-s.dead:
		s.mu.Unlock()
		return errors.New("dead")
	default:
		return nil
	}
}

func (s *dyingStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	if err := s.lockAlive(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.commits > 0 {
		s.commits--
		return s.Store.WriteBatch(ctx, events, b, m)
	}
	defer close(s.dead)
	if s.orderOnly {
		if err := s.Store.WritePersonOrder(ctx, b); err != nil {
			return err
		}
	}
	if s.rows {
		if err := s.Store.WriteRows(ctx, events, b); err != nil {
			return err
		}
	}
	return errors.New("killed before the commit marker")
}

func (s *dyingStore) RepairOrder(ctx context.Context, consumer string, r chstore.OrderRepair, c uint64, mine func(uint64) bool) error {
	if !s.killRepair {
		return s.Store.RepairOrder(ctx, consumer, r, c, mine)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.dead:
	default:
		close(s.dead)
	}
	return errors.New("killed before the repair")
}

// runUntilDead runs an ingester until its store dies, then stops it (the
// batch in hand is abandoned, as a killed process abandons it).
func runUntilDead(t *testing.T, cfg Config, n *testenv.NATS, store *dyingStore) {
	t.Helper()
	runUntilClosed(t, cfg, n, store, store.dead)
}

// runUntilClosed is runUntilDead for any store that closes dead when it
// dies.
func runUntilClosed(t *testing.T, cfg Config, n *testenv.NATS, store Store, dead <-chan struct{}) {
	t.Helper()
	cfg.ShutdownGrace = 50 * time.Millisecond
	cancel, done := startIngester(t, cfg, n.JS, store)
	select {
	case <-dead:
	case err := <-done:
		t.Fatalf("ingester stopped before its store died: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("store did not die")
	}
	cancel()
	<-done // an error: the batch in hand is not committed
}

// TestSecondCrashInsideRefold: a batch of 80 crashes after all its rows
// were written; the next process, with batches of 16, dies right after
// its first commit (which, extended through the crashed rows it read,
// may still end inside the crashed range); a third finishes. The rows the second process
// committed must not be hidden behind the first crash's (only the store
// survives the second crash): the tables equal an uninterrupted run's,
// and events holds one row per message.
//
// The uninterrupted run is a replay of the log after the crashes: the
// restarted processes find commands in their backlog and (the write lane
// on, as by default) fold them ahead, recording where; a replay follows
// the records, a run before them could not.
func TestSecondCrashInsideRefold(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		n, last, store := crashSetup(t, seed, 250, 20)
		cfg := testConfig("crashing")
		// Batches of BatchSize: the sizes set the crashed ranges
		// (grown batches: TestGrownBatchCrashes).
		cfg.BatchSize, cfg.BatchWait, cfg.GrowFor = 80, time.Second, 0
		runUntilDead(t, cfg, n, newDyingStore(store, 1, true))
		cfg.BatchSize = 16
		runUntilDead(t, cfg, n, newDyingStore(store, 1, false))
		runUntil(t, cfg, n.JS, store, last)
		ref := testenv.ClickHouse(t)
		runUntil(t, testConfig("reference"), n.JS, ref, last)
		if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
			t.Fatalf("seed %d: state after two crashes differs from an uninterrupted run:\n%s", seed, testenv.FirstDiff(got, want))
		}
		wantOneRowPerMessage(t, store, ref)
	}
}

// crashSetup publishes a workload and gives a store whose events parts
// are not merged (a second row of a message stays visible).
func crashSetup(t *testing.T, seed int64, events, ids int) (*testenv.NATS, uint64, *chstore.Store) {
	t.Helper()
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(seed, events, ids))
	store := testenv.ClickHouse(t)
	stopMerges(t, store)
	return n, last, store
}

// TestStaleOrderKeyIsRepaired: a crashed attempt folds a batch ending
// after person P's creation (created_at 2021) and lands P's person_order
// key, not P's row; the restart, with a larger batch, folds the creation
// and the merge that moves P's created_at to 2020 together, so it writes
// the 2020 key and tombstones nothing (the store had no row of P). The
// 2021 key stays live unless the repair tombstones it. The second case
// dies at the repair itself, after committing past the crash: the next
// start must still repair from the first crash's commit point.
func TestStaleOrderKeyIsRepaired(t *testing.T) {
	for _, dieAtRepair := range []bool{false, true} {
		n := testenv.StartNATS(t, "")
		publish(t, n.JS, 1, []string{
			`{"event":"e","distinct_id":"anon","timestamp":"2020-01-01T00:00:00Z"}`,                                                   // 1: Q, 2020
			`{"event":"e","distinct_id":"user","timestamp":"2021-01-01T00:00:00Z"}`,                                                   // 2: P, 2021
			`{"event":"$identify","distinct_id":"user","timestamp":"2021-01-02T00:00:00Z","properties":{"$anon_distinct_id":"anon"}}`, // 3: Q into P
		})
		store := testenv.ClickHouse(t)
		cfg := testConfig("crashing")
		// The crashed batch must end after P's creation: not grown.
		cfg.BatchSize, cfg.BatchWait, cfg.GrowFor = 2, time.Second, 0
		crash := newDyingStore(store, 0, false)
		crash.orderOnly = true
		runUntilDead(t, cfg, n, crash)
		if got := liveOrderKeys(t, store); got != 2 {
			t.Fatalf("the crashed attempt left %d live keys, want 2 (P's and Q's)", got)
		}
		cfg.BatchSize = 10
		if dieAtRepair {
			second := newDyingStore(store, 1_000, false)
			second.killRepair = true
			runUntilDead(t, cfg, n, second)
			if c, err := store.LastCommitted(context.Background(), cfg.Consumer); err != nil || c != 3 {
				t.Fatalf("committed %d (%v) before the repair died, want 3", c, err)
			}
		}
		// When the repair was the one to die, the last start has nothing
		// of 1-3 to fold again: it repairs at start (then folds 4).
		publish(t, n.JS, 2, []string{`{"event":"e","distinct_id":"other"}`})
		runUntil(t, cfg, n.JS, store, 4)
		ref := testenv.ClickHouse(t)
		runUntil(t, testConfig("reference"), n.JS, ref, 4)
		if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
			t.Fatalf("die at repair %v: state differs from an uninterrupted run:\n%s", dieAtRepair, testenv.FirstDiff(got, want))
		}
		if got := liveOrderKeys(t, store); got != 2 {
			t.Fatalf("die at repair %v: %d live keys, want 2 (P's and project 2's person)", dieAtRepair, got)
		}
	}
}

// liveOrderKeys counts person_order's keys whose newest row is live.
func liveOrderKeys(t *testing.T, store *chstore.Store) uint64 {
	t.Helper()
	var n uint64
	err := store.Conn().QueryRow(context.Background(), `SELECT count() FROM (SELECT argMax(is_deleted, version) AS d
		FROM person_order GROUP BY project_id, rank, rid) WHERE d = 0`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
