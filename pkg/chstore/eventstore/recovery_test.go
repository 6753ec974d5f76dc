package eventstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestWrittenEventsReadsBySortKey: the ingester's lookup of a batch's
// rows already in events finds exactly those, and reads the granules of
// the batch's (project, date, event) pairs, not the table: 400k rows of
// other pairs around them (the same date, the same event on other days,
// another project) stay unread.
func TestWrittenEventsReadsBySortKey(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	day := time.Date(2024, 3, 5, 0, 0, 0, 0, time.UTC)
	noise := []string{
		"SELECT 1, 'noise', toDateTime(?) + number % 86400, number FROM system.numbers LIMIT 100000",            // same day, other event
		"SELECT 1, 'a', toDateTime(?) + 86400 + number % (20 * 86400), number FROM system.numbers LIMIT 200000", // same event, other days
		"SELECT 2, 'a', toDateTime(?) + number % 86400, number FROM system.numbers LIMIT 100000",                // another project
	}
	for _, sel := range noise {
		if err := store.Conn().Exec(ctx, `INSERT INTO events (project_id, event, timestamp, seq) `+sel, day.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	var batch []eventstore.Row
	for i := range 100 {
		batch = append(batch, eventstore.Row{ProjectID: 1, UUID: uuid.New(), Event: []string{"a", "b"}[i%2], DistinctID: "d",
			Timestamp: day.Add(time.Duration(i) * time.Minute), Properties: "{}", Seq: uint64(1_000_000 + i)})
	}
	// A partial write: every third row of the batch landed.
	var landed []eventstore.Row
	for i, r := range batch {
		if i%3 == 0 {
			landed = append(landed, r)
		}
	}
	if err := store.WriteRows(ctx, landed, fold.Batch{}); err != nil {
		t.Fatal(err)
	}
	var read atomic.Uint64
	counted := clickhouse.Context(ctx, clickhouse.WithProgress(func(p *clickhouse.Progress) { read.Add(p.Rows) }))
	for _, rows := range [][]eventstore.Row{batch, batch[3:4], batch[:1]} {
		read.Store(0)
		got, err := store.Events().Written(counted, rows)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]bool{}
		for _, r := range rows {
			if (r.Seq-1_000_000)%3 == 0 {
				want[r.Seq] = true
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("rows already written: %v, want %v", got, want)
		}
		// Each pair's rows sit in a granule or two (8192 rows each).
		t.Logf("%d rows: %d read", len(rows), read.Load())
		if n := read.Load(); n == 0 || n > 4*8192 {
			t.Fatalf("the lookup read %d rows: not by the sort key", n)
		}
	}
}
