// Package chstore is the ClickHouse side of the service: the connection
// pool (gated, its errors classified), the server's version, migrations,
// the persons' tables and their list, and the ingester's batch write,
// which calls each table owner's writer in the order crash safety needs
// (WriteBatch). Tables with an owner of their own are written and read
// through it: eventstore (events and its views), search (the emails'
// index), distinctids (person_distinct_ids and its overrides); what the
// owners share to build statements is in statement. Every statement runs
// on ClickHouse 18.16 and 24.x; values are always bound through the
// driver's placeholders, never spliced into SQL text.
package chstore

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/chstore/search"
	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Config says where ClickHouse is and how the pool behaves. Zero values
// take the defaults below (docs/operations.md, "ClickHouse connections").
type Config struct {
	Addr     string // host:port of the native protocol
	Database string
	Username string
	Password string

	// MaxOpenConns bounds the statements in flight (default 64). Every
	// one is a query on the server: keep the sum over all processes below
	// the server's max_concurrent_queries (100 by default, 200 in
	// chlocal's configuration).
	MaxOpenConns int
	// AcquireTimeout bounds the wait for a free connection when all are
	// busy (default 10s); then the statement fails with ErrUnavailable.
	AcquireTimeout time.Duration
	// DialTimeout bounds connecting (default 3s), so an unreachable
	// server is reported promptly.
	DialTimeout time.Duration
	// ReadTimeout bounds each statement (default 60s): a hung server
	// fails statements instead of holding them. clickhouse-go sets it as
	// one read deadline for the whole statement, not per packet, unless
	// the statement's context has a deadline, which replaces it; so it
	// is also the longest any statement without such a context may run.
	ReadTimeout time.Duration
	// MigrationTimeout bounds each migration statement instead (default
	// DefaultMigrationTimeout): a backfill reads every stored event once,
	// which can take far longer than ReadTimeout.
	MigrationTimeout time.Duration
	// RowCacheBytes bounds the persons' rows the list keeps by version
	// (rowcache.go; default DefaultRowCacheBytes, negative: none).
	RowCacheBytes int
	// ThreadNice asks ClickHouse to run every statement of this store on
	// threads at this niceness (1..19; 0: as the server runs them), through
	// the os_thread_priority setting. Servers before 19.x lack the setting
	// (18.16 refuses an unknown one), so it is sent only when the server
	// lists it; current servers apply it only when they hold CAP_SYS_NICE,
	// and ignore it otherwise (docs/operations.md, "CPU priority"). The
	// ingester sets it, so that its inserts and lookups yield the server's
	// cores to the API's reads.
	ThreadNice int
}

// Default pool settings.
const (
	DefaultMaxOpenConns   = 64
	DefaultAcquireTimeout = 10 * time.Second
	DefaultDialTimeout    = 3 * time.Second
	DefaultReadTimeout    = 60 * time.Second
	// DefaultMigrationTimeout leaves a backfill hours: migration 0019
	// reads every event's properties once.
	DefaultMigrationTimeout = 6 * time.Hour
)

func (c *Config) defaults() {
	if c.Database == "" {
		c.Database = "default"
	}
	if c.RowCacheBytes == 0 {
		c.RowCacheBytes = DefaultRowCacheBytes
	}
	if c.MaxOpenConns <= 0 {
		c.MaxOpenConns = DefaultMaxOpenConns
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = DefaultAcquireTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.MigrationTimeout <= 0 {
		c.MigrationTimeout = DefaultMigrationTimeout
	}
}

// Store wraps one connection pool.
type Store struct {
	conn     driver.Conn // a classifyingConn
	database string
	version  Version // the server's (version.go)
	// threadNice is what the statements ask of the server (ThreadNice).
	threadNice int
	// migrationTimeout is Config.MigrationTimeout.
	migrationTimeout time.Duration
	values           *valueCounts // CountPropertyValues (values_counts.go); nil: not kept
	// counts is the ingesters' per-project live-person counts (the
	// writer's side of person_counts; unused by readers), one state per
	// consumer: the partitions one process runs share this Store, and
	// each has its own commit point.
	counts *consumerCounts
	newest *newestIndex // listnewest.go
	// firstHints place the windows of shallow unfiltered pages
	// (listfirst.go).
	firstHints *firstHints
	rows       *rowCache         // the list pages' rows by version (rowcache.go)
	marks      *markedLists      // unfiltered pages by watermark (listmark.go)
	search     *search.Index     // the emails' index of search= and email=
	events     *eventstore.Store // events and the tables its views fill
	// distinctIDs is person_distinct_ids and its overrides' owner.
	distinctIDs *distinctids.Store
}

// Open connects and pings. It creates the database when it is missing, so
// a fresh server needs nothing but `migrate`.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.defaults()
	opts := &clickhouse.Options{
		Addr:        []string{cfg.Addr},
		Auth:        clickhouse.Auth{Username: cfg.Username, Password: cfg.Password},
		DialTimeout: cfg.DialTimeout,
		ReadTimeout: cfg.ReadTimeout,
		// The gate admits at most MaxOpenConns statements, so the driver
		// never waits for a connection. As many stay idle, so a burst
		// does not close and redial connections.
		MaxOpenConns: cfg.MaxOpenConns,
		MaxIdleConns: cfg.MaxOpenConns,
	}
	boot, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, statement.Classify(err))
	}
	if err := boot.Ping(ctx); err != nil {
		boot.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, statement.Classify(err))
	}
	version, err := serverVersion(ctx, boot)
	if err != nil {
		boot.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, statement.Classify(err))
	}
	err = boot.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(cfg.Database))
	if err != nil {
		boot.Close()
		return nil, fmt.Errorf("create database %s: %w", cfg.Database, statement.Classify(err))
	}
	settings := clickhouse.Settings{}
	threadNice := 0
	if cfg.ThreadNice != 0 {
		ok, err := optionalSetting(ctx, boot, threadNiceSetting, cfg.ThreadNice)
		if err != nil {
			boot.Close()
			return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, statement.Classify(err))
		}
		if ok {
			threadNice = cfg.ThreadNice
			settings[threadNiceSetting] = threadNice
		}
	}
	// ClickHouse 26.2 turned async_insert on by default: the server then
	// holds each INSERT in a buffer, for up to its busy timeout, before
	// it writes a part, and the INSERT returns when the part is written.
	// The service batches its own inserts (the ingester a batch a
	// statement), so the buffer would only add its wait to every batch
	// and to every row the API writes: where the server has the setting,
	// the statements turn it off.
	syncInserts, err := optionalSetting(ctx, boot, asyncInsertSetting, 0)
	if err != nil {
		boot.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", cfg.Addr, statement.Classify(err))
	}
	if syncInserts {
		settings[asyncInsertSetting] = 0
	}
	if len(settings) > 0 {
		opts.Settings = settings
	}
	boot.Close()
	opts.Auth.Database = cfg.Database
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, statement.Classify(err)
	}
	g := &gate{slots: make(chan struct{}, cfg.MaxOpenConns), wait: cfg.AcquireTimeout}
	s := &Store{conn: &classifyingConn{Conn: conn, gate: g, database: cfg.Database, record: os.Getenv(statement.RecordEnv)}, database: cfg.Database, version: version, threadNice: threadNice, migrationTimeout: cfg.MigrationTimeout, values: newValueCounts(), counts: &consumerCounts{by: map[string]*liveCounts{}}, newest: newNewestIndex(),
		firstHints: &firstHints{by: map[uint64]firstHint{}}, rows: newRowCache(cfg.RowCacheBytes), marks: newMarkedLists()}
	s.search = search.New(s.conn, func(ctx context.Context, project uint64) (uint64, bool, error) {
		live, _, ok, err := s.LiveCount(ctx, project)
		return live, ok, err
	})
	s.events = eventstore.New(s.conn)
	s.distinctIDs = distinctids.New(s.conn)
	return s, nil
}

// threadNiceSetting is the statement setting that sets the niceness of
// the server's threads running it (ClickHouse 19.x and later; an alias of
// os_threads_nice_value_query since 25.9).
const threadNiceSetting = "os_thread_priority"

// asyncInsertSetting has the server buffer INSERTs (21.11 and later; on
// by default from 26.2).
const asyncInsertSetting = "async_insert"

// optionalSetting reports whether the statements can carry the setting
// name = value: the server lists it (18.16 refuses an unknown setting),
// and a settings constraint of the user's profile does not refuse it.
func optionalSetting(ctx context.Context, conn driver.Conn, name string, value any) (bool, error) {
	has, err := hasSetting(ctx, conn, name)
	if err != nil || !has {
		return false, err
	}
	return conn.Exec(clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{name: value})), "SELECT 1") == nil, nil
}

// hasSetting reports whether the server knows the statement setting name.
func hasSetting(ctx context.Context, conn driver.Conn, name string) (bool, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = ?", name).Scan(&n)
	return n > 0, err
}

// ThreadNice is the niceness the store's statements ask the server for:
// Config.ThreadNice when the server has the setting, else 0.
func (s *Store) ThreadNice() int { return s.threadNice }

// Close closes the pool.
func (s *Store) Close() error { return s.conn.Close() }

// Conn exposes the pool to the packages owning other tables (activity,
// deletion, plugins), to benchmarks and to tests. Its errors are
// classified (ErrUnavailable) like the store's own.
func (s *Store) Conn() driver.Conn { return s.conn }

// Events is the events tables' owner, on this store's pool.
func (s *Store) Events() *eventstore.Store { return s.events }

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
