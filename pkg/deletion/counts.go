package deletion

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
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
// (chstore's restoreHourly).
func (r *Runner) countBatch(ctx context.Context, b []Request) (counts, error) {
	ids := make([]uint64, len(b))
	set := make([]any, len(b))
	seqs := make([]uint64, len(b))
	for i, q := range b {
		ids[i], set[i], seqs[i] = q.PersonID, q.PersonID, q.RequestSeq
	}
	const in = " WHERE project_id = ? AND person_id IN ? GROUP BY person_id"
	const mine = "countIf(seq <= transform(person_id, CAST(? AS Array(UInt64)), CAST(? AS Array(UInt64)), toUInt64(0)))"
	sql := "SELECT toUInt8(0) AS t, person_id, " + mine + " AS m, count() AS a FROM events" + in +
		" UNION ALL SELECT toUInt8(1) AS t, person_id, " + mine + " AS m, count() AS a FROM " + copyTable + in +
		" UNION ALL SELECT toUInt8(2) AS t, person_id, sum(events) AS m, sum(events) AS a FROM " + hourlyTable + in
	project, group := b[0].ProjectID, clickhouse.GroupSet{Value: set}
	rows, err := r.conn.Query(ctx, sql, ids, seqs, project, group, ids, seqs, project, group, project, group)
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
