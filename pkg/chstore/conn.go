package chstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// gate bounds the statements in flight to the pool's size and how long a
// statement waits for one to come free. The driver would also wait, but for
// its DialTimeout, which must stay short so that an unreachable server is
// reported promptly; the gate lets the two differ.
type gate struct {
	slots chan struct{}
	wait  time.Duration
}

func (g *gate) acquire(ctx context.Context) (func(), error) {
	select {
	case g.slots <- struct{}{}:
	default:
		timer := time.NewTimer(g.wait)
		defer timer.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-timer.C:
			return nil, fmt.Errorf("%w: %d statements in flight for %s", statement.ErrGateTimeout, cap(g.slots), g.wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-g.slots }) }, nil
}

// classifyingConn is the pool as the rest of the service sees it: every
// statement first takes a slot of the gate, and every error it returns,
// however late (a Scan, rows.Err, a batch's Send), passes through Classify.
// Packages that take a driver.Conn from Store.Conn (activity, deletion,
// plugins) get the same treatment. A writer's statements get their query
// ids here too (writer.go).
type classifyingConn struct {
	driver.Conn
	gate     *gate
	database string // a writer's query ids name it
	record   string // the recording's folder (statement/record.go); "": none
}

func (c *classifyingConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	ctx = c.withQueryID(ctx)
	release, err := c.gate.acquire(ctx)
	if err != nil {
		return nil, statement.Classify(err)
	}
	rows, err := c.Conn.Query(ctx, query, args...)
	if err != nil {
		release()
		return nil, statement.Classify(err)
	}
	return &classifyingRows{Rows: rows, release: release}, nil
}

func (c *classifyingConn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	ctx = c.withQueryID(ctx)
	release, err := c.gate.acquire(ctx)
	if err != nil {
		return errRow{statement.Classify(err)}
	}
	// The driver reads the whole row before returning.
	row := c.Conn.QueryRow(ctx, query, args...)
	release()
	return classifyingRow{row}
}

func (c *classifyingConn) Select(ctx context.Context, dest any, query string, args ...any) error {
	ctx = c.withQueryID(ctx)
	return c.do(ctx, func() error { return c.Conn.Select(ctx, dest, query, args...) })
}

func (c *classifyingConn) Exec(ctx context.Context, query string, args ...any) error {
	ctx = c.withQueryID(ctx)
	return c.do(ctx, func() error { return c.Conn.Exec(ctx, query, args...) })
}

func (c *classifyingConn) Ping(ctx context.Context) error {
	return c.do(ctx, func() error { return c.Conn.Ping(ctx) })
}

func (c *classifyingConn) AsyncInsert(ctx context.Context, query string, wait bool, args ...any) error {
	ctx = c.withQueryID(ctx)
	return c.do(ctx, func() error { return c.Conn.AsyncInsert(ctx, query, wait, args...) }) //nolint:staticcheck // forwarded as is
}

func (c *classifyingConn) do(ctx context.Context, fn func() error) error {
	release, err := c.gate.acquire(ctx)
	if err != nil {
		return statement.Classify(err)
	}
	defer release()
	return statement.Classify(fn())
}

func (c *classifyingConn) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	ctx = c.withQueryID(ctx)
	release, err := c.gate.acquire(ctx)
	if err != nil {
		return nil, statement.Classify(err)
	}
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		release()
		return nil, statement.Classify(err)
	}
	return &classifyingBatch{Batch: b, release: release}, nil
}

type classifyingRows struct {
	driver.Rows
	release func()
}

func (r *classifyingRows) Scan(dest ...any) error { return statement.Classify(r.Rows.Scan(dest...)) }
func (r *classifyingRows) ScanStruct(dest any) error {
	return statement.Classify(r.Rows.ScanStruct(dest))
}
func (r *classifyingRows) Err() error { return statement.Classify(r.Rows.Err()) }

func (r *classifyingRows) Close() error {
	err := r.Rows.Close()
	r.release()
	return statement.Classify(err)
}

type classifyingRow struct{ driver.Row }

func (r classifyingRow) Err() error                { return statement.Classify(r.Row.Err()) }
func (r classifyingRow) Scan(dest ...any) error    { return statement.Classify(r.Row.Scan(dest...)) }
func (r classifyingRow) ScanStruct(dest any) error { return statement.Classify(r.Row.ScanStruct(dest)) }

// errRow is a row that could not be queried.
type errRow struct{ err error }

func (r errRow) Err() error           { return r.err }
func (r errRow) Scan(...any) error    { return r.err }
func (r errRow) ScanStruct(any) error { return r.err }

// classifyingBatch holds its slot until it is sent or aborted, as the
// driver holds the connection.
type classifyingBatch struct {
	driver.Batch
	release func()
}

func (b *classifyingBatch) Append(v ...any) error { return statement.Classify(b.Batch.Append(v...)) }
func (b *classifyingBatch) AppendStruct(v any) error {
	return statement.Classify(b.Batch.AppendStruct(v))
}
func (b *classifyingBatch) Flush() error { return statement.Classify(b.Batch.Flush()) }

func (b *classifyingBatch) Send() error {
	defer b.release()
	return statement.Classify(b.Batch.Send())
}

func (b *classifyingBatch) Abort() error {
	defer b.release()
	return statement.Classify(b.Batch.Abort())
}

func (b *classifyingBatch) Close() error {
	defer b.release()
	return statement.Classify(b.Batch.Close())
}
