package insight

import (
	"context"
	"time"
)

// Counts kept per hour (docs/analysis.md, "Counts kept per hour";
// schema 0014). Trends and retention group every active person of the
// range, and over raw events that grouping is several bare scans
// (docs/performance.md, G10). events_hourly holds, per (event, UTC hour,
// distinct id, person as stored), the number of events: the routes read
// it instead of events when nothing but the event name and the range
// selects the events, and the range's edges are whole UTC hours.
// Attribution is the raw scan's (the same override join and tombstones),
// so the answers are the same.

// hourly is the rows of events_hourly of some event names in [from, to),
// each attributed to its current, live person (attributedPID).
type hourly struct {
	project  uint64
	from, to time.Time // whole UTC hours; from zero: no lower bound
	names    []string
	among    cond // as scan.among
}

// sql is the FROM clause of the rows, with their filters: the columns
// of events_hourly and o_pid are there to select and group on directly.
// One level, no subquery around it: ClickHouse 18.16 runs the IN
// subqueries of a PREWHERE once more for each SELECT around it (a
// retention statement spent 40% more; docs/performance.md, h/g10h).
func (h hourly) sql() cond {
	q := "FROM events_hourly " + overridesJoin +
		" PREWHERE project_id = ? AND event IN (" + marks(len(h.names)) + ") AND hour < toDateTime(?)"
	args := append(append([]any{h.project, h.project}, anys(h.names)...), epochSeconds(h.to))
	if !h.from.IsZero() {
		q += " AND hour >= toDateTime(?)"
		args = append(args, epochSeconds(h.from))
	}
	if h.among.sql != "" {
		c := amongCond(h.project, h.among)
		q += " AND " + c.sql
		args = append(args, c.args...)
	}
	return cond{q + " WHERE o_deleted = 0", args}
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
	from := hourly{project: project, from: f.Range.From, to: f.Range.To, names: names}.sql()
	lim, largs := page.sql()
	sql := "SELECT " + attributedPID + " AS pid, toFloat64(sum(events)) AS value " + from.sql + " GROUP BY pid ORDER BY value DESC, pid ASC" + lim
	out, err := st.actors(ctx, sql, append(from.args, largs...), true)
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
	in := hourly{project: project, from: r.starts[r.selected], to: cohortEnd, names: target}.sql()
	h := hourly{project: project, to: r.end, names: unionNames(target, back),
		among: cond{"SELECT " + attributedPID + " " + in.sql, in.args}}
	if !r.firstTime {
		h.from = r.starts[r.selected] // neither the cohort nor a return is before it
	}
	isTarget := cond{"event IN (" + marks(len(target)) + ")", anys(target)}
	idx := r.index("hour", f.Loc)
	rows := retentionRows{from: h.sql(), pid: cond{attributedPID, nil}, idx: idx,
		isReturn: cond{"event IN (" + marks(len(back)) + ") AND hour >= toDateTime(?)", append(anys(back), epochSeconds(r.starts[0]))},
		member:   r.member(isTarget, idx, "hour")}
	out, err := st.retentionActors(ctx, rows, r, page)
	return out, true, err
}
