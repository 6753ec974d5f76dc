package chstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
			if strings.TrimSpace(stripComments(st)) != "" {
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

func stripComments(s string) string {
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

// applied returns the migration versions recorded in the database.
func (s *Store) applied(ctx context.Context) (map[uint32]bool, error) {
	var exists uint8
	if err := s.conn.QueryRow(ctx, "SELECT count() > 0 FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'").Scan(&exists); err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	done := map[uint32]bool{}
	if exists == 0 {
		return done, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema version: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

// Migrate applies pending migrations in order and records each. Statements
// use IF NOT EXISTS, so a migration interrupted half way can run again.
func (s *Store) Migrate(ctx context.Context) ([]Migration, error) {
	if err := s.conn.Exec(ctx, versionTable); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	done, err := s.applied(ctx)
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
			var yes uint8
			if err := s.conn.QueryRow(ctx, m.OnlyIf).Scan(&yes); err != nil {
				return ran, fmt.Errorf("migration %s: its condition: %w", m.Name, err)
			}
			if yes == 0 {
				statements = nil // recorded, not run
			}
		}
		for _, st := range statements {
			if err := s.conn.Exec(ctx, st); err != nil && !addedBefore(st, err) {
				return ran, fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if err := s.insertRow(ctx, "INSERT INTO schema_migrations (version, name, applied_at)",
			m.Version, m.Name, time.Now().UTC()); err != nil {
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
	var ex *proto.Exception
	return errors.As(err, &ex) && (ex.Code == 15 || ex.Code == 44) &&
		strings.Contains(ex.Message, "already exists") &&
		strings.Contains(strings.ToUpper(stripComments(statement)), "ADD COLUMN")
}

// CheckSchema returns ErrStaleSchema, naming the pending migrations, when the
// database is behind this binary.
func (s *Store) CheckSchema(ctx context.Context) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	done, err := s.applied(ctx)
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
