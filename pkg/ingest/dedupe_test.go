package ingest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// stopMerges keeps ClickHouse from merging the parts of events and of its
// copy by distinct id, so a second row of a message stays visible to
// count() (a merge would hide it by chance).
func stopMerges(t *testing.T, store *chstore.Store) {
	t.Helper()
	for _, table := range []string{"events", "events_by_distinct_id"} {
		if err := store.Conn().Exec(context.Background(), "SYSTEM STOP MERGES "+table); err != nil {
			t.Fatal(err)
		}
	}
}

// wantOneRowPerMessage: the events table holds one row per stored
// message, without FINAL: as many rows as distinct seqs, as many as an
// uninterrupted run (ref) stored.
func wantOneRowPerMessage(t *testing.T, store, ref *chstore.Store) {
	t.Helper()
	ctx := context.Background()
	var want uint64
	if err := ref.Conn().QueryRow(ctx, "SELECT count() FROM events FINAL").Scan(&want); err != nil {
		t.Fatal(err)
	}
	var rows, seqs uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count(), uniqExact(seq) FROM events").Scan(&rows, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != seqs || seqs != want {
		t.Fatalf("events: %d rows of %d distinct seqs, want %d messages, one row each", rows, seqs, want)
	}
	// The copy by distinct id (schema 0009): one row per events row the
	// API did not write, none lost to an insert that died between events
	// and its view.
	var copies, copied uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM events WHERE visitParamHas(properties, '$actor') = 0").Scan(&copied); err != nil {
		t.Fatal(err)
	}
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM events_by_distinct_id").Scan(&copies); err != nil {
		t.Fatal(err)
	}
	if copies != copied {
		t.Fatalf("events_by_distinct_id: %d rows, want %d (one per events row not written by the API)", copies, copied)
	}
	wantHourlyCounts(t, store, ref)
}

// wantHourlyCounts: events_hourly holds, per key, the number of events
// stored (not written by the API; distinct uuids, as no uuid here is
// published twice), none lost to an insert that died between events and
// its view, and the sums of an uninterrupted run (ref); and the lowest
// seqs (wantFirstSeqs).
func wantHourlyCounts(t *testing.T, store, ref *chstore.Store) {
	t.Helper()
	fromEvents := `SELECT project_id, event, toStartOfHour(timestamp) AS hour, distinct_id, person_id, toInt64(uniqExact(uuid)) AS n
		FROM events WHERE visitParamHas(properties, '$actor') = 0
		GROUP BY project_id, event, hour, distinct_id, person_id ORDER BY project_id, event, hour, distinct_id, person_id`
	got := testenv.QueryText(t, store, testenv.HourlySumsSQL)
	if want := testenv.QueryText(t, store, fromEvents); got != want {
		t.Fatalf("events_hourly is not the events' counts: %s", testenv.FirstDiff(got, want))
	}
	if want := testenv.QueryText(t, ref, testenv.HourlySumsSQL); got != want {
		t.Fatalf("events_hourly differs from an uninterrupted run's: %s", testenv.FirstDiff(got, want))
	}
	wantFirstSeqs(t, store)
}

// wantFirstSeqs: events_first_seq (schema 0017) holds each hour's lowest
// seq of the events stored, none lost to an insert that died between
// events and its view, or the analysis would skip an override
// (pkg/insight, storedIsCurrent).
func wantFirstSeqs(t *testing.T, store *chstore.Store) {
	t.Helper()
	got := testenv.QueryText(t, store, "SELECT project_id, hour, minMerge(min_seq) FROM events_first_seq GROUP BY project_id, hour ORDER BY project_id, hour")
	want := testenv.QueryText(t, store, "SELECT project_id, toStartOfHour(timestamp) AS hour, min(seq) FROM events GROUP BY project_id, hour ORDER BY project_id, hour")
	if got != want {
		t.Fatalf("events_first_seq is not the events' lowest seqs: %s", testenv.FirstDiff(got, want))
	}
}

// countingStore counts the ingester's intents and lookups.
type countingStore struct {
	*chstore.Store
	intents, lookups atomic.Int64
}

func (s *countingStore) WriteIntent(ctx context.Context, consumer string, first, through uint64) error {
	s.intents.Add(1)
	return s.Store.WriteIntent(ctx, consumer, first, through)
}

func (s *countingStore) WrittenEvents(ctx context.Context, rows []eventstore.Row) (map[uint64]bool, error) {
	s.lookups.Add(1)
	return s.Store.WrittenEvents(ctx, rows)
}

// TestNormalRunLooksNothingUp: without a failure or a restart, no batch
// looks up its events, and an intent covers about two batches (it reaches
// BatchSize beyond its batch). After a restart, only the batches up to
// the last intent look up theirs.
func TestNormalRunLooksNothingUp(t *testing.T) {
	n := testenv.StartNATS(t, "")
	msgs := testenv.Workload(5, 1500, 100)
	last := testenv.PublishWorkload(t, n.JS, 0, msgs[:1000])
	store := &countingStore{Store: testenv.ClickHouse(t)}
	cfg := testConfig("normal")
	runUntil(t, cfg, n.JS, store, last)
	batches := (last + uint64(cfg.BatchSize) - 1) / uint64(cfg.BatchSize)
	if l, i := store.lookups.Load(), store.intents.Load(); l != 0 || i == 0 || uint64(i) > batches/2+1 {
		t.Fatalf("uninterrupted run of %d batches: %d lookups (want 0), %d intents (want 1 to %d)", batches, l, i, batches/2+1)
	}
	claimed, err := store.LastIntent(context.Background(), cfg.Consumer)
	if err != nil || claimed < last || claimed > last+uint64(cfg.BatchSize) {
		t.Fatalf("last intent %d (%v), want %d to %d", claimed, err, last, last+uint64(cfg.BatchSize))
	}

	last = testenv.PublishWorkload(t, n.JS, 1000, msgs[1000:])
	cfg.BatchWait = time.Second // full batches
	runUntil(t, cfg, n.JS, store, last)
	if l := store.lookups.Load(); l < 1 || l > 2 {
		t.Fatalf("after a restart: %d lookups, want the batches up to the last intent (1 or 2)", l)
	}
	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	wantOneRowPerMessage(t, store.Store, ref)
}
