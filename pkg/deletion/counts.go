package deletion

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
)

// counts are a batch's rows per person in the three tables a run mutates,
// read in one statement (countBatch). "Mine" are the rows the batch's
// mutation deletes (each person's up to its request_seq); "all" are the
// person's rows of any sequence.
type counts struct {
	events, eventsAll map[uint64]uint64 // events
	copies, copiesAll map[uint64]uint64 // copyTable
	hourly            map[uint64]uint64 // sum(events) of hourlyTable
}

// drift says whether a person's hourly sums are not the number of its
// events the view counts: a run stopped between the events' mutation and
// the hourly rebuild left them (hourly.go). The copy holds exactly the
// events the view counts (schemas 0009 and 0014 share the filter), so it
// stands in for them: comparing with events themselves would read their
// properties (the $actor filter), the widest column of the widest table,
// where the copy's count reads two narrow columns.
func (c counts) drift(person uint64) bool {
	return c.hourly[person] != c.copiesAll[person]
}

// countBatch reads a batch's counts in one statement: its three branches
// run side by side in ClickHouse, one round trip instead of three, and
// each reads narrow columns only (project_id, person_id, seq; no
// properties). Sums over physical rows, without FINAL, as the mutations
// see them; the hourly sum wraps modulo 2^64 as the table's own does
// (chstore's restoreHourly). The batch's persons and sequences go as an
// external table, not spliced into the statement: for 10,000 persons the
// spliced lists (seven of them, ~560 KB of SQL) cost 18.16 more to parse
// than the scans themselves (BenchmarkCountBatch: 207 against 56 ms over
// 1.86M events, the G7 count run twice a batch).
func (r *Runner) countBatch(ctx context.Context, b []Request) (counts, error) {
	del, err := ext.NewTable("del", ext.Column("person_id", "UInt64"), ext.Column("req", "UInt64"))
	if err != nil {
		return counts{}, err
	}
	seen := make(map[uint64]bool, len(b))
	for _, q := range b {
		// One row a person (the join takes any): its first request's
		// sequence, as a batch's mutation bounds it (issue).
		if seen[q.PersonID] {
			continue
		}
		seen[q.PersonID] = true
		if err := del.Append(q.PersonID, q.RequestSeq); err != nil {
			return counts{}, err
		}
	}
	const in = " WHERE project_id = ? AND person_id IN (SELECT person_id FROM del)"
	const mine = "SELECT person_id, countIf(seq <= req) AS m, count() AS a FROM (SELECT person_id, seq FROM "
	const joined = ") ANY INNER JOIN del USING person_id GROUP BY person_id"
	sql := "SELECT toUInt8(0) AS t, * FROM (" + mine + "events" + in + joined + ")" +
		" UNION ALL SELECT toUInt8(1) AS t, * FROM (" + mine + copyTable + in + joined + ")" +
		" UNION ALL SELECT toUInt8(2) AS t, person_id, sum(events) AS m, sum(events) AS a FROM " + hourlyTable + in + " GROUP BY person_id"
	project := b[0].ProjectID
	rows, err := r.conn.Query(clickhouse.Context(ctx, clickhouse.WithExternalTable(del)), sql, project, project, project)
	if err != nil {
		return counts{}, err
	}
	defer rows.Close()
	c := counts{events: map[uint64]uint64{}, eventsAll: map[uint64]uint64{}, copies: map[uint64]uint64{},
		copiesAll: map[uint64]uint64{}, hourly: map[uint64]uint64{}}
	for rows.Next() {
		var t uint8
		var id, m, a uint64
		if err := rows.Scan(&t, &id, &m, &a); err != nil {
			return counts{}, err
		}
		switch t {
		case 0:
			c.events[id], c.eventsAll[id] = m, a
		case 1:
			c.copies[id], c.copiesAll[id] = m, a
		default:
			c.hourly[id] = m
		}
	}
	return c, rows.Err()
}
