package chstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestPersonsByProjectMigrationRunsAgain: migration 0008 (persons
// partitioned by project) keeps every person when it runs again after an
// interruption at any statement, and leaves the table partitioned.
func TestPersonsByProjectMigrationRunsAgain(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	var b fold.Batch
	for i := range 50 {
		did := fmt.Sprintf("d%d", i)
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: uint64(1 + i%3), ID: uint64(i + 1), UUID: person.UUIDFor(uint64(1+i%3), did),
			Properties: map[string]any{"i": i}, DistinctIDs: []string{did}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: uint64(i + 1)})
	}
	if err := store.WriteRows(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	all, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var m chstore.Migration
	for _, x := range all {
		if x.Version == 8 {
			m = x
		}
	}
	if len(m.Statements) != 5 {
		t.Fatalf("migration 0008: %d statements", len(m.Statements))
	}
	// Interrupted after each statement, then run whole again.
	for cut := 1; cut <= len(m.Statements); cut++ {
		for _, st := range append(m.Statements[:cut:cut], m.Statements...) {
			if err := store.Conn().Exec(ctx, st); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
		}
		for project, want := range map[uint64]int{1: 17, 2: 17, 3: 16} {
			list, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project})
			if err != nil || total != uint64(want) || len(list) != want {
				t.Fatalf("cut %d, project %d: %d persons (%d), %v", cut, project, len(list), total, err)
			}
		}
	}
	var engine string
	if err := store.Conn().QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'persons'").Scan(&engine); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(engine, "PARTITION BY project_id") {
		t.Fatalf("persons: %s", engine)
	}
}
