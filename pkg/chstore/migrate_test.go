package chstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestMigrationsRunAgain: a migrate interrupted after some statements of a
// migration ran (before its version was recorded) runs again: CREATE ...
// IF NOT EXISTS, an ADD COLUMN whose column exists (18.16 has no IF NOT
// EXISTS there), the idempotent backfill of 0006.
func TestMigrationsRunAgain(t *testing.T) {
	store := testenv.ClickHouse(t) // migrated
	ctx := context.Background()
	if err := store.Conn().Exec(ctx, "DROP TABLE schema_migrations"); err != nil {
		t.Fatal(err)
	}
	ran, err := store.Migrate(ctx)
	if err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	if len(ran) == 0 {
		t.Fatal("nothing ran again")
	}
	if err := store.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
}
