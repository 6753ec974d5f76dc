package chstore

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// A writer's statements outlive it on the server. ClickHouse runs an
// INSERT until its data ends, whatever became of the client: an ingester
// killed (or cut off) right after sending a batch's rows leaves the server
// writing them, and the views that count them, for as long as it takes.
// The next tenure of the consumer's lease reads what is stored (its
// commit, the rows of an uncommitted batch, events_hourly's sums) and
// must not read it while the old tenure's statements still write: it
// would miss rows that land a moment later (and write them again: two
// events rows of one message), or restore a count the late view then
// counts too (events_hourly above its events). So every statement of an
// ingester carries a query id that names its consumer (AsWriter), and
// recovery first ends the consumer's statements still running
// (SettleWriter).

// writerKey is the context key of a writer's consumer name.
type writerKey struct{}

// AsWriter tags the statements made with ctx as consumer's: each gets its
// own query id starting with the consumer's prefix.
func AsWriter(ctx context.Context, consumer string) context.Context {
	return context.WithValue(ctx, writerKey{}, consumer)
}

// withQueryID gives a statement of a tagged context its query id (a
// running query id must be unique on the server).
// A recording store (statement/record.go) gives every other statement
// one too, and records the external tables it sends under that id.
func (c *classifyingConn) withQueryID(ctx context.Context) context.Context {
	consumer, _ := ctx.Value(writerKey{}).(string)
	var id string
	switch {
	case consumer != "":
		id = statement.WriterPrefix(c.database, consumer) + uuid.NewString()
	case c.record != "":
		id = statement.RecordingID(c.database)
	default:
		return ctx
	}
	if c.record != "" {
		statement.RecordExternal(c.record, id, ctx)
	}
	return clickhouse.Context(ctx, clickhouse.WithQueryID(id))
}

// SettleWriter waits until no statement of consumer runs on the server,
// so that nothing of an earlier tenure writes after it returns. Call it
// holding the consumer's lease, before reading what an uncommitted batch
// left. It asks the server to end them first (KILL QUERY ... ASYNC), which
// ClickHouse 24.x does for a SELECT or an INSERT ... SELECT; 18.16 refuses
// to kill an INSERT ("unkillable stages"), and the wait then lasts until
// the server ends it: at once when the client is gone (a killed process:
// its socket is closed), or after receive_timeout (300 s by default) when
// its host went quiet. The kill is a courtesy; the wait is what recovery
// relies on.
//
// It reaches the server this store is connected to: on a cluster, the
// node that ran the ingester's inserts into the Distributed tables (their
// inserts on the shards end with them); docs/operations.md.
func (s *Store) SettleWriter(ctx context.Context, consumer string) error {
	// Its own statements are not tagged, so they cannot match.
	ctx = context.WithValue(ctx, writerKey{}, "")
	prefix := statement.WriterPrefix(s.database, consumer)
	const match = "substring(query_id, 1, ?) = ?"
	for attempt := 0; ; attempt++ {
		var left uint64
		err := s.conn.QueryRow(ctx, "SELECT count() FROM system.processes WHERE "+match, uint64(len(prefix)), prefix).Scan(&left)
		if err != nil {
			return wrap("list the consumer's statements", err)
		}
		if left == 0 {
			return nil
		}
		if attempt == 0 {
			// Answered with a row per statement, its status in it; an
			// error (a server without the right) leaves the wait.
			if rows, err := s.conn.Query(ctx, "KILL QUERY WHERE "+match+" ASYNC", uint64(len(prefix)), prefix); err == nil {
				for rows.Next() {
				}
				rows.Close()
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(20*time.Millisecond<<min(attempt, 6), time.Second)):
		}
	}
}
