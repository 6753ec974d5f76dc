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

// TestUnchangedCountWritesNoRow: a batch whose persons change but
// whose live count and newest do not (an API PATCH) writes no count row,
// in a running process and in a fresh one reading the stored row; a batch
// that changes the count still writes one.
func TestUnchangedCountWritesNoRow(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(id, version uint64, deleted bool) fold.PersonRow {
		return fold.PersonRow{ProjectID: 7, ID: id, Properties: map[string]any{"v": version}, CreatedAt: at, IsDeleted: deleted, Version: version}
	}
	rows := func(want, wantLive uint64) {
		t.Helper()
		var n uint64
		if err := store.Conn().QueryRow(ctx, "SELECT count() FROM person_counts WHERE project_id = 7").Scan(&n); err != nil {
			t.Fatal(err)
		}
		live, _, _, err := store.LiveCount(ctx, 7)
		if err != nil || n != want || live != wantLive {
			t.Fatalf("person_counts rows %d, live %d (err %v); want %d rows, live %d", n, live, err, want, wantLive)
		}
	}
	write := func(s *chstore.Store, first, last uint64, persons ...fold.PersonRow) {
		t.Helper()
		if err := s.WriteBatch(ctx, nil, fold.Batch{Persons: persons}, chstore.BatchMarker{Consumer: "c", FirstSeq: first, LastSeq: last}); err != nil {
			t.Fatal(err)
		}
	}
	write(store, 1, 2, row(1, 1, false), row(2, 2, false))
	rows(1, 2)
	write(store, 3, 3, row(1, 3, false)) // a PATCH of person 1
	rows(1, 2)
	restarted, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: store.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	write(restarted, 4, 4, row(2, 4, false)) // from the stored row
	rows(1, 2)
	write(restarted, 5, 5, row(2, 5, true)) // a deletion changes the count
	rows(2, 1)
}

// TestLiveCountLeavesOtherPartitionsProjects: two partitions share one
// Store (cmd/ingester runs several). A fresh process's first batch of
// partition a finds rows of partition b above a's commit point; those are
// b's live work, not a crash of a's, so a must not recount b's project:
// a count row at a's (higher) last sequence would outrank the rows b
// writes below it, and keep b's project's count stale.
func TestLiveCountLeavesOtherPartitionsProjects(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(project, id uint64) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{}, CreatedAt: at, Version: id}
	}
	onlyA := func(project uint64) bool { return project == 7 }
	onlyB := func(project uint64) bool { return project == 8 }
	write := func(consumer string, mine func(uint64) bool, first, last uint64, persons ...fold.PersonRow) {
		t.Helper()
		m := chstore.BatchMarker{Consumer: consumer, FirstSeq: first, LastSeq: last, Mine: mine}
		if err := store.WriteBatch(ctx, nil, fold.Batch{Persons: persons}, m); err != nil {
			t.Fatal(err)
		}
	}
	write("b", onlyB, 1, 6, row(8, 1), row(8, 6))
	// a, behind b, folds 5..30: b's persons at 6 are above a's commit (4).
	write("a", onlyA, 5, 30, row(7, 5))
	// b folds on, below a's last sequence.
	write("b", onlyB, 7, 20, row(8, 15))
	for project, want := range map[uint64]uint64{7: 1, 8: 3} {
		live, _, ok, err := store.LiveCount(ctx, project)
		if err != nil || !ok || live != want {
			t.Errorf("project %d: live count %d (ok %v, err %v), want %d", project, live, ok, err, want)
		}
	}
}

// TestLiveCountAfterAnotherProcessFolded: a process that lost its lease
// takes it again after another process folded the same consumer further
// (ingest.Run); the counts it knew are then behind the commit point it
// resumes from, and must be read again (ForgetCounts), not added to.
func TestLiveCountAfterAnotherProcessFolded(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	row := func(id uint64) fold.PersonRow {
		return fold.PersonRow{ProjectID: 7, ID: id, Properties: map[string]any{}, CreatedAt: at, Version: id}
	}
	write := func(s *chstore.Store, first, last uint64, persons ...fold.PersonRow) {
		t.Helper()
		if err := s.WriteBatch(ctx, nil, fold.Batch{Persons: persons}, chstore.BatchMarker{Consumer: "c", FirstSeq: first, LastSeq: last}); err != nil {
			t.Fatal(err)
		}
	}
	write(store, 1, 10, row(1), row(2))
	other, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: store.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	write(other, 11, 20, row(15))
	store.ForgetCounts("c")
	write(store, 21, 30, row(25))
	live, _, _, err := store.LiveCount(ctx, 7)
	if err != nil || live != 4 {
		t.Fatalf("live count %d (err %v), want 4", live, err)
	}
}
