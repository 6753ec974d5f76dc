package chstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestLoadManyIDs: the ingester's lookups take a whole batch's ids in one
// statement (as an external table, statement.KeyTable), on ClickHouse
// 18.16 too; an empty list reads nothing.
func TestLoadManyIDs(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const n = 30_000
	var b fold.Batch
	ids := make([]uint64, n)
	dids := make([]string, n)
	for i := range n {
		ids[i] = uint64(i + 1)
		dids[i] = fmt.Sprintf("a-rather-long-distinct-id-%06d", i)
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: 1, ID: ids[i], UUID: person.UUIDFor(1, dids[i]),
			Properties: map[string]any{"i": i}, DistinctIDs: []string{dids[i]}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: ids[i]})
		b.DistinctIDs = append(b.DistinctIDs, fold.DistinctIDRow{ProjectID: 1, DistinctID: dids[i], PersonID: ids[i], Version: ids[i]})
	}
	if err := store.WriteRows(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	persons, err := store.LoadPersons(ctx, 1, ids)
	if err != nil || len(persons) != n {
		t.Fatalf("LoadPersons: %d, %v", len(persons), err)
	}
	rows, err := store.LoadDistinctIDs(ctx, 1, append(dids, "unknown"))
	if err != nil || len(rows) != n || rows[dids[n-1]].PersonID != n {
		t.Fatalf("LoadDistinctIDs: %d, %v", len(rows), err)
	}
	if rows, err := store.LoadDistinctIDs(ctx, 1, nil); err != nil || len(rows) != 0 {
		t.Fatalf("LoadDistinctIDs of none: %d, %v", len(rows), err)
	}
	if persons, err := store.LoadPersons(ctx, 2, ids[:10]); err != nil || len(persons) != 0 {
		t.Fatalf("LoadPersons of another project: %d, %v", len(persons), err)
	}
}

// TestLoadProject: the fold's read of a whole project hands out exactly
// the rows the reads by key give (the newest version of each, deleted
// ones included), none of another project's, and stops at the bound.
func TestLoadProject(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const n = 500
	ids := make([]uint64, n)
	dids := make([]string, n)
	write := func(project, version uint64) {
		var b fold.Batch
		for i := range n {
			ids[i], dids[i] = uint64(i+1), fmt.Sprintf("d%d", i)
			b.Persons = append(b.Persons, fold.PersonRow{ProjectID: project, ID: ids[i], UUID: person.UUIDFor(project, dids[i]),
				PropertiesJSON: fmt.Sprintf(`{"i":%d,"v":%d}`, i, version), DistinctIDs: []string{dids[i]},
				CreatedAt: time.Unix(1e9, 0).UTC(), Version: version, IsDeleted: i%7 == 0 && version > 1})
			b.DistinctIDs = append(b.DistinctIDs, fold.DistinctIDRow{ProjectID: project, DistinctID: dids[i], PersonID: ids[i],
				Version: version, Prev: fold.Owner{PersonID: ids[i], Version: version - 1}, FirstSeq: 1, IsDeleted: i%11 == 0 && version > 1})
		}
		if err := store.WriteRows(ctx, nil, b); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 1)
	write(1, 2)
	write(2, 3)
	persons, err := store.LoadPersons(ctx, 1, ids)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := store.LoadDistinctIDs(ctx, 1, dids)
	if err != nil {
		t.Fatal(err)
	}
	gotPersons := map[uint64]fold.PersonRow{}
	gotDIDs := map[string]fold.DistinctIDRow{}
	read, err := store.LoadProject(ctx, 1, 0, func(r fold.DistinctIDRow) { gotDIDs[r.DistinctID] = r },
		func(r fold.PersonRow) { gotPersons[r.ID] = r })
	if err != nil || !read {
		t.Fatalf("LoadProject: %v %v", read, err)
	}
	if fmt.Sprint(gotPersons) != fmt.Sprint(persons) || fmt.Sprint(gotDIDs) != fmt.Sprint(rows) {
		t.Fatalf("LoadProject differs from the reads by key:\n%v\n%v\nwant\n%v\n%v", gotPersons, gotDIDs, persons, rows)
	}
	if len(gotPersons) != n || gotPersons[8].Version != 2 || !gotPersons[8].IsDeleted {
		t.Fatalf("LoadProject: %d persons, person 8 (i 7) %+v", len(gotPersons), gotPersons[8])
	}
	// Over its bound: a false answer, the statement ended early, and the
	// pool fine afterwards.
	var calls int
	read, err = store.LoadProject(ctx, 1, n-1, func(fold.DistinctIDRow) { calls++ }, func(fold.PersonRow) { calls++ })
	if err != nil || read || calls >= n {
		t.Fatalf("LoadProject over its bound: %v, %d rows, %v", read, calls, err)
	}
	calls = 0
	read, err = store.LoadProject(ctx, 2, n, func(fold.DistinctIDRow) { calls++ }, func(fold.PersonRow) { calls++ })
	if err != nil || !read || calls != 2*n {
		t.Fatalf("LoadProject of project 2 within its bound: %v, %d rows, %v", read, calls, err)
	}
	if persons, err := store.LoadPersons(ctx, 1, ids); err != nil || len(persons) != n {
		t.Fatalf("LoadPersons after: %d, %v", len(persons), err)
	}
}

// TestWriteRowsInPieces: a batch of more persons than one insert takes is
// written in pieces, every piece of every persons table landing (the
// list's keys, emails, grams, persons), a moved key's tombstone too.
func TestWriteRowsInPieces(t *testing.T) {
	defer chstore.SetPiecePersons(7)()
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const n = 30
	var b fold.Batch
	ids := make([]uint64, n)
	for i := range n {
		ids[i] = uint64(i + 1)
		did := fmt.Sprintf("p%d", i)
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: 1, ID: ids[i], UUID: person.UUIDFor(1, did),
			Properties: map[string]any{"email": fmt.Sprintf("user%d@example.com", i)}, DistinctIDs: []string{did},
			CreatedAt: time.Unix(1e9+int64(i), 0).UTC(), Version: 100})
	}
	b.Rekeyed = []fold.Rekey{{ProjectID: 1, ID: 3, CreatedAt: time.Unix(5e8, 0).UTC(), Version: 100}}
	if err := store.WriteRows(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	persons, err := store.LoadPersons(ctx, 1, ids)
	if err != nil || len(persons) != n {
		t.Fatalf("LoadPersons: %d, %v", len(persons), err)
	}
	for table, want := range map[string]uint64{
		"SELECT count() FROM person_order WHERE project_id = 1 AND is_deleted = 0":     n,
		"SELECT count() FROM person_order WHERE project_id = 1 AND is_deleted = 1":     1,
		"SELECT uniqExact(id) FROM person_emails WHERE project_id = 1":                 n,
		"SELECT uniqExact(id) FROM person_email_grams WHERE project_id = 1":            n,
		"SELECT count() FROM person_email_grams WHERE project_id = 1 AND gram = 'r0@'": 1,
	} {
		var got uint64
		if err := store.Conn().QueryRow(ctx, table).Scan(&got); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", table, got, err, want)
		}
	}
}
