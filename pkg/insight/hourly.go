package insight

import (
	"context"
	"time"
)

// Counts kept per hour (docs/analysis.md, "Counts kept per hour";
// schema 0014). Trends and retention group every active person of the
// range, and over raw events that grouping is several bare scans
// (docs/performance.md, the analysis figures). events_hourly holds, per (event, UTC hour,
// distinct id, person as stored), the number of events: the routes read
// it instead of events when nothing but the event name and the range
// selects the events, and the range's edges are whole UTC hours.
// Attribution is the raw scan's (the same override join and tombstones),
// so the answers are the same; when no override can apply to the range
// (storedIsCurrent, schema 0017) the stored person is that answer and
// the join is left out.

// hourly is the rows of events_hourly of some event names in [from, to),
// each attributed to its current, live person (pid).
type hourly struct {
	project  uint64
	from, to time.Time // whole UTC hours; from zero: no lower bound
	names    []string
	among    cond // as scan.among
	// stored: every row's stored person is its current, live one
	// (storedIsCurrent), so the rows need no join to the overrides.
	stored bool
}

// pid is the SQL of a row's current person.
func (h hourly) pid() string {
	if h.stored {
		return "person_id"
	}
	return attributedPID
}

// sql is the FROM clause of the rows, with their filters: the columns
// of events_hourly (and o_pid) are there to select and group on directly.
// One level, no subquery around it: ClickHouse 18.16 runs the IN
// subqueries of a PREWHERE once more for each SELECT around it (a
// retention statement spent 40% more; docs/performance-history.md, "from
// counts kept per hour").
func (h hourly) sql() cond {
	q, args := "FROM events_hourly", []any{}
	if !h.stored {
		q += " " + overridesJoin
		args = append(args, h.project)
	}
	q += " PREWHERE project_id = ? AND event IN (" + marks(len(h.names)) + ") AND hour < toDateTime(?)"
	args = append(append(append(args, h.project), anys(h.names)...), epochSeconds(h.to))
	if !h.from.IsZero() {
		q += " AND hour >= toDateTime(?)"
		args = append(args, epochSeconds(h.from))
	}
	switch {
	case h.among.sql != "" && h.stored:
		q += " AND person_id IN (" + h.among.sql + ")"
		args = append(args, h.among.args...)
	case h.among.sql != "":
		c := amongCond(h.project, h.among)
		q += " AND " + c.sql
		args = append(args, c.args...)
	}
	if h.stored {
		return cond{q, args}
	}
	return cond{q + " WHERE o_deleted = 0", args}
}

// storedIsCurrent reports whether every event of the project in [from,
// to) (whole UTC hours; from zero: from the start) still belongs to the
// person stored with it: whether every override of the project has a
// version below the lowest seq of the range's events (schema 0017). An
// override is written when an id's owner changes, at the version of that
// change, and a project's events are folded in stream order (with the
// write lane, a command folds at the version of the event it follows,
// P, and an event of seq P is folded before it: hence strictly below).
// So an event folded after every change was stored with the id's
// current owner, and no id of it is tombstoned: a later owner would have
// written a newer override. Two small reads (the overrides' versions,
// the range's hours) instead of joining every row with the overrides.
// A range with no events answers false (minMerge of nothing is 0).
func (st *Store) storedIsCurrent(ctx context.Context, project uint64, from, to time.Time) (bool, error) {
	rows, err := st.conn.Query(readCtx(ctx), "SELECT (SELECT max(version) FROM person_distinct_id_overrides WHERE project_id = ?), "+
		"(SELECT minMerge(min_seq) FROM events_first_seq WHERE project_id = ? AND hour >= toDateTime(?) AND hour < toDateTime(?))",
		project, project, epochSeconds(from), epochSeconds(to))
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var newest, lowest uint64
	if rows.Next() {
		if err := rows.Scan(&newest, &lowest); err != nil {
			return false, err
		}
	}
	return newest < lowest, rows.Err()
}

// onHour reports whether t is a whole UTC hour, an edge the hourly
// counts can cut at. A project zone's interval edges are whole UTC
// hours when its offset there is whole hours, on either side of a DST
// change; half-hour zones and explicit seconds fall back to events.
func onHour(ts ...time.Time) bool {
	for _, t := range ts {
		if !t.IsZero() && t.Unix()%3600 != 0 {
			return false
		}
	}
	return true
}

// hourlyNames are the event names of e when its events are selected by
// name alone, under f's filters: an events entity with an id and no
// property filters, no global filters, breakdown value or search. An
// action, or the API's command names (the view leaves their $actor
// copies out, commandEvents), read events.
func (st *Store) hourlyNames(f *Filter, e Entity) ([]string, bool) {
	if st.noHourly || e.Type != "events" || e.ID == nil || commandName(*e.ID) {
		return nil, false
	}
	if f.BreakdownValue != nil || f.Search != "" || !noFilter(f.Properties) || !noFilter(e.Properties) {
		return nil, false
	}
	return []string{*e.ID}, true
}

// noFilter reports whether decoded filters v select every event.
func noFilter(v any) bool {
	c, err := newFilters().compile("properties", v)
	return err == nil && c.sql == ""
}

// trendsHourly is Trends' answer from the hourly counts when its series
// and range allow (ok false otherwise): the persons' numbers of events.
func (st *Store) trendsHourly(ctx context.Context, project uint64, f *Filter, e Entity, page Page) ([]Actor, bool, error) {
	names, ok := st.hourlyNames(f, e)
	if !ok || f.Range.All || !onHour(f.Range.From, f.Range.To) {
		return nil, false, nil
	}
	h := hourly{project: project, from: f.Range.From, to: f.Range.To, names: names}
	var err error
	if h.stored, err = st.storedIsCurrent(ctx, project, h.from, h.to); err != nil {
		return nil, true, err
	}
	from := h.sql()
	lim, largs := page.sql()
	sql := "SELECT " + h.pid() + " AS pid, toFloat64(sum(events)) AS value " + from.sql + " GROUP BY pid ORDER BY value DESC, pid ASC" + lim
	out, err := st.actors(withSettings(ctx, manyGroups), sql, append(from.args, largs...), true)
	return out, true, err
}

// retentionHourly is Retention's answer from the hourly counts when its
// entities and intervals allow (ok false otherwise): the same cohort cut
// (scan.among) and grouping, over hours instead of events. Every
// interval edge is a whole UTC hour, so each hour lies in one interval
// and its start's bucket is the interval of all its events; the first
// target event's hour gives its interval.
func (st *Store) retentionHourly(ctx context.Context, project uint64, f *Filter, r *retention, page Page) ([]Actor, bool, error) {
	g := *f
	g.BreakdownValue = nil
	target, ok := st.hourlyNames(&g, r.target)
	back, ok2 := st.hourlyNames(&g, r.returning)
	if !ok || !ok2 || r.breakdown != nil || !onHour(append([]time.Time{r.end}, r.starts...)...) {
		return nil, false, nil
	}
	cohortEnd := r.end
	if r.selected+1 < len(r.starts) {
		cohortEnd = r.starts[r.selected+1]
	}
	h := hourly{project: project, to: r.end, names: unionNames(target, back)}
	if !r.firstTime {
		h.from = r.starts[r.selected] // neither the cohort nor a return is before it
	}
	// The cohort's range lies inside h's: one answer serves both.
	stored, err := st.storedIsCurrent(ctx, project, h.from, h.to)
	if err != nil {
		return nil, true, err
	}
	cohort := hourly{project: project, from: r.starts[r.selected], to: cohortEnd, names: target, stored: stored}
	in := cohort.sql()
	h.stored, h.among = stored, cond{"SELECT " + cohort.pid() + " " + in.sql, in.args}
	isTarget := cond{"event IN (" + marks(len(target)) + ")", anys(target)}
	idx := r.index("hour", f.Loc)
	rows := retentionRows{from: h.sql(), pid: cond{h.pid(), nil}, idx: idx,
		isReturn: cond{"event IN (" + marks(len(back)) + ") AND hour >= toDateTime(?)", append(anys(back), epochSeconds(r.starts[0]))},
		member:   r.member(isTarget, idx, "hour")}
	out, err := st.retentionActors(ctx, rows, r, page)
	return out, true, err
}
