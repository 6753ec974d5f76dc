package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// The deleter's statements on the events tables (pkg/deletion runs the
// purge: which persons, when, and how it is verified). A purge deletes,
// by mutation, a person's rows up to the sequence of its deletion from
// events, from their copy events_by_distinct_id, and the person's rows
// of events_hourly in the purge's hours.

// copyTable holds a copy of events rows by distinct id (schema 0009,
// filled by a materialized view): the deleted events' copies go too.
const copyTable = "events_by_distinct_id"

// hourlyTable holds the events' numbers per hour, distinct id and stored
// person (schema 0014, filled by a materialized view). Its rows are sums
// without the events' seq, so a purge cannot cut them at each person's
// sequence as it cuts events: it deletes every row of the persons in
// the purge's hours, and the deleter counts again what events the
// persons keep there (RebuildHourly).
const hourlyTable = "events_hourly"

// purgedTables are the tables a purge mutates, and person_last_seen, which
// the deleter mutates before it (DeleteLastSeen), as a condition on
// system.mutations.
const purgedTables = "table IN ('events', '" + copyTable + "', '" + hourlyTable + "', '" + lastSeenTable + "')"

// Hours is the UTC hours [From, To) (Unix seconds, whole hours) that hold
// every row a purge deletes, or every hour (All).
type Hours struct {
	From, To uint32
	All      bool
}

// cond is the hours as a condition on col (a DateTime column), with its
// arguments; "" for every hour.
func (h Hours) cond(col string) (string, []any) {
	if h.All {
		return "", nil
	}
	return " AND " + col + " >= toDateTime(?) AND " + col + " < toDateTime(?)", []any{h.From, h.To}
}

// PurgeTarget is a person whose rows up to Seq a purge deletes.
type PurgeTarget struct {
	PersonID, Seq uint64
	// Clean: no row of the person above Seq is in the purge's reach (none
	// at all, or none in its hours), so the purge's largest Seq bounds
	// the person as well as its own (purgeWhere).
	Clean bool
}

// PurgeTable names the table a PurgeRow counts.
type PurgeTable uint8

const (
	PurgeEvents PurgeTable = iota // events
	PurgeCopies                   // events_by_distinct_id
	PurgeHourly                   // events_hourly: Mine and All are the sum of its counts
)

// PurgeRow is one person's rows in one table: Mine up to the person's
// Seq (those the purge deletes), All of any sequence; Lo and Hi the
// earliest and latest timestamps (Unix seconds) of the rows up to Seq,
// ALo and AHi of those above it (when there are some); InSpan the rows
// of any sequence in the hours counted (events only).
type PurgeRow struct {
	Table               PurgeTable
	PersonID, Mine, All uint64
	Lo, Hi, ALo, AHi    uint32
	InSpan              uint64
}

// PurgeCounts counts the targets' rows (one target per person) in events
// and their copy, and with hourly in events_hourly too, in one statement:
// its three branches run side by side in ClickHouse, one round trip
// instead of three, and each reads narrow columns only (project_id,
// person_id, seq; no properties). Sums over physical rows, without FINAL,
// as the mutations see them; the hourly sum wraps modulo 2^64 as the
// table's own does (restoreHourly). The targets go as an external table,
// not spliced into the statement: for 10,000 persons the spliced lists
// (seven of them, ~560 KB of SQL) cost 18.16 more to parse than the scans
// themselves (BenchmarkCountBatch, pkg/deletion: 207 against 56 ms over
// 1.86M events).
//
// InSpan counts the rows in span; every row of a person counts however
// the span is, so that a purge is verified only when none is left
// anywhere.
func (s *Store) PurgeCounts(ctx context.Context, project uint64, targets []PurgeTarget, span Hours, hourly bool) ([]PurgeRow, error) {
	del, err := ext.NewTable("del", ext.Column("person_id", "UInt64"), ext.Column("req", "UInt64"))
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if err := del.Append(t.PersonID, t.Seq); err != nil {
			return nil, err
		}
	}
	const in = " WHERE project_id = ? AND person_id IN (SELECT person_id FROM del)"
	const mine = "SELECT person_id, countIf(seq <= req) AS m, count() AS a, " +
		"minIf(ts, seq <= req) AS lo, maxIf(ts, seq <= req) AS hi, minIf(ts, seq > req) AS alo, maxIf(ts, seq > req) AS ahi, " +
		"countIf(ts >= ? AND ts < ?) AS s FROM (SELECT person_id, seq, toUInt32(timestamp) AS ts FROM "
	// The scanned rows have an alias: current ClickHouse refuses a
	// joined subquery without one (joined_subquery_requires_alias).
	const joined = ") AS scanned ALL INNER JOIN del USING person_id GROUP BY person_id"
	from, to := uint64(0), uint64(math.MaxUint32)+1 // every second DateTime holds
	if !span.All {
		from, to = uint64(span.From), uint64(span.To)
	}
	sql := "SELECT toUInt8(0) AS t, * FROM (" + mine + "events" + in + joined + ")" +
		" UNION ALL SELECT toUInt8(1) AS t, * FROM (" + mine + copyTable + in + joined + ")"
	args := []any{from, to, project, from, to, project}
	if hourly {
		sql += " UNION ALL SELECT toUInt8(2) AS t, person_id, sum(events) AS m, sum(events) AS a, " +
			"toUInt32(0) AS lo, toUInt32(0) AS hi, toUInt32(0) AS alo, toUInt32(0) AS ahi, toUInt64(0) AS s FROM " +
			hourlyTable + in + " GROUP BY person_id"
		args = append(args, project)
	}
	rows, err := s.conn.Query(statement.WithExternalTables(ctx, del), sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PurgeRow
	for rows.Next() {
		var r PurgeRow
		var t uint8
		if err := rows.Scan(&t, &r.PersonID, &r.Mine, &r.All, &r.Lo, &r.Hi, &r.ALo, &r.AHi, &r.InSpan); err != nil {
			return nil, err
		}
		r.Table = PurgeTable(t)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Purge issues the purge's three mutations: those of the copy by
// distinct id and of the hourly counts side by side, then that of events.
// ClickHouse checks each one (its condition holds the targets' lists)
// before it answers, which took seconds in a row. The copy goes before
// events: an event of a target written again between the two is then
// deleted from events and kept in the copy, where the next run's count
// finds it and reads its distinct id for the last seen times (the other
// way round, the copy lost it, and the next run deleted the event without
// rewriting its id's last seen time). Each is bounded by the hours:
// ClickHouse skips the parts of other months by their partition's range
// (a part a mutation does not touch is only linked, but finding that out
// otherwise reads its person_id and seq), and the hourly counts of other
// hours are left as they are. Purge returns when they are issued;
// Mutations and UnfinishedMutations follow them.
func (s *Store) Purge(ctx context.Context, project uint64, targets []PurgeTarget, hours Hours) error {
	where, args := purgeWhere(project, targets)
	cut, cargs := hours.cond("timestamp")
	where, args = where+cut, append(args, cargs...)
	hw, hargs := personsIn(project, targets, hours)
	type mutation struct {
		table, where string
		args         []any
	}
	issue := func(m mutation) error {
		if err := s.conn.Exec(ctx, "ALTER TABLE "+m.table+" DELETE WHERE "+m.where, m.args...); err != nil {
			return fmt.Errorf("issue mutation on %s: %w", m.table, err)
		}
		return nil
	}
	first := []mutation{{copyTable, where, args}, {hourlyTable, hw, hargs}}
	errs := make([]error, len(first))
	var wg sync.WaitGroup
	for i, m := range first {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = issue(m)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return issue(mutation{"events", where, args})
}

// purgeWhere selects the events of the targets (one project), each
// person's up to its Seq. `seq <= max` bounds them all (the plain form of
// the statement); the transform bounds each person by its own Seq. A
// Clean person needs only `seq <= max` (PurgeTarget.Clean): the
// transform, evaluated for every row the mutation reads, cost ~15% of the
// mutations' wait in the bench's purge.
func purgeWhere(project uint64, targets []PurgeTarget) (string, []any) {
	var ids, seqs, plain []uint64
	var maxSeq uint64
	for _, t := range targets {
		maxSeq = max(maxSeq, t.Seq)
		if t.Clean {
			plain = append(plain, t.PersonID)
			continue
		}
		ids, seqs = append(ids, t.PersonID), append(seqs, t.Seq)
	}
	const transform = "seq <= transform(person_id, CAST(? AS Array(UInt64)), CAST(? AS Array(UInt64)), toUInt64(0))"
	in := "person_id IN " + statement.InArray("UInt64")
	switch {
	case len(ids) == 0:
		return "project_id = ? AND " + in + " AND seq <= ?", []any{project, plain, maxSeq}
	case len(plain) == 0:
		return "project_id = ? AND " + in + " AND seq <= ? AND " + transform, []any{project, ids, maxSeq, ids, seqs}
	}
	return "project_id = ? AND seq <= ? AND (" + in + " OR " + in + " AND " + transform + ")",
		[]any{project, maxSeq, plain, ids, ids, seqs}
}

// personsIn selects the hourly rows of the targets' persons (one
// project) in the hours.
func personsIn(project uint64, targets []PurgeTarget, hours Hours) (string, []any) {
	set := make([]uint64, len(targets))
	for i, t := range targets {
		set[i] = t.PersonID
	}
	cut, cargs := hours.cond("hour")
	return "project_id = ? AND person_id IN " + statement.InArray("UInt64") + cut, append([]any{project, set}, cargs...)
}

// Mutations lists the mutations (table/id) of the purged tables that the
// server knows. system.mutations has, on 18.16 and 24.x alike, database,
// table, mutation_id, command, create_time and is_done; a mutation not in
// a list taken before Purge is one it issued (or a concurrent one, which
// is waited for too).
func (s *Store) Mutations(ctx context.Context) (map[string]bool, error) {
	ids, err := s.mutations(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// UnfinishedMutations lists the unfinished mutations of the purged tables
// that are not in before.
func (s *Store) UnfinishedMutations(ctx context.Context, before map[string]bool) ([]string, error) {
	ids, err := s.mutations(ctx, " AND is_done = 0")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if !before[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *Store) mutations(ctx context.Context, more string) ([]string, error) {
	return s.strings(ctx, "SELECT concat(table, '/', mutation_id) FROM system.mutations WHERE database = currentDatabase() AND "+purgedTables+more)
}

// strings runs a query of one String column and returns its values.
func (s *Store) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
