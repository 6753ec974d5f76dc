// Package statement holds what every owner of ClickHouse tables shares to
// build and run its statements: their settings (priorities, bound values),
// how values are bound, which errors mean ClickHouse cannot answer now
// (Classify), and the recording of statements that test/portability
// replays (record.go). It holds no table's SQL: each table's statements
// live in the package that owns it (docs/architecture.md).
package statement

import (
	"context"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// ClickHouse query priorities (the `priority` setting, on 18.16 and
// current versions: 1 is the highest, 0 takes no part). While a query of
// a higher priority runs, one of a lower priority pauses between blocks
// (up to a second each time), so its threads leave the CPU to the other.
// A user waiting for a person or a list page outranks the fold's lookups
// (GET person while ingesting); analysis, exports and the ingester's
// inserts and merges take no part. The cost is the ingester's: its
// lookups wait while API reads run (docs/performance.md).
// Background reads the API makes for itself (search='s gram census) come
// last, behind both.
const (
	KeyReadPriority    = 1
	LoaderPriority     = 2
	BackgroundPriority = 3
)

// MaxQuerySize is the max_query_size of statements with bound values. The
// driver splices bound values into the statement's text, so a long filter
// value or a batch's id list would exceed ClickHouse's default of 256 KiB
// of SQL. 32 MiB is far above what one request can carry (Go's HTTP
// server reads at most 1 MiB of request line and headers by default).
const MaxQuerySize = 32 << 20

// Bound returns ctx with the settings of a statement with bound values
// (max_query_size) and extra ones. It is the one place that sets them:
// the driver keeps one settings map per context, so settings applied in
// two steps would replace each other.
func Bound(ctx context.Context, extra clickhouse.Settings) context.Context {
	settings := clickhouse.Settings{"max_query_size": MaxQuerySize}
	for k, v := range extra {
		settings[k] = v
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(settings))
}

// Read keeps filters after FINAL: moving a WHERE on a non-key column to
// PREWHERE would test old versions of a row (ClickHouse 18.16). Filter
// values may be long (Bound).
func Read(ctx context.Context) context.Context {
	return Bound(ctx, clickhouse.Settings{"optimize_move_to_prewhere": 0})
}

// KeyRead is Read for the API's reads by key (GET person, the list's
// page), at KeyReadPriority.
func KeyRead(ctx context.Context) context.Context {
	return Bound(ctx, clickhouse.Settings{"optimize_move_to_prewhere": 0, "priority": KeyReadPriority})
}

// Loader runs the ingester's lookups at a lower priority than the API's
// key reads (KeyRead).
func Loader(ctx context.Context) context.Context {
	return Bound(ctx, clickhouse.Settings{"priority": LoaderPriority})
}

// Chunk bounds the keys in one IN list spliced into a statement by the
// driver (the recovery's checks and restores): such reads raise
// max_query_size (Bound). The fold's lookups send theirs as an external
// table instead.
const Chunk = 50_000

// Marks is n placeholders, comma-separated, for a list spliced as
// arguments (event IN (?, ?, ?)).
func Marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// Args is values as a statement's arguments, one each (for Marks).
func Args[T any](values []T) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// Set binds a list as a parenthesised group for IN; a plain slice binds as
// an array, which ClickHouse 18.16 does not accept after IN.
func Set[T any](values []T) clickhouse.GroupSet { return clickhouse.GroupSet{Value: Args(values)} }

// InArray is the operand of IN for a long list bound as a plain slice (the
// driver writes it as one array literal, [1, 2, ...]) of the ClickHouse
// type typ: `person_id IN `+InArray("UInt64"). On 18.16 every value of a
// list bound with Set is an element of the statement's tree, and a
// mutation analyses that tree again for each part it rewrites: with
// 100,000 ids, 0.7 s a part, against 0.1 s a part for this form, whose
// array is one element (and stays under max_ast_elements). The same set,
// built once from the subquery, serves the primary key as an IN list
// does.
func InArray(typ string) string { return "(SELECT arrayJoin(CAST(? AS Array(" + typ + "))))" }

// KeyTable is a lookup's keys as an external table of one column, key.
// Spliced into the statement as an IN list, a batch's ids were parsed by
// ClickHouse literal by literal (7.5% of its CPU in a profile of the
// ingest benchmark), and the
// driver boxed and quoted each one. A block of one column is neither.
// The lookup runs at the loader's priority (Loader).
func KeyTable[T any](ctx context.Context, typ string, keys []T) (context.Context, error) {
	tbl, err := ext.NewTable("keys", ext.Column("key", column.Type(typ)))
	if err != nil {
		return nil, err
	}
	if _, err := tbl.Block().Columns[0].Append(keys); err != nil {
		return nil, err
	}
	return WithExternalTables(Loader(ctx), tbl), nil
}

// BoolByte is b as a UInt8 column stores it.
func BoolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
