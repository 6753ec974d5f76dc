package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
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
	dead    chan struct{}
}

func newDyingStore(s *chstore.Store, commits int, rows bool) *dyingStore {
	return &dyingStore{Store: s, commits: commits, rows: rows, dead: make(chan struct{})}
}

func (s *dyingStore) WriteBatch(ctx context.Context, events []chstore.EventRow, b fold.Batch, m chstore.BatchMarker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.dead:
		return errors.New("dead")
	default:
	}
	if s.commits > 0 {
		s.commits--
		return s.Store.WriteBatch(ctx, events, b, m)
	}
	defer close(s.dead)
	if s.rows {
		if err := s.Store.WriteRows(ctx, events, b); err != nil {
			return err
		}
	}
	return errors.New("killed before the commit marker")
}

// runUntilDead runs an ingester until its store dies, then stops it (the
// batch in hand is abandoned, as a killed process abandons it).
func runUntilDead(t *testing.T, cfg Config, n *testenv.NATS, store *dyingStore) {
	t.Helper()
	cfg.ShutdownGrace = 50 * time.Millisecond
	cancel, done := startIngester(t, cfg, n.JS, store)
	select {
	case <-store.dead:
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
func TestSecondCrashInsideRefold(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		n := testenv.StartNATS(t, "")
		last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(seed, 250, 20))
		ref := testenv.ClickHouse(t)
		runUntil(t, testConfig("reference"), n.JS, ref, last)
		want := testenv.Snapshot(t, ref)

		store := testenv.ClickHouse(t)
		stopMerges(t, store)
		cfg := testConfig("crashing")
		cfg.BatchSize, cfg.BatchWait = 80, time.Second
		runUntilDead(t, cfg, n, newDyingStore(store, 1, true))
		cfg.BatchSize = 16
		runUntilDead(t, cfg, n, newDyingStore(store, 1, false))
		runUntil(t, cfg, n.JS, store, last)
		if got := testenv.Snapshot(t, store); got != want {
			t.Fatalf("seed %d: state after two crashes differs from an uninterrupted run:\n%s", seed, testenv.FirstDiff(got, want))
		}
		wantOneRowPerMessage(t, store, ref)
	}
}
