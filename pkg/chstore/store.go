// Package chstore is the ClickHouse side of the service: migrations, the
// ingester's reads and batch writes, and the API's person queries. Every
// statement runs on ClickHouse 18.16 and 24.x; values are always bound
// through the driver's placeholders, never spliced into SQL text.
package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Config says where ClickHouse is.
type Config struct {
	Addr     string // host:port of the native protocol
	Database string
	Username string
	Password string
}

// Store wraps one connection pool.
type Store struct {
	conn     driver.Conn
	database string
}

// Open connects and pings. It creates the database when it is missing, so
// a fresh server needs nothing but `migrate`.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Database == "" {
		cfg.Database = "default"
	}
	opts := &clickhouse.Options{
		Addr:        []string{cfg.Addr},
		Auth:        clickhouse.Auth{Username: cfg.Username, Password: cfg.Password},
		DialTimeout: 5 * time.Second,
		// A person read waits on no batch; keep enough connections for
		// concurrent requests and the ingester's writes.
		MaxOpenConns: 32,
		MaxIdleConns: 16,
	}
	boot, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, err)
	}
	if err := boot.Ping(ctx); err != nil {
		boot.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, err)
	}
	err = boot.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(cfg.Database))
	boot.Close()
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", cfg.Database, err)
	}
	opts.Auth.Database = cfg.Database
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, err
	}
	return &Store{conn: conn, database: cfg.Database}, nil
}

// Close closes the pool.
func (s *Store) Close() error { return s.conn.Close() }

// Conn exposes the driver for benchmarks and tests.
func (s *Store) Conn() driver.Conn { return s.conn }

// Ping checks the connection, for readiness probes.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// quoteIdent quotes a database name for the few statements that cannot
// take it as a parameter.
func quoteIdent(s string) string {
	out := []byte{'`'}
	for i := 0; i < len(s); i++ {
		if s[i] == '`' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(append(out, '`'))
}

// Database is the database this store reads and writes.
func (s *Store) Database() string { return s.database }

// insertRow inserts one row through a batch: clickhouse-go's Exec of an
// INSERT ... VALUES with arguments hangs against ClickHouse 18.16.
func (s *Store) insertRow(ctx context.Context, insert string, values ...any) error {
	batch, err := s.conn.PrepareBatch(ctx, insert)
	if err != nil {
		return err
	}
	if err := batch.Append(values...); err != nil {
		batch.Abort()
		return err
	}
	return batch.Send()
}
