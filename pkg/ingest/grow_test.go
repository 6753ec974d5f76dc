package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// rowCounts reads the commit markers and the person rows written (parts
// not merged away: merges of persons are stopped by the caller).
func rowCounts(t *testing.T, store *chstore.Store, consumer string) (batches, persons uint64) {
	t.Helper()
	ctx := context.Background()
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM ingest_batches WHERE consumer = ?", consumer).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if err := store.Conn().QueryRow(ctx, "SELECT sum(persons) FROM ingest_batches WHERE consumer = ?", consumer).Scan(&persons); err != nil {
		t.Fatal(err)
	}
	return batches, persons
}

// TestBatchGrowsWithBacklog: a backlog of 600 messages with BatchSize 16
// is folded as one grown batch (its events written ahead in chunks), so
// each person is written once, not once per 16-message batch that touched
// it; the tables equal a run whose batches end at BatchSize.
func TestBatchGrowsWithBacklog(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(7, 600, 40))

	store := testenv.ClickHouse(t)
	stopMerges(t, store)
	cfg := testConfig("grown")
	cfg.BatchSize, cfg.GrowFor = 16, 20*time.Second
	runUntil(t, cfg, n.JS, store, last)

	ref := testenv.ClickHouse(t)
	refCfg := testConfig("reference")
	refCfg.BatchSize, refCfg.GrowFor = 16, 0
	runUntil(t, refCfg, n.JS, ref, last)

	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("grown batches differ from BatchSize batches:\n%s", testenv.FirstDiff(got, want))
	}
	wantOneRowPerMessage(t, store, ref)
	batches, persons := rowCounts(t, store, cfg.Consumer)
	refBatches, refPersons := rowCounts(t, ref, refCfg.Consumer)
	t.Logf("grown: %d batches, %d person rows; BatchSize: %d batches, %d person rows", batches, persons, refBatches, refPersons)
	if batches > 3 || refBatches < 30 {
		t.Fatalf("%d grown batches (want at most 3), %d of BatchSize (want at least 30)", batches, refBatches)
	}
	if persons*2 > refPersons {
		t.Fatalf("grown batches wrote %d person rows, BatchSize batches %d: want less than half", persons, refPersons)
	}
}

// TestGrownBatchEndsAtDirtyBound: GrowPersons ends a grown batch once it
// has that many changed persons.
func TestGrownBatchEndsAtDirtyBound(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(3, 600, 200))
	store := testenv.ClickHouse(t)
	cfg := testConfig("bounded")
	cfg.BatchSize, cfg.GrowFor, cfg.GrowPersons = 16, 20*time.Second, 20
	runUntil(t, cfg, n.JS, store, last)
	batches, _ := rowCounts(t, store, cfg.Consumer)
	// 200 ids: ~40 persons per 16-message chunk... at most a chunk's
	// persons beyond the bound, so every batch ends within a few chunks.
	if batches < 5 {
		t.Fatalf("%d batches with GrowPersons 20 over ~200 persons, want at least 5", batches)
	}
}

// aheadDyingStore dies at the grown batch's writes ahead of its commit:
// after `ahead` of them succeeded, the next lands its rows and fails, and
// every write after it fails (a killed process).
type aheadDyingStore struct {
	*dyingStore
	ahead int
}

func (s *aheadDyingStore) WriteRows(ctx context.Context, events []eventstore.Row, b fold.Batch) error {
	if err := s.lockAlive(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	err := s.Store.WriteRows(ctx, events, b)
	if s.ahead > 0 {
		s.ahead--
		return err
	}
	close(s.dead)
	return errors.New("killed after a write ahead")
}

// dieOrFinish runs an ingester until its store dies or it has committed
// last: a refold that must reach through a crashed range may commit it
// all at once.
func dieOrFinish(t *testing.T, cfg Config, n *testenv.NATS, store *dyingStore, last uint64) {
	t.Helper()
	cfg.ShutdownGrace = 50 * time.Millisecond
	cancel, done := startIngester(t, cfg, n.JS, store)
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-store.dead:
			return
		case err := <-done:
			t.Fatalf("ingester stopped before its store died: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if c, err := store.LastCommitted(context.Background(), cfg.Consumer); err == nil && c >= last {
			return
		}
	}
	t.Fatal("store did not die, nor was everything committed")
}

// TestGrownBatchCrashes: a grown batch dies after some of its events were
// written ahead, or at its commit with all its rows landed; the next
// process (batches of another size, grown to fewer persons) then dies
// after its first commit (unless its first batch must reach through the
// whole crashed range); a third finishes. The tables equal an
// uninterrupted run's, with one events row per message.
func TestGrownBatchCrashes(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		n, last, store := crashSetup(t, seed, 400, 30)
		cfg := testConfig("crashing")
		cfg.BatchSize, cfg.GrowFor = 24, 20*time.Second
		if seed%2 == 1 {
			dying := &aheadDyingStore{dyingStore: newDyingStore(store, 0, true), ahead: int(seed)}
			runUntilClosed(t, cfg, n, dying, dying.dead)
		} else {
			runUntilDead(t, cfg, n, newDyingStore(store, 0, true))
		}
		// Grown batches of about 8 persons: several commits.
		cfg.BatchSize, cfg.GrowPersons = 10, 8
		dieOrFinish(t, cfg, n, newDyingStore(store, 1, seed > 2), last)
		if c, err := store.LastCommitted(context.Background(), cfg.Consumer); err != nil || c < last {
			runUntil(t, cfg, n.JS, store, last)
		}
		ref := testenv.ClickHouse(t)
		refCfg := testConfig("reference")
		refCfg.GrowFor = 0
		runUntil(t, refCfg, n.JS, ref, last)
		if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
			t.Fatalf("seed %d: state after crashes inside grown batches differs from an uninterrupted run:\n%s", seed, testenv.FirstDiff(got, want))
		}
		wantOneRowPerMessage(t, store, ref)
	}
}

// sizeLimitStore refuses a commit of more than limit persons, writing
// nothing of it, as a server does whose timeout or memory a statement
// exceeds.
type sizeLimitStore struct {
	*chstore.Store
	limit   int
	refused atomic.Int64
}

func (s *sizeLimitStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	if len(b.Persons) > s.limit {
		s.refused.Add(1)
		return fmt.Errorf("%d persons in one commit: refused", len(b.Persons))
	}
	return s.Store.WriteBatch(ctx, events, b, m)
}

// TestGrownBatchTooLargeIsCapped: a grown batch without a bound on its
// persons whose commit the store refuses does not fail in the same place
// forever: the next grown batches hold half the failed one's persons
// (dirtyBound), and the tables end as a run of BatchSize batches.
func TestGrownBatchTooLargeIsCapped(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(3, 600, 200))
	store := &sizeLimitStore{Store: testenv.ClickHouse(t), limit: 60}
	cfg := testConfig("capped")
	cfg.BatchSize, cfg.GrowFor, cfg.GrowPersons = 16, 20*time.Second, 0
	runUntil(t, cfg, n.JS, store, last)
	if store.refused.Load() == 0 {
		t.Fatal("no commit was refused: the test does not test the cap")
	}
	ref := testenv.ClickHouse(t)
	refCfg := testConfig("reference")
	refCfg.BatchSize, refCfg.GrowFor = 16, 0
	runUntil(t, refCfg, n.JS, ref, last)
	if got, want := testenv.Snapshot(t, store.Store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("capped grown batches differ from BatchSize batches:\n%s", testenv.FirstDiff(got, want))
	}
	wantOneRowPerMessage(t, store.Store, ref)
	t.Logf("%d commits refused", store.refused.Load())
}
