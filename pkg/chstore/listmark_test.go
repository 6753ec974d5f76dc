package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestListKeptByWatermark: an unfiltered page read at a watermark is
// answered again at the same watermark without a statement, first and
// deep pages alike; a batch past it (a new committed or lane sequence)
// is on the next page read at the new watermark; a read at an older
// watermark neither uses nor replaces the newer entry; a kept page is
// read again after markMaxAge; no watermark, nothing kept. A deep page
// at a new watermark takes the count the first page read with its keys.
// Concurrent requests for a page at a new watermark read it once.
func TestListKeptByWatermark(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 6, 3000
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var b fold.Batch
	for id := uint64(1); id <= n; id++ {
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{"n": float64(id)},
			CreatedAt: newest.Add(-time.Duration(n-id) * time.Minute), Version: id})
	}
	if err := store.WriteBatch(ctx, nil, b, chstore.BatchMarker{Consumer: "c", FirstSeq: 1, LastSeq: n}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	store.SetMarkClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	tick := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }

	// page lists at mark and checks it against the reference (stale: the
	// reference as it was) and the statements it took.
	page := func(what string, mark chstore.Watermark, offset int, want []uint64, wantStmts int) []chstore.PersonRecord {
		t.Helper()
		var got []chstore.PersonRecord
		var total uint64
		stmts := statements(t, store, func() (err error) {
			got, total, err = store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Offset: offset, Limit: 100, Mark: mark})
			return err
		})
		ids := make([]uint64, len(got))
		for i, p := range got {
			ids[i] = p.ID
		}
		end := min(offset+100, len(want))
		if !slices.Equal(ids, want[offset:end]) || total != uint64(len(want)) {
			t.Errorf("%s: %v (total %d), want %v (%d)", what, ids, total, want[offset:end], len(want))
		}
		if wantStmts >= 0 && stmts != uint64(wantStmts) {
			t.Errorf("%s: %d statements, want %d", what, stmts, wantStmts)
		}
		t.Logf("%s: %d statements", what, stmts)
		return got
	}
	m1 := chstore.Watermark{Committed: n, Known: true}
	before := listReference(t, store, project)
	for _, offset := range []int{0, 2500} { // the first page and a deep one
		page("first read", m1, offset, before, -1)
		page("same watermark", m1, offset, before, 0)
	}
	if store.MarkHits() != 2 {
		t.Errorf("%d pages from the kept keys, want 2", store.MarkHits())
	}
	page("no watermark", chstore.Watermark{}, 0, before, 1)
	page("no watermark again", chstore.Watermark{}, 0, before, 1)

	// A batch: person n changed (a PATCH), n-1 deleted, a new newest.
	later := fold.Batch{Persons: []fold.PersonRow{
		{ProjectID: project, ID: n, Properties: map[string]any{"n": "patched"}, CreatedAt: newest, Version: n + 1},
		{ProjectID: project, ID: n - 1, Properties: map[string]any{}, CreatedAt: newest.Add(-time.Minute), IsDeleted: true, Version: n + 2},
		{ProjectID: project, ID: n + 3, Properties: map[string]any{}, CreatedAt: newest.Add(time.Minute), Version: n + 3},
	}}
	if err := store.WriteBatch(ctx, nil, later, chstore.BatchMarker{Consumer: "c", FirstSeq: n + 1, LastSeq: n + 3}); err != nil {
		t.Fatal(err)
	}
	after := listReference(t, store, project)
	// Until the watermark moves the page is the one kept (the API reads
	// the watermark before the page, so a batch past it is one no write
	// it answered waits for).
	page("watermark not moved", m1, 0, before, 0)
	// The lane's watermark alone (a PATCH the write lane took), then the
	// partition's.
	m2 := chstore.Watermark{Committed: n + 3, Lane: n + 3, Known: true}
	for _, m := range []chstore.Watermark{{Committed: n, Lane: n + 3, Known: true}, m2} {
		got := page("new watermark", m, 0, after, -1)
		if len(got) < 2 || got[1].ID != n || got[1].Properties["n"] != "patched" {
			t.Errorf("at %+v the patched person is %+v", m, got[:min(2, len(got))])
		}
		page("new watermark, again", m, 0, after, 0)
		// The count came with the first page: the deep page reads its
		// slots and keys only (its rows are cached).
		page("new watermark, deep", m, 2500, after, 2)
	}
	// An older watermark (a request that began before): read, not kept
	// over the newer.
	page("older watermark", m1, 0, after, 1)
	page("newer kept", m2, 0, after, 0)
	tick(61 * time.Second)
	page("past the age", m2, 0, after, 1)
	page("kept again", m2, 0, after, 0)

	// Sixteen requests at a new watermark: one reads, the others wait
	// for its page.
	m3 := chstore.Watermark{Committed: n + 4, Lane: n + 3, Known: true}
	stmts := statements(t, store, func() error {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, _, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Limit: 100, Mark: m3})
				if err == nil && (len(got) != 100 || got[0].ID != after[0]) {
					err = fmt.Errorf("a waiting request got %d rows", len(got))
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if stmts != 1 {
		t.Errorf("16 requests at a new watermark took %d statements, want 1", stmts)
	}
}
