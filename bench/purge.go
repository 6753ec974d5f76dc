package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/deletion"
)

// Purge is the purge target: the events of N deleted persons purged by the deleter
// (deletion.Runner.RunOnce) and, as the baseline, by one raw batched
// ALTER TABLE events DELETE of the same persons' events, each on its own
// copy of the same tables.
type Purge struct {
	Persons        int     `json:"persons"`
	EventsTotal    uint64  `json:"events_in_table"`
	EventsToDelete uint64  `json:"events_to_delete"`
	RawSeconds     float64 `json:"raw_alter_delete_seconds"`
	// RawCopySeconds is the raw ALTER DELETE of the same rows in
	// events_by_distinct_id, after RawSeconds: the deleter deletes both
	// copies of an event, the raw side's RawSeconds one.
	RawCopySeconds float64 `json:"raw_copy_alter_delete_seconds"`
	RunnerSeconds  float64 `json:"runner_seconds"`
	RunnerVerified int     `json:"runner_verified"`
	RunnerMutation int     `json:"runner_mutations"`
	RunnerLeft     uint64  `json:"runner_events_left"`
	RawLeft        uint64  `json:"raw_events_left"`
	// SettleSeconds is the wait, before each side, for the copies'
	// background merges to end (raw, then runner).
	SettleSeconds [2]float64 `json:"settle_seconds"`
}

// waitMerges waits until no merge has run for half a second (five polls
// in a row), of the databases' tables (every table when none are given),
// or until limit has passed: it returns the time waited and whether the
// merges went quiet. A bulk insert (the analysis rows, a copy's INSERT ...
// SELECT) leaves parts that ClickHouse merges for seconds after, and
// system.merges can be empty for a moment between two merges.
func waitMerges(ctx context.Context, conn driver.Conn, limit time.Duration, dbs ...string) (time.Duration, bool, error) {
	sql, args := "SELECT count() FROM system.merges", []any{}
	if len(dbs) > 0 {
		set := clickhouse.GroupSet{}
		for _, d := range dbs {
			set.Value = append(set.Value, d)
		}
		sql, args = sql+" WHERE database IN ?", []any{set}
	}
	start := time.Now()
	for quiet := 0; ; {
		var n uint64
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return time.Since(start), false, err
		}
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if quiet == 5 {
			return time.Since(start), true, nil
		}
		if time.Since(start) >= limit {
			return time.Since(start), false, nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// copyTables copies tables of src into a new database dst, partition by
// partition with ATTACH PARTITION ... FROM: the copy hard-links the
// source's active parts, so copying the 50M events of a ten-times run
// takes seconds where an INSERT SELECT rewrote them for minutes, and the
// copy has the parts the deleter would find in production (merged, not
// freshly inserted). A mutation of the copy writes parts of its own and
// leaves the source's files as they are.
func copyTables(ctx context.Context, conn driver.Conn, src, dst string, tables ...string) error {
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+dst); err != nil {
		return err
	}
	for _, t := range tables {
		if err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s AS %s.%s", dst, t, src, t)); err != nil {
			return err
		}
		var partitions []string
		if err := conn.QueryRow(ctx, "SELECT groupUniqArray(partition_id) FROM system.parts WHERE database = ? AND table = ? AND active", src, t).Scan(&partitions); err != nil {
			return err
		}
		for _, id := range partitions {
			q := fmt.Sprintf("ALTER TABLE %s.%s ATTACH PARTITION ID ? FROM %s.%s", dst, t, src, t)
			if err := conn.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("copy %s.%s: %w", src, t, err)
			}
		}
	}
	return nil
}

// waitMutations polls system.mutations until every mutation of db.table is done.
func waitMutations(ctx context.Context, conn driver.Conn, db, table string) error {
	for {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0", db, table).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// countPersonEvents counts the persons' events up to upTo: the events a
// deletion takes are those folded before it (request_seq). The analysis rows,
// inserted straight into events with sequences far above the stream's
// (g10SeqBase), are later than every request, so neither side deletes
// them and they are not counted as left.
func countPersonEvents(ctx context.Context, conn driver.Conn, db string, project uint64, ids []uint64, upTo uint64) (uint64, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".events WHERE project_id = ? AND person_id IN "+statement.InArray("UInt64")+" AND seq <= ?", project, ids, upTo).Scan(&n)
	return n, err
}

// measurePurge runs both sides. The deletion requests must already be
// queued (committed by the ingester) in db.
func measurePurge(ctx context.Context, ch *chServer, db string, project uint64, ids []uint64, runnerLog *slog.Logger) (Purge, error) {
	p := Purge{Persons: len(ids)}
	// The raw side's statements splice every person's id into their text
	// as the deleter's do, one array literal (statement.InArray: as a
	// tuple, 100k ids made each part's rewrite ~7 times slower on 18.16),
	// with the deleter's settings (100k ids are ~2 MB, past the server's
	// default max_query_size). The runner below sets its own.
	qctx := deletion.Statements(ctx)
	admin, err := ch.open(ctx, "default")
	if err != nil {
		return p, err
	}
	defer admin.Close()
	conn := admin.Conn()
	rawDB, svcDB := db+"_purge_raw", db+"_purge_runner"
	for _, d := range []string{rawDB, svcDB} {
		_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+d)
		defer func(d string) { _ = conn.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+d) }(d)
	}
	if err := copyTables(ctx, conn, db, rawDB, "events", "events_by_distinct_id"); err != nil {
		return p, fmt.Errorf("copy for the raw side: %w", err)
	}
	// The runner also deletes the events' copies by distinct id (schema
	// 0009) and the hourly counts (schema 0014), rewrites the last seen
	// times (schema 0020), and reads the filtered requests (schema 0021),
	// so its side has those tables too; the raw side's timed mutation is
	// of events alone, and the copies' follows it, timed apart.
	if err := copyTables(ctx, conn, db, svcDB, "events", "events_by_distinct_id", "events_hourly", "person_last_seen",
		"person_deletion_requests", "event_deletion_requests", "ingest_batches"); err != nil {
		return p, fmt.Errorf("copy for the runner: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+rawDB+".events").Scan(&p.EventsTotal); err != nil {
		return p, err
	}
	// The newest deletion's sequence bounds both sides alike.
	var upTo uint64
	if err := conn.QueryRow(ctx, "SELECT max(request_seq) FROM "+db+".person_deletion_requests WHERE project_id = ?", project).Scan(&upTo); err != nil {
		return p, err
	}
	if p.EventsToDelete, err = countPersonEvents(qctx, conn, rawDB, project, ids, upTo); err != nil {
		return p, err
	}

	// Raw: one mutation for every person, timed until it is done.
	// Neither side is timed beside the copies' merges; the deleter's
	// weekly run finds its tables long merged.
	settled, _, err := waitMerges(ctx, conn, time.Minute, rawDB, svcDB)
	if err != nil {
		return p, err
	}
	p.SettleSeconds[0] = settled.Seconds()
	start := time.Now()
	if err := conn.Exec(qctx, "ALTER TABLE "+rawDB+".events DELETE WHERE project_id = ? AND person_id IN "+statement.InArray("UInt64")+" AND seq <= ?", project, ids, upTo); err != nil {
		return p, fmt.Errorf("raw ALTER DELETE: %w", err)
	}
	if err := waitMutations(ctx, conn, rawDB, "events"); err != nil {
		return p, err
	}
	p.RawSeconds = time.Since(start).Seconds()
	if p.RawLeft, err = countPersonEvents(qctx, conn, rawDB, project, ids, upTo); err != nil {
		return p, err
	}
	start = time.Now()
	if err := conn.Exec(qctx, "ALTER TABLE "+rawDB+".events_by_distinct_id DELETE WHERE project_id = ? AND person_id IN "+statement.InArray("UInt64")+" AND seq <= ?", project, ids, upTo); err != nil {
		return p, fmt.Errorf("raw ALTER DELETE of the copies: %w", err)
	}
	if err := waitMutations(ctx, conn, rawDB, "events_by_distinct_id"); err != nil {
		return p, err
	}
	p.RawCopySeconds = time.Since(start).Seconds()

	// The deleter, on its own copy.
	st, err := ch.openService(ctx, svcDB)
	if err != nil {
		return p, err
	}
	defer st.Close()
	cfg := deletion.DefaultConfig()
	cfg.Schedule = ""
	runner, err := deletion.New(st.Conn(), cfg, runnerLog, prometheus.NewRegistry())
	if err != nil {
		return p, err
	}
	if settled, _, err = waitMerges(ctx, conn, time.Minute, rawDB, svcDB); err != nil {
		return p, err
	}
	p.SettleSeconds[1] = settled.Seconds()
	start = time.Now()
	sum, err := runner.RunOnce(ctx)
	if err != nil {
		return p, fmt.Errorf("deletion.Runner.RunOnce: %w", err)
	}
	if sum.Failed > 0 {
		// A request that failed is pending again: timing such a run would
		// measure nothing (as when a table the runner mutates was not copied).
		return p, fmt.Errorf("deletion.Runner.RunOnce: %d of %d requests failed", sum.Failed, sum.Taken)
	}
	p.RunnerSeconds = time.Since(start).Seconds()
	p.RunnerVerified, p.RunnerMutation = sum.Verified, sum.Mutations
	if p.RunnerLeft, err = countPersonEvents(qctx, conn, svcDB, project, ids, upTo); err != nil {
		return p, err
	}
	return p, nil
}
