package deletion

import (
	"context"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// counts are a batch's rows per person in the three tables a run mutates,
// read in one statement (countBatch). "Mine" are the rows the batch's
// mutation deletes (each person's up to its request_seq); "all" are the
// person's rows of any sequence.
type counts struct {
	events, eventsAll map[uint64]uint64 // events
	copies, copiesAll map[uint64]uint64 // copyTable
	hourly            map[uint64]uint64 // sum(events) of hourlyTable
	// times are the earliest and latest timestamps (Unix seconds) of a
	// person's rows in events and its copy that the batch deletes ("mine"),
	// for persons with any; above, the same of its rows above its request
	// (those the batch keeps), for persons with any.
	times, above map[uint64][2]uint32
	// inSpan counts a person's events rows of any sequence in the span
	// of the count after the mutations: the rows the hourly rebuild counts
	// again.
	inSpan map[uint64]uint64
}

// span is the UTC hours [from, to) (Unix seconds, whole hours) that
// hold every row a batch deletes, or every hour (all).
type span struct {
	from, to uint32
	all      bool
}

// spanOf is the hours of the persons' deleted rows: the mutations and the
// hourly rebuild need not look outside them. A person whose hourly sums
// drifted from its events (a run stopped midway) has hourly rows with no
// event left to date them, so a batch with one spans every hour; so does a
// batch with nothing dated (nothing to delete but hourly rows).
func (c counts) spanOf(b []Request) span {
	var s span
	dated := false
	for _, q := range b {
		if c.drift(q.PersonID) {
			return span{all: true}
		}
		t, ok := c.times[q.PersonID]
		if !ok {
			continue
		}
		if !dated {
			s.from, s.to, dated = t[0], t[1], true
			continue
		}
		s.from, s.to = min(s.from, t[0]), max(s.to, t[1])
	}
	if !dated {
		return span{all: true}
	}
	s.from -= s.from % 3600
	if s.to > math.MaxUint32-3600 {
		// The hour after the latest row is past DateTime's range (2106).
		return span{all: true}
	}
	s.to += 3600 - s.to%3600
	return s
}

// keepsApart says whether every row of the person above its request
// lies outside the span (and there is one): a mutation bounded by the span
// cannot reach them, so the batch's largest sequence bounds the person as
// well as its own would (eventsWhere).
func (c counts) keepsApart(person uint64, s span) bool {
	a, ok := c.above[person]
	return ok && !s.all && (a[1] < s.from || a[0] >= s.to)
}

// cond is the span as a condition on col (a DateTime column), with its
// arguments; "" for every hour.
func (s span) cond(col string) (string, []any) {
	if s.all {
		return "", nil
	}
	return " AND " + col + " >= toDateTime(?) AND " + col + " < toDateTime(?)", []any{s.from, s.to}
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
// (the events owner's restoreHourly, pkg/chstore/eventstore). The batch's persons and sequences go as an
// external table, not spliced into the statement: for 10,000 persons the
// spliced lists (seven of them, ~560 KB of SQL) cost 18.16 more to parse
// than the scans themselves (BenchmarkCountBatch: 207 against 56 ms over
// 1.86M events, the bench's purge count run twice a batch).
//
// after is nil for the first count. For the count after the mutations it
// is the batch's span, in which inSpan counts; that count reads no hourly
// sums (nothing uses them), and still counts the rows to delete in every
// month, so that a request is verified only when none is left anywhere.
func (r *Runner) countBatch(ctx context.Context, b []Request, after *span) (counts, error) {
	del, err := ext.NewTable("del", ext.Column("person_id", "UInt64"), ext.Column("req", "UInt64"))
	if err != nil {
		return counts{}, err
	}
	seen := make(map[uint64]bool, len(b))
	for _, q := range b {
		// One row a person, so that the ALL join meets each of its
		// rows once: its first request's sequence, as a batch's
		// mutation bounds it (issue).
		if seen[q.PersonID] {
			continue
		}
		seen[q.PersonID] = true
		if err := del.Append(q.PersonID, q.RequestSeq); err != nil {
			return counts{}, err
		}
	}
	const in = " WHERE project_id = ? AND person_id IN (SELECT person_id FROM del)"
	const mine = "SELECT person_id, countIf(seq <= req) AS m, count() AS a, " +
		"minIf(ts, seq <= req) AS lo, maxIf(ts, seq <= req) AS hi, minIf(ts, seq > req) AS alo, maxIf(ts, seq > req) AS ahi, " +
		"countIf(ts >= ? AND ts < ?) AS s FROM (SELECT person_id, seq, toUInt32(timestamp) AS ts FROM "
	// The scanned rows have an alias: current ClickHouse refuses a
	// joined subquery without one (joined_subquery_requires_alias).
	const joined = ") AS scanned ALL INNER JOIN del USING person_id GROUP BY person_id"
	project := b[0].ProjectID
	from, to := uint64(0), uint64(math.MaxUint32)+1 // every second DateTime holds
	if after != nil && !after.all {
		from, to = uint64(after.from), uint64(after.to)
	}
	sql := "SELECT toUInt8(0) AS t, * FROM (" + mine + "events" + in + joined + ")" +
		" UNION ALL SELECT toUInt8(1) AS t, * FROM (" + mine + copyTable + in + joined + ")"
	args := []any{from, to, project, from, to, project}
	if after == nil {
		sql += " UNION ALL SELECT toUInt8(2) AS t, person_id, sum(events) AS m, sum(events) AS a, " +
			"toUInt32(0) AS lo, toUInt32(0) AS hi, toUInt32(0) AS alo, toUInt32(0) AS ahi, toUInt64(0) AS s FROM " +
			hourlyTable + in + " GROUP BY person_id"
		args = append(args, project)
	}
	rows, err := r.conn.Query(statement.WithExternalTables(ctx, del), sql, args...)
	if err != nil {
		return counts{}, err
	}
	defer rows.Close()
	c := counts{events: map[uint64]uint64{}, eventsAll: map[uint64]uint64{}, copies: map[uint64]uint64{},
		copiesAll: map[uint64]uint64{}, hourly: map[uint64]uint64{}, times: map[uint64][2]uint32{},
		above: map[uint64][2]uint32{}, inSpan: map[uint64]uint64{}}
	for rows.Next() {
		var t uint8
		var id, m, a, in uint64
		var lo, hi, alo, ahi uint32
		if err := rows.Scan(&t, &id, &m, &a, &lo, &hi, &alo, &ahi, &in); err != nil {
			return counts{}, err
		}
		if t < 2 {
			widen(c.times, id, m > 0, lo, hi)
			widen(c.above, id, a > m, alo, ahi)
		}
		switch t {
		case 0:
			c.events[id], c.eventsAll[id], c.inSpan[id] = m, a, in
		case 1:
			c.copies[id], c.copiesAll[id] = m, a
		default:
			c.hourly[id] = m
		}
	}
	return c, rows.Err()
}

// widen takes [lo, hi] into a person's range when some rows have it.
func widen(r map[uint64][2]uint32, id uint64, some bool, lo, hi uint32) {
	if !some {
		return
	}
	if w, ok := r[id]; ok {
		lo, hi = min(lo, w[0]), max(hi, w[1])
	}
	r[id] = [2]uint32{lo, hi}
}
