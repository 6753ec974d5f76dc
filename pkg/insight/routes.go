package insight

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
)

// Trends answers GET /persons/trends/: the persons with at least one
// event of the target series in the range, each with its value (the
// number of those events, or the aggregate of math_property), ordered by
// value descending then person id (reference §2, §14.1).
func (st *Store) Trends(ctx context.Context, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
	e, err := f.Target(q)
	if err != nil {
		return nil, err
	}
	value, key, err := trendsValue(e)
	if err != nil {
		return nil, err
	}
	g := *f
	switch mathOf(e) {
	case "weekly_active", "monthly_active":
		// The persons active in the 7 (30) days ending with the point.
		days := 7
		if mathOf(e) == "monthly_active" {
			days = 30
		}
		g.Range = Range{From: Day.Trunc(f.Range.To.Add(-time.Second), f.Loc).AddDate(0, 0, 1-days), To: f.Range.To}
	}
	if key == "" {
		if out, ok, err := st.trendsHourly(ctx, project, &g, e, page); ok {
			return out, err
		}
	}
	s, err := st.match(ctx, project, &g, e)
	if err != nil {
		return nil, err
	}
	if key != "" {
		s.f.eventKeys[key] = struct{}{}
	}
	base, args := s.sql()
	lim, largs := page.sql()
	sql := "SELECT pid, " + value.sql + " AS value FROM (" + base + ") GROUP BY pid ORDER BY value DESC, pid ASC" + lim
	// value's placeholders come first in the text.
	all := append(append(append([]any{}, value.args...), args...), largs...)
	return st.actors(ctx, sql, all, true)
}

// trendsValue is the per-person value of a trends point: the number of
// matching events, or an aggregate of the numeric values of math_property
// (key, which the scan must then extract). The number is count(): the
// ingester writes one events row per stream message, also after a crash
// or a retry (docs/architecture.md, "One events row per message"), so
// no per-person set of uuids is needed (a third of the query's time).
func trendsValue(e Entity) (value cond, key string, err error) {
	agg := map[string]string{
		"sum": "sum(%s)", "avg": "avg(%s)", "min": "min(%s)", "max": "max(%s)",
		"median": "quantileExact(0.5)(%s)", "p75": "quantileExact(0.75)(%s)", "p90": "quantileExact(0.9)(%s)",
		"p95": "quantileExact(0.95)(%s)", "p99": "quantileExact(0.99)(%s)",
	}
	m := mathOf(e)
	if pattern, ok := agg[m]; ok {
		if e.MathProperty == "" {
			return cond{}, "", invalidf("entity_math", "math %q needs the series' math_property.", m)
		}
		num := "toFloat64OrNull(e_values[indexOf(e_keys, ?)])"
		return cond{"ifNull(toFloat64(" + sprintf(pattern, num) + "), 0)", []any{e.MathProperty}}, e.MathProperty, nil
	}
	switch m {
	case "unique_group", "unique_session":
		return cond{}, "", invalidf("entity_math", "math %q is not supported: actors are persons.", m)
	}
	return cond{"toFloat64(count())", nil}, "", nil
}

// Stickiness answers GET /persons/stickiness/: the persons whose events of
// the target series fall in exactly stickiness_days distinct intervals of
// the range, by person id.
func (st *Store) Stickiness(ctx context.Context, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
	raw := firstOf(q, "stickiness_days", "selected_interval")
	if raw == "" {
		return nil, invalidf("stickiness_days", "stickiness_days is required (the number of intervals, 1 or more).")
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return nil, invalidf("stickiness_days", "stickiness_days must be an integer of 1 or more.")
	}
	e, err := f.Target(q)
	if err != nil {
		return nil, err
	}
	s, err := st.match(ctx, project, f, e)
	if err != nil {
		return nil, err
	}
	b := bucket(f.Interval, "timestamp", f.Loc)
	s.extra = append(s.extra, cond{b.sql + " AS bucket", b.args})
	// uniqUpTo(n) counts exactly up to n (n+1 beyond) in a small array
	// per person instead of a hash set: same persons, less time
	// (docs/performance.md, the analysis figures). Its parameter is at most 100.
	distinct := cond{"uniqExact(bucket) = ?", []any{n}}
	if n <= maxUniqUpTo {
		distinct = cond{"uniqUpTo(?)(bucket) = ?", []any{n, n}}
	}
	full := func() ([]Actor, error) {
		base, args := s.sql()
		lim, largs := page.sql()
		sql := "SELECT pid FROM (" + base + ") GROUP BY pid HAVING " + distinct.sql + " ORDER BY pid" + lim
		return st.actors(ctx, sql, append(append(args, distinct.args...), largs...), false)
	}
	return st.prefixPage(ctx, project, page, func(upTo uint64) (string, []any) {
		cut := s
		cut.upTo = upTo
		base, args := cut.sql()
		return "SELECT pid, toUInt8(" + distinct.sql + ") AS ok FROM (" + base + ") GROUP BY pid",
			append(append([]any{}, distinct.args...), args...)
	}, full)
}

// maxUniqUpTo is the largest parameter ClickHouse takes for uniqUpTo.
const maxUniqUpTo = 100

// Lifecycle statuses.
var lifecycleTypes = map[string]bool{"new": true, "returning": true, "resurrecting": true, "dormant": true}

// Lifecycle answers GET /persons/lifecycle/: the persons whose status at
// the interval of target_date is lifecycle_type, by person id. The series
// is the first entity; only events in [date_from - 1 interval, date_to +
// 1 interval) are looked at (reference §4). A person's periods are those
// of their events in the project's zone; C is the period of created_at.
func (st *Store) Lifecycle(ctx context.Context, project uint64, f *Filter, q url.Values, page Page, now time.Time) ([]Actor, error) {
	if q.Get("target_date") == "" {
		return nil, invalidf("target_date", "target_date is required: the period whose persons are wanted.")
	}
	target, err := parseDate("target_date", q.Get("target_date"), now, f.Loc)
	if err != nil {
		return nil, err
	}
	typ := q.Get("lifecycle_type")
	if typ == "" {
		return nil, invalidf("lifecycle_type", "lifecycle_type is required: new, returning, resurrecting or dormant.")
	}
	if !lifecycleTypes[typ] {
		return nil, invalidf("lifecycle_type", "lifecycle_type must be new, returning, resurrecting or dormant, not %q.", typ)
	}
	if len(f.Series) == 0 {
		return nil, invalidf("events", "lifecycle needs a series: give one entity in events or actions.")
	}
	g := *f
	if !g.Range.All {
		g.Range.From = f.Interval.Prev(f.Range.From)
	}
	// No status reads events after the target interval, and returning
	// and dormant only the target's and the previous interval's (new and
	// resurrecting also whether any came before): the scan reads no
	// more of the range (by the sort key's date, docs/performance.md).
	t := f.Interval.Trunc(target, f.Loc)
	if end := f.Interval.Next(t); end.Before(g.Range.To) {
		g.Range.To = end
	}
	if start := f.Interval.Prev(t); (typ == "returning" || typ == "dormant") && (g.Range.All || start.After(g.Range.From)) {
		g.Range.From, g.Range.All = start, false
	}
	s, err := st.match(ctx, project, &g, f.Series[0])
	if err != nil {
		return nil, err
	}
	sql, args := lifecycleSQL(s, project, f, target, typ, page)
	return st.actors(ctx, sql, args, false)
}

// lifecycleSQL is the query of the persons of status typ at target's
// interval over the scan s of the series.
func lifecycleSQL(s scan, project uint64, f *Filter, target time.Time, typ string, page Page) (string, []any) {
	b := bucket(f.Interval, "timestamp", f.Loc)
	s.extra = append(s.extra, cond{b.sql + " AS bucket", b.args})
	t := f.Interval.Trunc(target, f.Loc)
	cur, prev := lit(f.Interval, t), lit(f.Interval, f.Interval.Prev(t))
	active := cond{"countIf(bucket = " + cur.sql + ") > 0", cur.args}
	before := cond{"countIf(bucket = " + prev.sql + ") > 0", prev.args}
	// New: first active at the target interval and created in it. Only
	// new and resurrecting read created_at (returning persons were active
	// before, so are never new), and then as the set of the persons
	// created in that one interval, not a join with every person of the
	// project (docs/performance.md, the analysis figures).
	c := bucket(f.Interval, "created_at", f.Loc)
	var created cond
	created.sql, created.args = chstore.LivePersons(project, c.sql+" = "+cur.sql, append(append([]any{}, c.args...), cur.args...)...).In("pid")
	isNew := and(active, cond{"min(bucket) = " + cur.sql, cur.args}, created)
	not := func(x cond) cond { return cond{"(NOT (" + x.sql + "))", x.args} }
	having := map[string]cond{
		"new":          isNew,
		"returning":    and(active, before),
		"resurrecting": and(active, not(before), not(isNew)),
		"dormant":      and(not(active), before),
	}[typ]
	base, args := s.sql()
	lim, largs := page.sql()
	sql := "SELECT pid FROM (" + base + ") GROUP BY pid HAVING " + having.sql + " ORDER BY pid" + lim
	return sql, append(append(args, having.args...), largs...)
}
