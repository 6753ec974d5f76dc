package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestLiveCountThroughSplitAndRefold: the count the ingester keeps counts
// a split-off person (whose id is not its creating sequence), and stays
// exact when a batch's persons were written without a marker and the
// refold writes nothing for them (it recognises its deletion as done).
func TestLiveCountThroughSplitAndRefold(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(id, version uint64, deleted bool) fold.PersonRow {
		return fold.PersonRow{ProjectID: 7, ID: id, Properties: map[string]any{}, CreatedAt: at, IsDeleted: deleted, Version: version}
	}
	want := func(n uint64) {
		t.Helper()
		live, newest, ok, err := store.LiveCount(ctx, 7)
		if err != nil || !ok || live != n || !newest.Equal(at) {
			t.Fatalf("live count %d %v (ok %v, err %v), want %d %v", live, newest, ok, err, n, at)
		}
	}
	split := fold.SplitPersonID(5, 0)
	first := fold.Batch{Persons: []fold.PersonRow{row(1, 1, false), row(2, 2, false), row(split, 5, false)}}
	if err := store.WriteBatch(ctx, nil, first, chstore.BatchMarker{Consumer: "c", FirstSeq: 1, LastSeq: 10}); err != nil {
		t.Fatal(err)
	}
	want(3)
	// Seq 12 deletes person 1: written, then the write fails before the
	// marker. The refold of 11..15 finds the deletion in the store and
	// writes no person.
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: []fold.PersonRow{row(1, 12, true)}}); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteBatch(ctx, nil, fold.Batch{}, chstore.BatchMarker{Consumer: "c", FirstSeq: 11, LastSeq: 15}); err != nil {
		t.Fatal(err)
	}
	want(2)
	// A fresh process (a Store of its own) continues from 15: it learns
	// the count from the stored row, and a person row above 15 left by a
	// crash (person 2 deleted at 18) makes it count from the store.
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: []fold.PersonRow{row(2, 18, true)}}); err != nil {
		t.Fatal(err)
	}
	restarted, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: store.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	again := fold.Batch{Persons: []fold.PersonRow{row(16, 16, false)}}
	if err := restarted.WriteBatch(ctx, nil, again, chstore.BatchMarker{Consumer: "c", FirstSeq: 16, LastSeq: 20}); err != nil {
		t.Fatal(err)
	}
	want(2) // the split-off person and 16
}
