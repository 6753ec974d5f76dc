package insight

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Retention types.
const (
	retentionRecurring = "retention_recurring"
	retentionFirstTime = "retention_first_time"
)

// maxRetentionIntervals bounds total_intervals: each interval is a bound
// value of the query.
const maxRetentionIntervals = 1000

// RetentionQuery is the query ParseFilter reads for retention: its range
// is derived from date_to, period and total_intervals (reference §5), so
// date_from and interval are not the caller's.
func RetentionQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	out.Set("date_from", "all")
	out.Del("interval")
	return out
}

// retention is the parsed parameters of GET /persons/retention/.
type retention struct {
	target, returning Entity
	firstTime         bool
	period            Interval
	total, selected   int
	starts            []time.Time // interval starts; the range is [starts[0], end)
	end               time.Time
	breakdown         *retentionBreakdown // the cohort is a breakdown bucket instead
}

func parseRetention(q url.Values, f *Filter, now time.Time) (*retention, error) {
	r := &retention{}
	var err error
	if r.target, err = retentionEntity("target_entity", q.Get("target_entity"), nil); err != nil {
		return nil, err
	}
	if r.returning, err = retentionEntity("returning_entity", q.Get("returning_entity"), &r.target); err != nil {
		return nil, err
	}
	switch q.Get("retention_type") {
	case "", retentionRecurring:
	case retentionFirstTime:
		r.firstTime = true
	default:
		return nil, invalidf("retention_type", "retention_type must be retention_recurring or retention_first_time.")
	}
	switch strings.ToLower(q.Get("period")) {
	case "", "day":
		r.period = Day
	case "hour":
		r.period = Hour
	case "week":
		r.period = Week
	case "month":
		r.period = Month
	default:
		return nil, invalidf("period", "period must be Hour, Day, Week or Month, not %q.", q.Get("period"))
	}
	if r.total, err = intParam(q, "total_intervals", 11, 1, maxRetentionIntervals); err != nil {
		return nil, err
	}
	if r.selected, err = intParam(q, "selected_interval", 0, 0, r.total-1); err != nil {
		return nil, err
	}
	if r.breakdown, err = parseRetentionBreakdown(q); err != nil {
		return nil, err
	}
	to := now.In(f.Loc)
	if s := q.Get("date_to"); s != "" {
		if to, err = parseDate("date_to", s, now, f.Loc); err != nil {
			return nil, err
		}
	}
	// The last interval is date_to's; the first total-1 intervals before it.
	r.end = r.period.Next(r.period.Trunc(to, f.Loc))
	first := r.period.add(r.end, -r.total)
	for t := first; t.Before(r.end); t = r.period.Next(t) {
		r.starts = append(r.starts, t)
	}
	return r, nil
}

// retentionEntity reads target_entity or returning_entity: a JSON entity
// of which id and type are used; absent, def (or $pageview events).
func retentionEntity(attr, text string, def *Entity) (Entity, error) {
	v, err := decodeJSON(attr, text)
	if err != nil {
		return Entity{}, err
	}
	if v == nil {
		if def != nil {
			return *def, nil
		}
		pv := "$pageview"
		return Entity{Type: "events", ID: &pv}, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Entity{}, invalidf(attr, "%s must be a JSON object {\"id\": ..., \"type\": \"events\"|\"actions\"}.", attr)
	}
	typ, _ := obj["type"].(string)
	if typ == "" {
		typ = "events"
	}
	if typ != "events" && typ != "actions" {
		return Entity{}, invalidf(attr, "%s type must be events or actions.", attr)
	}
	e := Entity{Type: typ}
	if err := e.setID(obj["id"]); err != nil {
		return Entity{}, invalidf(attr, "%s", err.(*Error).Detail)
	}
	return e, nil
}

// intParam reads an integer in [lo, hi], def when absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalidf(name, "%s must be an integer from %d to %d.", name, lo, hi)
	}
	return n, nil
}

// Retention answers GET /persons/retention/: the persons of cohort
// selected_interval, each with the intervals after it in which they did
// the returning event, ordered by the number of appearances descending,
// then person id (reference §5, §14.1).
//
// One scan reads the target and returning events; each event gets the
// index of its interval (-1 outside the range). Recurring: the cohort is
// the persons with a target event in the selected interval. First time:
// the persons whose first target event ever is in it, so the scan has no
// lower bound for target events.
func (st *Store) Retention(ctx context.Context, project uint64, f *Filter, q url.Values, page Page, now time.Time) ([]Actor, error) {
	r, err := parseRetention(q, f, now)
	if err != nil {
		return nil, err
	}
	if out, ok, err := st.retentionHourly(ctx, project, f, r, page); ok {
		return out, err
	}
	s, err := st.retentionScan(ctx, project, f, r)
	if err != nil {
		return nil, err
	}
	if r.breakdown != nil {
		return st.retentionByBreakdown(ctx, s, r, page)
	}
	// Only the persons with a target event in the selected interval can
	// be in its cohort (first time too: their first one must be there):
	// that interval's events, read by the sort key's date, select them,
	// and the scan reads the other columns of their rows alone, before
	// the join and the per-person arrays (docs/performance.md, the analysis figures). The
	// scan also keeps rows an override gave to persons outside that set;
	// member drops them, as such a person has no target event in the
	// selected interval.
	cohort, err := st.retentionCohort(ctx, project, f, r)
	if err != nil {
		return nil, err
	}
	s.among = cohort
	if !r.firstTime {
		// Recurring: neither the cohort nor a return is before the
		// selected interval.
		s.from = r.starts[r.selected]
	}
	base, args := s.sql()
	idx := cond{"idx", nil}
	return st.retentionActors(ctx, retentionRows{from: cond{"FROM (" + base + ")", args}, pid: cond{"pid", nil},
		idx: idx, isReturn: cond{"is_return = 1", nil}, member: r.member(cond{"is_target = 1", nil}, idx, "timestamp")}, r, page)
}

// member is the condition on a person's rows of being in the selected
// cohort: isTarget and idx are the SQL of a row's target flag and
// interval index, col its time column.
func (r *retention) member(isTarget, idx cond, col string) cond {
	if r.firstTime {
		// argMinIf of no rows is 0: a person without target events is in
		// no cohort.
		return cond{"countIf(" + isTarget.sql + ") > 0 AND argMinIf(" + idx.sql + ", " + col + ", " + isTarget.sql + ") = ?",
			slices.Concat(isTarget.args, idx.args, isTarget.args, []any{r.selected})}
	}
	return cond{"countIf(" + isTarget.sql + " AND " + idx.sql + " = ?) > 0", slices.Concat(isTarget.args, idx.args, []any{r.selected})}
}

// retentionRows are the rows a retention statement groups: from, the
// FROM clause (and filters) of the rows, and over them pid, idx and
// isReturn, the SQL of a row's person, interval index and return flag,
// and member, the cohort condition on a person's rows.
type retentionRows struct {
	from, pid, idx, isReturn, member cond
}

// retentionActors groups rows into the persons of the cohort with the
// intervals they came back in, ordered by their number, then person id.
func (st *Store) retentionActors(ctx context.Context, rows retentionRows, r *retention, page Page) ([]Actor, error) {
	lim, largs := page.sql()
	// The intervals a person came back in: up to 64, the bits of one
	// number (no hash set per person, docs/performance.md).
	back := rows.isReturn.sql + " AND " + rows.idx.sql + " > ?"
	rets, count := "groupUniqArrayIf("+rows.idx.sql+", "+back+")", "length(ret)"
	if r.total <= 64 {
		rets, count = "groupBitOrIf(bitShiftLeft(toUInt64(1), toUInt64("+rows.idx.sql+")), "+back+")", "length(bitmaskToArray(ret))"
	}
	sql := "SELECT pid, ret FROM (SELECT " + rows.pid.sql + " AS pid, " + rets + " AS ret " + rows.from.sql +
		" GROUP BY pid HAVING " + rows.member.sql + ") ORDER BY " + count + " DESC, pid ASC" + lim
	all := slices.Concat(rows.pid.args, rows.idx.args, rows.isReturn.args, rows.idx.args, []any{r.selected},
		rows.from.args, rows.member.args, largs)
	return st.scanActors(ctx, sql, all, func(rows driver.Rows, a *Actor) error {
		var ret []int64
		if r.total <= 64 {
			var bits uint64
			if err := rows.Scan(&a.PersonID, &bits); err != nil {
				return err
			}
			for i := range r.total {
				if bits&(1<<i) != 0 {
					ret = append(ret, int64(i))
				}
			}
		} else if err := rows.Scan(&a.PersonID, &ret); err != nil {
			return err
		}
		a.Appearances = make([]int, r.total-r.selected)
		a.Appearances[0] = 1
		for _, i := range ret {
			a.Appearances[int(i)-r.selected] = 1
		}
		return nil
	})
}

// retentionScan is the scan of a retention request: the target and the
// returning events (first time: target events of all time), each with
// is_target, is_return and idx, its interval index.
func (st *Store) retentionScan(ctx context.Context, project uint64, f *Filter, r *retention) (scan, error) {
	g := *f
	g.BreakdownValue = nil
	g.Range = Range{From: r.starts[0], To: r.end, All: r.firstTime}
	target, err := st.match(ctx, project, &g, r.target)
	if err != nil {
		return scan{}, err
	}
	back, err := st.match(ctx, project, &g, r.returning)
	if err != nil {
		return scan{}, err
	}
	s := target
	s.names = unionNames(target.names, back.names)
	for k := range back.f.eventKeys {
		s.f.eventKeys[k] = struct{}{}
	}
	s.f.person = s.f.person || back.f.person
	returning := and(back.where, cond{"timestamp >= toDateTime(?)", []any{eventstore.EpochSeconds(r.starts[0])}})
	s.where = or(orTrue(target.where), returning)
	idx := r.index("timestamp", f.Loc)
	s.extra = append(s.extra,
		cond{"toUInt8(" + orTrue(target.where).sql + ") AS is_target", orTrue(target.where).args},
		cond{"toUInt8(" + returning.sql + ") AS is_return", returning.args},
		cond{idx.sql + " AS idx", idx.args})
	return s, nil
}

// retentionCohort is the statement of the persons with a target event
// in the selected interval, a superset of the selected cohort.
func (st *Store) retentionCohort(ctx context.Context, project uint64, f *Filter, r *retention) (cond, error) {
	g := *f
	g.BreakdownValue = nil
	g.Range = Range{From: r.starts[r.selected], To: r.end}
	if r.selected+1 < len(r.starts) {
		g.Range.To = r.starts[r.selected+1]
	}
	in, err := st.match(ctx, project, &g, r.target)
	if err != nil {
		return cond{}, err
	}
	q, args := in.sql()
	return cond{"SELECT pid FROM (" + q + ")", args}, nil
}

// orTrue is c, or a true condition when c is empty (any event).
func orTrue(c cond) cond {
	if c.sql == "" {
		return cond{"1", nil}
	}
	return c
}

// index is the SQL of an event's interval index: the position of its
// bucket among the interval starts, -1 outside them. Buckets compare as
// numbers: seconds for hours, day numbers for dates. transform looks the
// bucket up in a hash table built once (indexOf searched a copy of the
// constant array for every row: a third of the scan's time).
func (r *retention) index(col string, loc *time.Location) cond {
	b := bucket(r.period, col, loc)
	key := "toUInt32(" + b.sql + ")"
	if r.period != Hour {
		key = "toUInt32(toRelativeDayNum(" + b.sql + "))"
	}
	keys := make([]any, len(r.starts))
	positions := make([]any, len(r.starts))
	for i, t := range r.starts {
		positions[i] = i
		if r.period == Hour {
			keys[i] = t.Unix()
		} else {
			keys[i] = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400
		}
	}
	list := "[" + statement.Marks(len(r.starts)) + "]"
	args := append(append(append([]any{}, b.args...), keys...), positions...)
	return cond{"transform(" + key + ", " + list + ", " + list + ", toInt64(-1))", args}
}
