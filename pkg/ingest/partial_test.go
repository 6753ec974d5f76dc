package ingest

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// partialStore fails about one WriteBatch in three the way a ClickHouse
// killed mid-write does: the stages before a random one land, and of that
// stage a random part: each of its concurrent inserts (events, activity,
// deletion requests, cohort members; distinct ids, warnings) lands or not, and a persons
// or distinct ids insert lands for some projects only (a table
// partitioned by project gets one part per project, each atomic on its
// own). The ingester retries in the same process.
type partialStore struct {
	*chstore.Store
	mu  sync.Mutex
	rnd *rand.Rand
}

func (s *partialStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rnd.Intn(3) != 0 {
		return s.Store.WriteBatch(ctx, events, b, m)
	}
	some := func() bool { return s.rnd.Intn(2) == 0 }
	projects := map[uint64]bool{}
	for _, p := range []uint64{1, 2, 3} {
		projects[p] = some()
	}
	var stage1 fold.Batch
	var ev []eventstore.Row
	if stage := s.rnd.Intn(4); stage == 0 {
		if some() {
			ev = events
		}
		if some() {
			stage1.Activity = b.Activity
		}
		if some() {
			stage1.DeletionRequests = b.DeletionRequests
		}
		if some() {
			stage1.CohortMembers = b.CohortMembers
		}
		s.writeRows(ctx, ev, stage1)
		return errors.New("injected failure in the first stage")
	} else {
		stage1 = fold.Batch{Activity: b.Activity, DeletionRequests: b.DeletionRequests, CohortMembers: b.CohortMembers, Persons: b.Persons, Rekeyed: b.Rekeyed}
		if stage == 1 {
			stage1.Persons = nil
			for _, p := range b.Persons {
				if projects[p.ProjectID] {
					stage1.Persons = append(stage1.Persons, p)
				}
			}
		}
		if stage == 2 {
			for _, d := range b.DistinctIDs {
				if projects[d.ProjectID] {
					stage1.DistinctIDs = append(stage1.DistinctIDs, d)
				}
			}
			if some() {
				stage1.Warnings = b.Warnings
			}
		}
		if stage == 3 {
			stage1.DistinctIDs, stage1.Warnings = b.DistinctIDs, b.Warnings
		}
		s.writeRows(ctx, events, stage1)
	}
	return errors.New("injected failure")
}

// writeRows writes a failed batch's landed part, and half the time the
// events without their copy in events_by_distinct_id, their counts in
// events_hourly and their times in person_last_seen, as an insert that dies after ClickHouse wrote the table
// and before its views do: the views are detached for the write.
func (s *partialStore) writeRows(ctx context.Context, events []eventstore.Row, b fold.Batch) {
	if len(events) > 0 && s.rnd.Intn(2) == 0 {
		for _, view := range []string{"events_by_distinct_id_mv", "events_hourly_rows_mv", "events_first_seq_mv", "person_last_seen_mv"} {
			if err := s.Store.Conn().Exec(ctx, "DETACH TABLE "+view); err != nil {
				panic(err)
			}
			defer func() {
				if err := s.Store.Conn().Exec(ctx, "ATTACH TABLE "+view); err != nil {
					panic(err)
				}
			}()
		}
	}
	_ = s.Store.WriteRows(ctx, events, b)
}

// TestRetriesAfterPartialWrites: batches whose writes fail part way, at a
// random stage with a random part of it landed, are retried in the same
// process (the fold reset, the batch redelivered); the tables end as an
// uninterrupted run leaves them, with one events row per message.
func TestRetriesAfterPartialWrites(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(7, 4000, 300))
	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	want := testenv.Snapshot(t, ref)
	for seed := int64(1); seed <= 2; seed++ {
		store := testenv.ClickHouse(t)
		stopMerges(t, store)
		cfg := testConfig("partial")
		cfg.BatchSize = 150
		runUntil(t, cfg, n.JS, &partialStore{Store: store, rnd: rand.New(rand.NewSource(seed))}, last)
		if got := testenv.Snapshot(t, store); got != want {
			t.Fatalf("seed %d: state after partial writes differs from an uninterrupted run:\n%s", seed, testenv.FirstDiff(got, want))
		}
		wantOneRowPerMessage(t, store, ref)
	}
}
