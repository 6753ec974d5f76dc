package eventstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestReserveStrings: the events batch's properties buffer is reserved
// before it is filled (statement.ReserveStrings reaches the driver's unexported buffer;
// a driver whose layout changed fails here instead of silently growing the
// buffer by doubling again), and rows written through it read back as
// written.
func TestReserveStrings(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	ok, err := store.Events().ReserveProperties(ctx, 1000, 300_000)
	if err != nil || !ok {
		t.Fatalf("properties column not reserved (%v): does the driver's column.String still hold a proto.ColStr named col?", err)
	}
}
