package eventstore

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// The deleter's statements for filtered deletions (pkg/deletion,
// filtered.go): the events of a project (or of one person) up to a
// sequence that a condition matches, with their copies and their hourly
// counts. Only behaviour events are selected: the API's command events
// (they carry $actor) are the record of its writes, and neither copied
// nor counted by the views.

// FilterScope selects the events a filtered deletion deletes.
type FilterScope struct {
	ProjectID uint64
	// PersonID, when not 0, limits the deletion to the events stored
	// with that person (the person at fold time, as the purge does).
	PersonID uint64
	// Seq: events up to it (the request's command).
	Seq uint64
	// Cond is a condition over an events row, with its arguments.
	Cond string
	Args []any
}

// where is the scope as a condition over events.
func (sc FilterScope) where() (string, []any) {
	w, args := "project_id = ? AND seq <= ?", []any{sc.ProjectID, sc.Seq}
	if sc.PersonID != 0 {
		w, args = w+" AND person_id = ?", append(args, sc.PersonID)
	}
	return w + " AND visitParamHas(properties, '$actor') = 0 AND (" + sc.Cond + ")", append(args, sc.Args...)
}

// copiesWhere is the scope as a condition over events_by_distinct_id: the
// copies of the events where selects (by seq, which the copy shares with
// its event). It reads events, so it holds only while the events are
// there: the deleter deletes the copies first.
func (sc FilterScope) copiesWhere() (string, []any) {
	w, args := "project_id = ? AND seq <= ?", []any{sc.ProjectID, sc.Seq}
	if sc.PersonID != 0 {
		w, args = w+" AND person_id = ?", append(args, sc.PersonID)
	}
	ew, eargs := sc.where()
	return w + " AND seq IN (SELECT seq FROM events WHERE " + ew + ")", append(args, eargs...)
}

// FilteredCounts are the rows a filtered deletion selects: in events
// (with the earliest and latest timestamps, Unix seconds, of those) and
// in the copy.
type FilteredCounts struct {
	Events, Copies uint64
	Lo, Hi         uint32
}

// CountFiltered counts the scope's rows, physical rows as a mutation sees
// them (no FINAL).
func (s *Store) CountFiltered(ctx context.Context, sc FilterScope) (FilteredCounts, error) {
	var c FilteredCounts
	ew, eargs := sc.where()
	err := s.conn.QueryRow(ctx, "SELECT count(), min(toUInt32(timestamp)), max(toUInt32(timestamp)) FROM events WHERE "+ew, eargs...).
		Scan(&c.Events, &c.Lo, &c.Hi)
	if err != nil {
		return c, err
	}
	cw, cargs := sc.copiesWhere()
	err = s.conn.QueryRow(ctx, "SELECT count() FROM "+copyTable+" WHERE "+cw, cargs...).Scan(&c.Copies)
	return c, err
}

// CountFilteredEvents counts the scope's events alone: a dry run's
// answer, read with the bound values' settings (the copies, which
// CountFiltered also counts, would cost a set of every matching seq).
func (s *Store) CountFilteredEvents(ctx context.Context, sc FilterScope) (uint64, error) {
	var n uint64
	ew, eargs := sc.where()
	err := s.conn.QueryRow(statement.Bound(ctx, nil), "SELECT count() FROM events WHERE "+ew, eargs...).Scan(&n)
	return n, err
}

// DeleteFilteredCopies issues the mutation deleting the scope's copies
// (events_by_distinct_id); Mutations and UnfinishedMutations follow it.
func (s *Store) DeleteFilteredCopies(ctx context.Context, sc FilterScope) error {
	w, args := sc.copiesWhere()
	return s.conn.Exec(ctx, "ALTER TABLE "+copyTable+" DELETE WHERE "+w, args...)
}

// DeleteFiltered issues the mutation deleting the scope's events.
func (s *Store) DeleteFiltered(ctx context.Context, sc FilterScope) error {
	w, args := sc.where()
	return s.conn.Exec(ctx, "ALTER TABLE events DELETE WHERE "+w, args...)
}

// FilteredDistinctIDs returns the distinct ids of the scope's events: the
// ids whose last seen times (person_last_seen) the deletion may change,
// grouped rather than DISTINCT as PurgedDistinctIDs says.
func (s *Store) FilteredDistinctIDs(ctx context.Context, sc FilterScope) ([]string, error) {
	w, args := sc.where()
	return s.strings(ctx, "SELECT distinct_id FROM events WHERE "+w+" GROUP BY distinct_id", args...)
}

// KeptFilteredLastSeen reads, for each of the distinct ids, the newest
// time of its behaviour events the scope keeps (as KeptLastSeen, from the
// copy by key). The copy's condition reads the scope's seqs from events,
// so it runs before the events are deleted.
func (s *Store) KeptFilteredLastSeen(ctx context.Context, sc FilterScope, distinctIDs []string) ([]SeenAt, error) {
	cw, cargs := sc.copiesWhere()
	return s.keptLastSeen(ctx, sc.ProjectID, distinctIDs, " AND NOT ("+cw+")", cargs)
}

// HourlyRegion is a region of events_hourly: the keys of one project (of
// one stored person when PersonID is not 0; of the events named, when
// there are some) in the UTC hours [From, To).
type HourlyRegion struct {
	ProjectID uint64
	PersonID  uint64
	Events    []string
	From, To  time.Time
}

// Months splits the region at the starts of UTC months.
func (hr HourlyRegion) Months() []HourlyRegion {
	var out []HourlyRegion
	for from := hr.From; from.Before(hr.To); {
		to := time.Date(from.Year(), from.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		if to.After(hr.To) {
			to = hr.To
		}
		m := hr
		m.From, m.To = from, to
		out = append(out, m)
		from = to
	}
	return out
}

// cond is the region as a condition on a table whose hour is hourExpr.
func (hr HourlyRegion) cond(hourExpr string) (string, []any) {
	w := "project_id = ? AND " + hourExpr + " >= toDateTime(?) AND " + hourExpr + " < toDateTime(?)"
	args := []any{hr.ProjectID, uint32(hr.From.Unix()), uint32(hr.To.Unix())}
	if hr.PersonID != 0 {
		w, args = w+" AND person_id = ?", append(args, hr.PersonID)
	}
	if len(hr.Events) > 0 {
		w, args = w+" AND event IN ?", append(args, setOf(hr.Events))
	}
	return w, args
}

// hourlyDiff is, for each key of the region whose sum in events_hourly is
// not the number of events the view counts (hourlyCounts), the
// difference, count minus sum; the sum wraps modulo 2^64 as the table's
// does (restoreHourly).
func (hr HourlyRegion) hourlyDiff() (string, []any) {
	// The events' own bound on timestamp prunes their months as the
	// hours' bound prunes events_hourly's.
	ew, eargs := hr.cond("timestamp")
	hw, hargs := hr.cond("hour")
	return `SELECT project_id, event, hour, distinct_id, person_id, sum(d) AS diff FROM (
			SELECT project_id, event, hour, distinct_id, person_id, toInt64(n) AS d FROM (` + hourlyCounts(ew) + `)
			UNION ALL
			SELECT project_id, event, hour, distinct_id, person_id, -toInt64(events) AS d FROM events_hourly WHERE ` + hw + `
		) GROUP BY project_id, event, hour, distinct_id, person_id HAVING sum(d) != 0`, append(eargs, hargs...)
}

// ReconcileHourly makes the region's sums in events_hourly the numbers of
// events left in events: one row of the difference per key that differs
// (none when they agree). It only brings sums to the counts, so it can
// run again with the same result, and a key it does not need to change
// is not written. Exact while nothing inserts events of the region's
// keys during the statement: CheckHourly tells. Run on a region emptied
// by DeleteHourly, its differences are positive.
func (s *Store) ReconcileHourly(ctx context.Context, hr HourlyRegion) error {
	q, args := hr.hourlyDiff()
	return s.conn.Exec(ctx, "INSERT INTO events_hourly (project_id, event, hour, distinct_id, person_id, events) "+
		"SELECT project_id, event, hour, distinct_id, person_id, toUInt64(diff) FROM ("+q+")", args...)
}

// DeleteHourly issues the mutation deleting the region's rows of
// events_hourly, which ReconcileHourly then counts again from events: a
// region emptied first gets positive rows only. (Rows of the difference
// alone would leave keys whose rows add up to zero until a merge, and
// the readers group such a key's person as if it had events.)
func (s *Store) DeleteHourly(ctx context.Context, hr HourlyRegion) error {
	w, args := hr.cond("hour")
	return s.conn.Exec(ctx, "ALTER TABLE events_hourly DELETE WHERE "+w, args...)
}

// CheckHourly counts the region's keys whose sum is not their events'.
func (s *Store) CheckHourly(ctx context.Context, hr HourlyRegion) (uint64, error) {
	q, args := hr.hourlyDiff()
	var n uint64
	err := s.conn.QueryRow(ctx, "SELECT count() FROM ("+q+")", args...).Scan(&n)
	return n, err
}

func setOf(names []string) any {
	vs := make([]any, len(names))
	for i, n := range names {
		vs[i] = n
	}
	return clickhouse.GroupSet{Value: vs}
}
