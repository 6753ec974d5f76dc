package chstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/personhub/personhub/schema"
)

// ErrStaleSchema is returned by CheckSchema when migrations are pending.
var ErrStaleSchema = errors.New("schema is not up to date")

// Migration is one numbered schema file.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
	// OnlyIf is a statement answering one UInt8, from the file's line
	// "-- only if: <statement>": when it answers 0, Migrate records the
	// migration without running it (a database already in the shape it
	// makes, such as the cluster DDL of docs/operations.md).
	OnlyIf string
}

// onlyIfPrefix starts a migration's condition line.
const onlyIfPrefix = "-- only if: "

// Migrations returns the embedded migrations in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(schema.Files, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", name)
		}
		body, err := fs.ReadFile(schema.Files, name)
		if err != nil {
			return nil, err
		}
		m := Migration{Version: uint32(v), Name: name}
		for _, line := range strings.Split(string(body), "\n") {
			if cond, ok := strings.CutPrefix(line, onlyIfPrefix); ok {
				m.OnlyIf = strings.TrimSpace(cond)
			}
		}
		for _, st := range strings.Split(string(body), "\n;\n") {
			if strings.TrimSpace(StripComments(st)) != "" {
				m.Statements = append(m.Statements, st)
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %d", out[i].Version)
		}
	}
	return out, nil
}

// StripComments drops a statement's comment lines (those starting "--").
func StripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

const versionTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    UInt32,
    name       String,
    applied_at DateTime('UTC')
) ENGINE = MergeTree ORDER BY version`

// MigrationTarget is a database that migrations are applied to: a
// store's, or another engine's (test/portability applies them to current
// ClickHouse in process as well as to the tests' server).
type MigrationTarget interface {
	// Exec runs a statement that answers nothing.
	Exec(ctx context.Context, statement string) error
	// Uints runs a query answering one unsigned integer column.
	Uints(ctx context.Context, query string) ([]uint64, error)
}

// storeTarget is a store's database as a MigrationTarget. With a
// timeout, each statement runs under that deadline (or ctx's, when
// earlier): clickhouse-go takes a context's deadline in place of its read
// timeout, which would otherwise cut a backfill after ReadTimeout. Without
// one (CheckSchema's reads), the read timeout bounds them as any read.
type storeTarget struct {
	s       *Store
	timeout time.Duration
}

// bound is ctx under the target's timeout, if it has one.
func (t storeTarget) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, t.timeout)
}

func (t storeTarget) Exec(ctx context.Context, statement string) error {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	return t.s.conn.Exec(ctx, statement)
}

func (t storeTarget) Uints(ctx context.Context, query string) ([]uint64, error) {
	ctx, cancel := t.bound(ctx)
	defer cancel()
	rows, err := t.s.conn.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	if len(types) != 1 {
		return nil, fmt.Errorf("%d columns, not 1: %s", len(types), query)
	}
	var out []uint64
	for rows.Next() {
		v := reflect.New(types[0].ScanType())
		if err := rows.Scan(v.Interface()); err != nil {
			return nil, err
		}
		switch e := v.Elem(); e.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out = append(out, e.Uint())
		case reflect.Bool:
			n := uint64(0)
			if e.Bool() {
				n = 1
			}
			out = append(out, n)
		default:
			return nil, fmt.Errorf("%s answers %s, not an unsigned integer", query, types[0].DatabaseTypeName())
		}
	}
	return out, rows.Err()
}

// applied returns the migration versions recorded in the database.
func applied(ctx context.Context, t MigrationTarget) (map[uint32]bool, error) {
	exists, err := t.Uints(ctx, "SELECT count() > 0 FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'")
	if err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	done := map[uint32]bool{}
	if len(exists) != 1 || exists[0] == 0 {
		return done, nil
	}
	versions, err := t.Uints(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	for _, v := range versions {
		done[uint32(v)] = true
	}
	return done, nil
}

// Migrate applies pending migrations in order and records each. Statements
// use IF NOT EXISTS, so a migration interrupted half way can run again.
func (s *Store) Migrate(ctx context.Context) ([]Migration, error) {
	return ApplyMigrations(ctx, storeTarget{s, s.migrationTimeout})
}

// ApplyMigrations applies the migrations t lacks in order and records
// each in its schema_migrations.
func ApplyMigrations(ctx context.Context, t MigrationTarget) ([]Migration, error) {
	if err := t.Exec(ctx, versionTable); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	done, err := applied(ctx, t)
	if err != nil {
		return nil, err
	}
	var ran []Migration
	for _, m := range all {
		if done[m.Version] {
			continue
		}
		statements := m.Statements
		if m.OnlyIf != "" {
			yes, err := t.Uints(ctx, m.OnlyIf)
			if err != nil {
				return ran, fmt.Errorf("migration %s: its condition: %w", m.Name, err)
			}
			if len(yes) != 1 || yes[0] == 0 {
				statements = nil // recorded, not run
			}
		}
		for _, st := range statements {
			if err := t.Exec(ctx, st); err != nil && !addedBefore(st, err) {
				return ran, fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		// Names are the embedded files' (digits, letters, '_', '.'). An
		// INSERT ... SELECT, as the driver sends an INSERT ... VALUES
		// statement's rows as a block, not with the statement.
		record := fmt.Sprintf("INSERT INTO schema_migrations (version, name, applied_at) SELECT %d, '%s', now()", m.Version, m.Name)
		if err := t.Exec(ctx, record); err != nil {
			return ran, fmt.Errorf("record migration %s: %w", m.Name, err)
		}
		ran = append(ran, m)
	}
	return ran, nil
}

// addedBefore reports whether an ALTER TABLE ... ADD COLUMN failed because
// an interrupted run of its migration already added the column (18.16 has
// no ADD COLUMN IF NOT EXISTS), so the migration can run again. 18.16
// reports it as ILLEGAL_COLUMN (44), later versions as DUPLICATE_COLUMN
// (15); both say the column already exists.
func addedBefore(statement string, err error) bool {
	code := ErrorCode(err)
	return (code == 15 || code == 44) &&
		strings.Contains(err.Error(), "already exists") &&
		strings.Contains(strings.ToUpper(StripComments(statement)), "ADD COLUMN")
}

// ErrorCode is ClickHouse's code of an error a server sent (0 if none):
// the driver's exception, or "Code: N." in the text of an engine's error
// that is not the driver's (an in-process ClickHouse).
func ErrorCode(err error) int {
	var ex *proto.Exception
	if errors.As(err, &ex) {
		return int(ex.Code)
	}
	if err == nil {
		return 0
	}
	m := errorCodeRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var errorCodeRe = regexp.MustCompile(`\bCode: (\d+)[.,]`)

// CheckSchema returns ErrStaleSchema, naming the pending migrations, when the
// database is behind this binary.
func (s *Store) CheckSchema(ctx context.Context) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	done, err := applied(ctx, storeTarget{s, 0})
	if err != nil {
		return err
	}
	var pending []string
	for _, m := range all {
		if !done[m.Version] {
			pending = append(pending, m.Name)
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w: database %q lacks %s; apply them with `ingester migrate` (or `make migrate`)",
			ErrStaleSchema, s.database, strings.Join(pending, ", "))
	}
	return nil
}
