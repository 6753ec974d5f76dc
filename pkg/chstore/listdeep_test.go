package chstore_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestDeepPagesDifferential: pages past the first rows (listdeep.go: the
// windows a count without FINAL shows too small are skipped) equal the
// straightforward FINAL query, with unmerged versions, deletions' and
// merges' tombstones in the counted windows (which make the count exceed
// the live keys), ties on created_at, and persons spread over months so
// the windows must widen. Each write is followed by pages across the
// window boundaries.
func TestDeepPagesDifferential(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	const project, n = 9, 3000
	newest := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	created := map[uint64]time.Time{}
	deleted := map[uint64]bool{}
	row := func(id, version uint64, deleted bool) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{}, CreatedAt: created[id], IsDeleted: deleted, Version: version}
	}
	var first fold.Batch
	for id := uint64(1); id <= n; id++ {
		switch k := r.IntN(4); {
		case k == 0: // ties within the newest minutes
			created[id] = newest.Add(-time.Duration(r.IntN(5)) * time.Minute)
		case r.IntN(40) == 0: // older than every window: the last page reads the whole project
			created[id] = newest.Add(-time.Duration(40000+r.IntN(9000)) * time.Hour)
		default: // over three months, a few per hour
			created[id] = newest.Add(-time.Duration(r.IntN(2200)) * time.Hour)
		}
		first.Persons = append(first.Persons, row(id, id, false))
	}
	if err := store.WriteBatch(ctx, nil, first, chstore.BatchMarker{Consumer: "c", FirstSeq: 1, LastSeq: n}); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		want := listReference(t, store, project)
		offsets := []int{0, 100, 2000, 2048 - 50, 2049 - 50, len(want) / 2, len(want) - 120, len(want) - 1, len(want)}
		for i := 0; i < 6; i++ {
			offsets = append(offsets, 1900+r.IntN(len(want)-1900))
		}
		for _, off := range offsets {
			limit := []int{1, 50, 100, 500}[r.IntN(4)]
			got, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Limit: limit, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for _, p := range got {
				ids = append(ids, p.ID)
			}
			exp := want[min(off, len(want)):min(off+limit, len(want))]
			if total != uint64(len(want)) || !slices.Equal(ids, exp) {
				t.Fatalf("%s: offset %d limit %d: count %d, ids %v;\nreference %d, %v", stage, off, limit, total, ids, len(want), exp)
			}
		}
		// The slot counts (listslots.go) serve every page once the
		// writes are done: the windows' path must not hide a wrong count.
		for _, off := range []int{0, len(want) / 3, len(want) - 100} {
			ids, ok, err := store.SlotPage(ctx, chstore.ListQuery{ProjectID: project, Limit: 100, Offset: off})
			if err != nil || !ok {
				t.Fatalf("%s: offset %d: not served by the slots (%v)", stage, off, err)
			}
			if exp := want[off:min(off+100, len(want))]; !slices.Equal(ids, exp) {
				t.Fatalf("%s: offset %d by the slots: %v;\nreference %v", stage, off, ids, exp)
			}
		}
		testenv.Snapshot(t, store) // person_windows against persons
	}
	check("written once")
	// New versions of a sixth (duplicate keys until a merge), deletions
	// of a tenth and merges that move a tenth's created_at earlier (the
	// old key tombstoned), all in the windows the deep pages count.
	var second fold.Batch
	version := uint64(n)
	for id := uint64(1); id <= n; id++ {
		version++
		switch k := r.IntN(30); {
		case k < 5:
			second.Persons = append(second.Persons, row(id, version, false))
		case k < 8:
			deleted[id] = true
			second.Persons = append(second.Persons, row(id, version, true))
		case k < 11:
			old := created[id]
			created[id] = old.Add(-time.Duration(1+r.IntN(300)) * time.Hour)
			second.Persons = append(second.Persons, row(id, version, false))
			second.Rekeyed = append(second.Rekeyed, fold.Rekey{ProjectID: project, ID: id, CreatedAt: old, Version: version})
		}
	}
	if err := store.WriteBatch(ctx, nil, second, chstore.BatchMarker{Consumer: "c", FirstSeq: n + 1, LastSeq: version}); err != nil {
		t.Fatal(err)
	}
	check("changed")
	// A fresh process learns the slots from the stored rows; more merges
	// and deletions, and a crashed write above the commit point (persons
	// moved and deleted, not refolded) that makes it count from the store.
	restarted, err := chstore.Open(ctx, chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: store.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	store = restarted
	var third, crashed fold.Batch
	from := version + 1
	for id := uint64(1); id <= n; id += 7 {
		if deleted[id] {
			continue
		}
		version++
		old := created[id]
		created[id] = old.Add(-time.Duration(1+r.IntN(50)) * time.Hour)
		deleted[id] = r.IntN(5) == 0
		third.Persons = append(third.Persons, row(id, version, deleted[id]))
		third.Rekeyed = append(third.Rekeyed, fold.Rekey{ProjectID: project, ID: id, CreatedAt: old, Version: version})
	}
	if err := store.WriteBatch(ctx, nil, third, chstore.BatchMarker{Consumer: "c", FirstSeq: from, LastSeq: version}); err != nil {
		t.Fatal(err)
	}
	check("after a restart")
	for id := uint64(3); id <= n; id += 11 {
		if deleted[id] {
			continue
		}
		old := created[id]
		created[id] = old.Add(-time.Duration(1+r.IntN(50)) * time.Hour)
		crashed.Persons = append(crashed.Persons, row(id, version+id, r.IntN(3) == 0))
		crashed.Rekeyed = append(crashed.Rekeyed, fold.Rekey{ProjectID: project, ID: id, CreatedAt: old, Version: version + id})
	}
	if err := store.WriteRows(ctx, nil, crashed); err != nil {
		t.Fatal(err)
	}
	// The refold's batch reaches past every crashed row and writes none.
	if err := store.WriteBatch(ctx, nil, fold.Batch{}, chstore.BatchMarker{Consumer: "c", FirstSeq: version + 1, LastSeq: version + n + 1}); err != nil {
		t.Fatal(err)
	}
	check("counted from the store")
}

// listReference is the live persons' ids in the list's order: FINAL first,
// every condition after it.
func listReference(t *testing.T, store *chstore.Store, project uint64) []uint64 {
	t.Helper()
	ctx := clickhouse.Context(context.Background(), clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0}))
	rows, err := store.Conn().Query(ctx, "SELECT id FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 ORDER BY created_at DESC, id DESC", project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
