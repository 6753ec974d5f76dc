package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestOrderRepairKeepsOtherPartitionsKeys: the person_order repair of one
// ingester tombstones the stale keys of its own projects only. Another
// partition's ingester writes a person's next key before the person's row
// (order.go), so between the two its live key is not yet its person's
// current key; the repair must leave it alone.
func TestOrderRepairKeepsOtherPartitionsKeys(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	person := func(project, id uint64, created time.Time, version uint64) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: id, Properties: map[string]any{}, CreatedAt: created, Version: version}
	}
	// Project 1 (this ingester's): person 1 created on day 10 (seq 10,
	// committed); a crashed attempt wrote its key of day 9 at seq 20 but
	// not its row; the refold moved it to day 5 at seq 30 and tombstoned
	// only the stored day-10 key.
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: []fold.PersonRow{person(1, 1, day(10), 10)}}); err != nil {
		t.Fatal(err)
	}
	if err := store.WritePersonOrder(ctx, fold.Batch{Persons: []fold.PersonRow{person(1, 1, day(9), 20)}}); err != nil {
		t.Fatal(err)
	}
	moved := fold.Batch{Persons: []fold.PersonRow{person(1, 1, day(5), 30)}, Rekeyed: []fold.Rekey{{ProjectID: 1, ID: 1, CreatedAt: day(10), Version: 30}}}
	if err := store.WriteRows(ctx, nil, moved); err != nil {
		t.Fatal(err)
	}
	// Project 2 (another partition's): person 2 created on day 12 at seq
	// 12; its ingester is between the order rows and the persons rows of
	// a merge at seq 40 that moves it to day 3.
	if err := store.WriteRows(ctx, nil, fold.Batch{Persons: []fold.PersonRow{person(2, 2, day(12), 12)}}); err != nil {
		t.Fatal(err)
	}
	next := fold.Batch{Persons: []fold.PersonRow{person(2, 2, day(3), 40)}, Rekeyed: []fold.Rekey{{ProjectID: 2, ID: 2, CreatedAt: day(12), Version: 40}}}
	if err := store.WritePersonOrder(ctx, next); err != nil {
		t.Fatal(err)
	}

	mine := func(project uint64) bool { return project == 1 }
	r, err := store.BeginOrderRepair(ctx, "a", 15, mine)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pending || r.From != 15 || r.Through != 30 {
		t.Fatalf("repair owed %+v, want pending from 15 through 30 (project 1's rows only)", r)
	}
	if err := store.RepairOrder(ctx, "a", r, 30, mine); err != nil {
		t.Fatal(err)
	}
	rows, err := store.Conn().Query(ctx, `SELECT project_id, bitNot(rid), toDayOfMonth(toDateTime(bitNot(rank), 'UTC')) FROM person_order
		GROUP BY project_id, rank, rid HAVING argMax(is_deleted, version) = 0 ORDER BY project_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][3]uint64
	for rows.Next() {
		var project, id uint64
		var d uint8
		if err := rows.Scan(&project, &id, &d); err != nil {
			t.Fatal(err)
		}
		got = append(got, [3]uint64{project, id, uint64(d)})
	}
	want := [][3]uint64{{1, 1, 5}, {2, 2, 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("live keys (project, id, day) %v, want %v: the stale day-9 key repaired, the other partition's day-3 key kept", got, want)
	}
}
