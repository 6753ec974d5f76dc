package insight

import (
	"context"
	"time"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
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

func (h hourly) attributed() eventstore.Attributed {
	return eventstore.Attributed{Project: h.project, From: h.from, To: h.to, Names: h.names,
		Among: h.among.subquery(), Stored: h.stored}
}

// pid is the SQL of a row's current person.
func (h hourly) pid() string { return h.attributed().HourlyPID() }

// sql is the FROM clause of the rows, with their filters
// (eventstore.Attributed.HourlyFrom): the columns of events_hourly (and
// o_pid) are there to select and group on directly.
func (h hourly) sql() cond {
	q, args := h.attributed().HourlyFrom()
	return cond{q, args}
}

// storedIsCurrent reports whether every event of the project in [from,
// to) still belongs to the person stored with it
// (eventstore.StoredIsCurrent).
func (st *Store) storedIsCurrent(ctx context.Context, project uint64, from, to time.Time) (bool, error) {
	return eventstore.StoredIsCurrent(readCtx(ctx), st.conn, project, from, to)
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
// copies out, eventstore.Attributed.Events), read events.
func (st *Store) hourlyNames(f *Filter, e Entity) ([]string, bool) {
	if st.noHourly || e.Type != "events" || e.ID == nil || eventstore.MayBeCommand(*e.ID) {
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
	isTarget := cond{"event IN (" + statement.Marks(len(target)) + ")", statement.Args(target)}
	idx := r.index("hour", f.Loc)
	rows := retentionRows{from: h.sql(), pid: cond{h.pid(), nil}, idx: idx,
		isReturn: cond{"event IN (" + statement.Marks(len(back)) + ") AND hour >= toDateTime(?)", append(statement.Args(back), eventstore.EpochSeconds(r.starts[0]))},
		member:   r.member(isTarget, idx, "hour")}
	out, err := st.retentionActors(ctx, rows, r, page)
	return out, true, err
}
