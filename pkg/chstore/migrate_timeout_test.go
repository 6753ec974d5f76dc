package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestMigrationStatementsOutliveTheReadTimeout: clickhouse-go's read
// timeout cuts any statement that runs longer, so a backfill over many
// events failed at 60 s. Migration statements run under the store's
// MigrationTimeout instead, and it bounds them.
func TestMigrationStatementsOutliveTheReadTimeout(t *testing.T) {
	st := testenv.ClickHouse(t)
	ctx := context.Background()
	const slow = "SELECT sleep(2)" // 18.16 sleeps at most 3 s per block
	open := func(cfg chstore.Config) *chstore.Store {
		cfg.Addr, cfg.Database = testenv.ClickHouseAddr(t), st.Database()
		s, err := chstore.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	short := open(chstore.Config{ReadTimeout: time.Second})
	if err := short.Conn().Exec(ctx, slow); err == nil {
		t.Fatal("a 2-s statement passed a 1-s read timeout: the test no longer shows what it guards")
	}
	if err := short.MigrationExec(ctx, slow); err != nil {
		t.Fatalf("a 2-s migration statement under a 1-s read timeout: %v", err)
	}
	bounded := open(chstore.Config{MigrationTimeout: time.Second})
	if err := bounded.MigrationExec(ctx, slow); err == nil {
		t.Fatal("a 2-s migration statement passed a 1-s migration timeout")
	}
}
