package chstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestCancelAfterSendLeavesThePoolWhole ends each insert's context right
// after its Send returned, as the ingester's concurrent writes do (an
// errgroup's context ends when the group does), then runs a statement on
// the same, only, pooled connection. clickhouse-go before 2.51 watched a
// batch's context from a goroutine that could still close the TCP
// connection after Send had returned it to the pool: the next statement
// on it failed with "use of closed network connection" (a flake seen in
// CI, a stray failed batch or 503 in production).
func TestCancelAfterSendLeavesThePoolWhole(t *testing.T) {
	st := testenv.ClickHouse(t)
	one, err := chstore.Open(context.Background(), chstore.Config{Addr: testenv.ClickHouseAddr(t), Database: st.Database(), MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	conn := one.Conn()
	bg := context.Background()
	if err := conn.Exec(bg, "CREATE TABLE pool_probe (x UInt64) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		ctx, cancel := context.WithCancel(bg)
		b, err := conn.PrepareBatch(ctx, "INSERT INTO pool_probe (x)")
		if err != nil {
			cancel()
			t.Fatalf("round %d: prepare: %v", i, err)
		}
		if err := b.Append(uint64(i)); err != nil {
			cancel()
			t.Fatal(err)
		}
		err = b.Send()
		cancel()
		if err != nil {
			t.Fatalf("round %d: send: %v", i, err)
		}
		var n uint64
		if err := conn.QueryRow(bg, "SELECT count() FROM pool_probe").Scan(&n); err != nil {
			t.Fatalf("round %d: the statement after a cancelled, sent insert: %v", i, err)
		}
		if n != uint64(i+1) {
			t.Fatalf("round %d: %d rows", i, n)
		}
	}
}
