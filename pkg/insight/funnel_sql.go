package insight

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// How a funnel is computed (reference §6, §12).
//
// ClickHouse 18.16's windowFunnel has only its default mode (no 'strict'
// nor 'strict_order'), answers two steps in one second by the order the
// rows arrive in, and returns no per-attempt timestamps, which exclusions
// and correlation need. So every
// order type is computed the same way, with arrays and higher-order
// functions that exist on 18.16 and current releases (except the plain
// ordered case, which takes windowFunnel over timestamps that carry our
// order of one second's events: funnel_fast.go):
//
//  1. per person, the sorted array A of the events in range that match a
//     step, an exclusion or the correlation entity (every event for strict
//     funnels): (seconds, first step matched, uuid, bit mask, breakdown
//     values). Sorting by (time, first step) puts, within one second,
//     events of earlier steps first, so "at or after step i's time" holds
//     in both orders of arrival; arrayDistinct of the sorted array drops
//     redelivered copies (identical tuples, adjacent once sorted): the same
//     array as sorting a groupUniqArray, ~25% cheaper than its hash set of
//     tuples per person (docs/performance.md).
//  2. each event matching step 1 (any step, unordered) starts an attempt;
//     an attempt is the chain of event indexes of its steps, built step by
//     step with arrayFirstIndex (ordered: the first later event of the next
//     step within the window; strict: the very next event must be it).
//     Chained steps are bound with arrayMap over one-element arrays, the
//     only "let" 18.16 has.
//  3. an attempt hit by an exclusion is dropped; the person's level is the
//     highest level of the remaining attempts, and the counted attempt the
//     earliest start among those of that level.
//
// Event order: by time, then by the step the event matches first; two
// events of one step in the same second keep a fixed (uuid) order.

const (
	bitExclusion   = 20 // exclusion x has bit 20+x
	bitCorrelation = 40
	ordOther       = 99 // the sort rank of events matching no step
)

// sqlText accumulates SQL text and its placeholders' values in order.
type sqlText struct {
	b    strings.Builder
	args []any
}

func (s *sqlText) add(text string, args ...any) *sqlText {
	s.b.WriteString(text)
	s.args = append(s.args, args...)
	return s
}

func (s *sqlText) cond(c cond) *sqlText {
	if c.sql == "" {
		return s.add("1")
	}
	return s.add(c.sql, c.args...)
}

func bit(n int) uint64 { return uint64(1) << n }

// funnelQuery is the per-person funnel of one request.
type funnelQuery struct {
	fn      *Funnel
	loc     *time.Location
	scan    scan
	corr    *cond // the correlation entity's events, when asked
	bdExprs []cond
	// disjoint: no event can match two steps (funnel_fast.go).
	disjoint bool
}

// funnelScan builds the scan of a funnel: the filter's range, global
// filters and search over every event, with the flags of each step,
// exclusion and correlation event.
func (st *Store) funnelScan(ctx context.Context, project uint64, f *Filter, fn *Funnel, corr *Entity) (*funnelQuery, error) {
	g := *f
	g.BreakdownValue = nil // a funnel's breakdown places persons, it does not filter events
	s, err := st.match(ctx, project, &g, Entity{Type: "events"})
	if err != nil {
		return nil, err
	}
	fq := &funnelQuery{fn: fn, loc: f.Loc, disjoint: st.disjointSteps(ctx, project, fn.Steps)}
	person := make([]bool, len(fn.Breakdown))
	for i := range person {
		person[i] = fn.BreakdownType == "person"
	}
	bd := breakdownSQL(&s, fn.Breakdown, person)
	inBucket := fn.bucketOf(bd)
	var mask sqlText
	mask.add("toUInt64(0)")
	var matchAny []cond
	for i, e := range fn.Steps {
		c, err := st.seriesCond(ctx, project, s.f, e)
		if err != nil {
			return nil, err
		}
		if fn.Attribution == StepTouch && i == fn.AttributionStep {
			// Only the bucket's events count as this step.
			c = and(orTrue(c), inBucket)
		}
		matchAny = append(matchAny, orTrue(c))
		mask.add(" + if(").cond(c).add(", toUInt64(?), toUInt64(0))", bit(i))
	}
	for i, x := range fn.Exclusions {
		c, err := st.seriesCond(ctx, project, s.f, x.Entity)
		if err != nil {
			return nil, err
		}
		matchAny = append(matchAny, orTrue(c))
		mask.add(" + if(").cond(c).add(", toUInt64(?), toUInt64(0))", bit(bitExclusion+i))
	}
	if corr != nil {
		c, err := st.seriesCond(ctx, project, s.f, *corr)
		if err != nil {
			return nil, err
		}
		// Events named like a step never count as the correlated event.
		var names []any
		for _, e := range fn.Steps {
			if e.Type == "events" && e.ID != nil {
				names = append(names, *e.ID)
			}
		}
		if len(names) > 0 {
			c = and(c, cond{"NOT has(?, event)", []any{names}})
		}
		fq.corr = &c
		matchAny = append(matchAny, orTrue(c))
		mask.add(" + if(").cond(c).add(", toUInt64(?), toUInt64(0))", bit(bitCorrelation))
	}
	if fn.Order != Strict {
		s.where = and(s.where, or(matchAny...))
		s.names = st.funnelNames(ctx, project, fn, corr)
	}
	if fn.Attribution == AllEvents {
		// The bucket's funnel sees only the events carrying its value.
		s.where = and(s.where, inBucket)
	}
	if fn.Cohort != nil && *fn.Cohort != 0 {
		member, err := s.f.compile("funnel_step_breakdown", []any{map[string]any{"type": "cohort", "key": "id", "value": *fn.Cohort}})
		if err != nil {
			return nil, err
		}
		s.where = and(s.where, member)
	}
	var ord sqlText
	ord.add("multiIf(")
	for i := range fn.Steps {
		ord.add("bitAnd(mask, toUInt64(?)) != 0, ?, ", bit(i), i)
	}
	ord.add("?)", ordOther)
	s.extra = append(s.extra, cond{"(" + mask.b.String() + ") AS mask", mask.args},
		cond{ord.b.String() + " AS ord", ord.args}, cond{bd.sql + " AS bd", bd.args})
	fq.scan = s
	return fq, nil
}

// deadline is the SQL of the end of the window opened at the time expr t
// (inclusive, like PostHog's).
func (fq *funnelQuery) deadline(s *sqlText, t string, tz string) {
	if w := fq.fn.Window; w.Months > 0 {
		s.add("toUInt32(addMonths(toDateTime("+t+", ?), ?))", tz, w.Months)
		return
	}
	s.add("("+t+" + ?)", fq.fn.Window.Seconds)
}

// persons is the SQL selecting, per person of the funnel, pid, level
// (steps reached, 0 when every attempt was excluded), first and final
// (the counted attempt's step-1 and last-step seconds) and bucket (the
// breakdown values of the person); the fast path (funnel_fast.go) only
// pid and plevel, all its callers read then.
func (fq *funnelQuery) persons(tz string) (string, []any) {
	if fq.fastLevel() {
		return fq.fastPersons()
	}
	var s sqlText
	base, args := fq.scan.sql()
	// hit is a layer above first and final, which it reads as columns (18.16
	// does not capture the columns of an alias expanded inside a lambda).
	s.add("SELECT pid, level, plevel, first, final, bucket, ")
	fq.hit(&s, tz)
	s.add(" AS hit FROM (SELECT pid, level, plevel, T[atts[best].2] AS first, T[atts[best].3] AS final, bucket, T, M FROM (")
	s.add("SELECT pid, T, M, atts, arrayMap(a -> a.1, atts) AS L, if(length(L) = 0, 0, arrayReduce('max', L)) AS level, indexOf(L, level) AS best, ")
	fq.periodLevel(&s)
	s.add(" AS plevel, ")
	fq.bucket(&s)
	s.add(" AS bucket FROM (SELECT pid, A, arrayMap(x -> x.1, A) AS T, arrayMap(x -> x.4, A) AS M, ")
	fq.attempts(&s, tz)
	s.add(" AS atts FROM (SELECT pid, arrayDistinct(arraySort(groupArray((toUInt32(timestamp), ord, toString(uuid), mask, bd)))) AS A FROM (")
	s.add(base, args...)
	s.add(") GROUP BY pid))))")
	return s.b.String(), s.args
}

// hit says whether the person has a correlation event strictly after the
// counted attempt's start and strictly before its last step (converted)
// or the end of its window (reference §7).
func (fq *funnelQuery) hit(s *sqlText, tz string) {
	if fq.corr == nil {
		s.add("0")
		return
	}
	// Every column the inner lambda reads comes in as an argument of the
	// outer one: 18.16 prunes subquery columns read only inside lambdas.
	s.add("arrayMap((f, e, tt, mm) -> arrayExists((xt, xm) -> bitAnd(xm, toUInt64(?)) != 0 AND xt > f AND xt < e, tt, mm), [first], [if(level = ?, final, ",
		bit(bitCorrelation), len(fq.fn.Steps))
	fq.deadline(s, "first", tz)
	s.add(")], [T], [M])[1]")
}

// periodLevel is the level the funnel selects on: the person's level, or
// for the trends view the best level of the attempts that started in the
// entrance period.
func (fq *funnelQuery) periodLevel(s *sqlText) {
	tr := fq.fn.Trends
	if tr == nil {
		s.add("level")
		return
	}
	// T and atts come in as arguments: 18.16 prunes subquery columns read
	// only inside lambdas.
	b, l := bucket(tr.Interval, "toDateTime(tt[a.2])", fq.loc), lit(tr.Interval, tr.Start)
	s.add("arrayMap((tt, aa) -> arrayReduce('max', arrayMap(a -> a.1, arrayFilter(a -> "+b.sql+" = "+l.sql+", aa))), [T], [atts])[1]", append(b.args, l.args...)...)
}

// bucket is the person's breakdown values: first and last touch, those of
// the first (last) step event having any, all empty when none has (so ""
// selects the persons without a value, as in PostHog); all_events and
// step, those of the first event of a step (attributed step), which all
// carry the bucket's values (funnelScan).
func (fq *funnelQuery) bucket(s *sqlText) {
	fn := fq.fn
	if len(fn.Breakdown) == 0 {
		s.add("emptyArrayString()")
		return
	}
	steps := bit(len(fn.Steps)) - 1
	if fn.Attribution == AllEvents || fn.Attribution == StepTouch {
		if fn.Attribution == StepTouch {
			steps = bit(fn.AttributionStep)
		}
		s.add("arrayMap(x -> x.5, arrayFilter(x -> bitAnd(x.4, toUInt64(?)) != 0, A))[1]", steps)
		return
	}
	idx := "1"
	if fn.Attribution == LastTouch {
		idx = "-1"
	}
	s.add("arrayResize(arrayFilter(b -> arrayExists(v -> v != '', b), arrayMap(x -> x.5, arrayFilter(x -> bitAnd(x.4, toUInt64(?)) != 0, A)))["+idx+"], ?, '')",
		steps, len(fn.Breakdown))
}

// attempts is the array of (level, start index, last index) of the
// person's attempts not hit by an exclusion.
func (fq *funnelQuery) attempts(s *sqlText, tz string) {
	n := len(fq.fn.Steps)
	startMask := bit(0)
	if fq.fn.Order == Unordered {
		startMask = bit(n) - 1
	}
	s.add("arrayFilter(a -> a.1 > 0, arrayMap(i -> arrayMap(d -> ")
	if fq.fn.Order == Unordered {
		fq.unordered(s, tz)
	} else {
		fq.chain(s, tz, 1)
	}
	s.add(", [")
	fq.deadline(s, "T[i]", tz)
	s.add("])[1], arrayFilter(xn -> bitAnd(M[xn], toUInt64(?)) != 0, arrayEnumerate(T))))", startMask)
}

// chain binds j1 (= i) .. jN, the indexes of steps 1..N of the attempt
// starting at i (0 once a step is missed), then yields the attempt.
func (fq *funnelQuery) chain(s *sqlText, tz string, k int) {
	n := len(fq.fn.Steps)
	if k == 1 {
		s.add("arrayMap(j1 -> ")
		fq.chain(s, tz, 2)
		s.add(", [i])[1]")
		return
	}
	if k > n {
		fq.yield(s, tz)
		return
	}
	j, prev := "j"+strconv.Itoa(k), "j"+strconv.Itoa(k-1)
	s.add("arrayMap(" + j + " -> ")
	fq.chain(s, tz, k+1)
	s.add(", [if(" + prev + " = 0, 0, ")
	if fq.fn.Order == Strict {
		s.add("if(bitAnd(M["+prev+" + 1], toUInt64(?)) != 0 AND T["+prev+" + 1] <= d, "+prev+" + 1, 0))])[1]", bit(k-1))
		return
	}
	s.add("arrayFirstIndex((xt, xm, xn) -> xn > "+prev+" AND bitAnd(xm, toUInt64(?)) != 0 AND xt <= d, T, M, arrayEnumerate(T)))])[1]", bit(k-1))
}

// yield is the tuple of an ordered or strict attempt, level 0 when an
// exclusion hits it: an exclusion event strictly between its from-step's
// time and its to-step's (or the from-step's time plus the window when the
// to-step was missed).
func (fq *funnelQuery) yield(s *sqlText, tz string) {
	n := len(fq.fn.Steps)
	s.add("tuple(toUInt32(if(")
	s.add("0")
	for x, ex := range fq.fn.Exclusions {
		jf, jt := "j"+strconv.Itoa(ex.From+1), "j"+strconv.Itoa(ex.To+1)
		s.add(" OR ("+jf+" > 0 AND arrayExists((xt, xm) -> bitAnd(xm, toUInt64(?)) != 0 AND xt > T["+jf+"] AND xt < if("+jt+" > 0, T["+jt+"], ", bit(bitExclusion+x))
		fq.deadline(s, "T["+jf+"]", tz)
		s.add("), T, M))")
	}
	s.add(", 0, ")
	for k := 1; k <= n; k++ {
		if k > 1 {
			s.add(" + ")
		}
		s.add("(j" + strconv.Itoa(k) + " > 0)")
	}
	s.add(")), toUInt32(i), toUInt32(arrayReduce('max', [")
	for k := 1; k <= n; k++ {
		if k > 1 {
			s.add(", ")
		}
		s.add("toUInt64(j" + strconv.Itoa(k) + ")")
	}
	s.add("])))")
}

// unordered yields the attempt starting at i: c holds, per step, the
// first later event of that step within the window (0: none). Its level
// is the number of such steps, plus one when the start event itself
// matches a step none of them covers.
func (fq *funnelQuery) unordered(s *sqlText, tz string) {
	n := len(fq.fn.Steps)
	bits := make([]uint64, n)
	for k := range bits {
		bits[k] = bit(k)
	}
	s.add("arrayMap(c -> arrayMap(lv -> tuple(toUInt32(if(0")
	for x := range fq.fn.Exclusions {
		s.add(" OR arrayExists((xt, xm) -> bitAnd(xm, toUInt64(?)) != 0 AND xt > T[i] AND xt < if(lv = ?, T[toUInt32(arrayReduce('max', c))], d), T, M)", bit(bitExclusion+x), n)
	}
	s.add(", 0, lv)), toUInt32(i), toUInt32(arrayReduce('max', arrayPushBack(c, toUInt64(i))))), ")
	s.add("[toUInt32(arrayCount(x -> x > 0, c) + arrayExists((x, b) -> x = 0 AND bitAnd(M[i], b) != 0, c, ?))])[1], [[")
	s.args = append(s.args, bits)
	for k := 0; k < n; k++ {
		if k > 0 {
			s.add(", ")
		}
		s.add("toUInt64(arrayFirstIndex((xt, xm, xn) -> xn > i AND bitAnd(xm, toUInt64(?)) != 0 AND xt <= d, T, M, arrayEnumerate(T)))", bit(k))
	}
	s.add("]])[1]")
}
