package insight

import (
	"context"
	"math"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// The ordered funnel's fast path: windowFunnel, exact.
//
// The array computation (funnel_sql.go) sorts and scans an array per
// person; windowFunnel grouped per person costs about a third of it
// (docs/performance.md). windowFunnel is not used as it is because 18.16
// orders the events of one second by their arrival, where our order puts
// earlier steps first (docs/analysis.md). It is made exact by giving it a
// timestamp that carries that order:
//
//	t' = (t - from) * n + r
//
// where n is the number of steps, from the range's start and r the
// 0-based step the event matches (< n). Sorting by t' is sorting by (t, r),
// our order; two events with the same t' are of the same step in the same
// second, so the order windowFunnel gives them cannot change its answer
// (nor can a redelivered copy of an event: it adds a pair equal to its
// original's, so the fast path needs no deduplication). A step-1 event has
// r = 0, so with the window
//
//	w' = w * n + n - 1
//
// a later event at t2 (rank r2 < n) of a start at t1 is within w' exactly
// when t2 <= t1 + w: (t2 - t1 - w) * n <= n - 1 - r2 holds for
// t2 - t1 - w <= 0 and fails for >= 1. windowFunnel's own algorithm (the
// latest start reaching each step) gives the best attempt's level, the
// same level as the greedy attempts of the array method.
//
// It applies when every event matches at most one step (an event of two
// steps cannot serve as both, and which of two such events of one second
// comes first would matter): the steps' event names are known and
// disjoint. And only where nothing but the level is needed: ordered, no
// exclusion, breakdown bucket, trends view or correlation; a window of
// seconds (not calendar months); a bounded range whose t' + w' fits the
// Int32 18.16's windowFunnel keeps starts in.

// fastLevel says whether the person's level can come from windowFunnel.
// disjoint: no event can match two steps (disjointSteps).
func (fq *funnelQuery) fastLevel() bool {
	fn, s := fq.fn, fq.scan
	if !fq.disjoint || fn.Order != Ordered || len(fn.Exclusions) > 0 || fn.Trends != nil ||
		fn.BreakdownValue != nil || len(fn.Breakdown) > 0 || fq.corr != nil || fn.Window.Months > 0 || s.from.IsZero() {
		return false
	}
	n := int64(len(fn.Steps))
	span := eventstore.EpochSeconds(s.to) - eventstore.EpochSeconds(s.from)
	return span > 0 && (span+fn.Window.Seconds+2)*n < math.MaxInt32
}

// disjointSteps says whether no event can match two of the steps: each
// step names its events (an event, or an action whose steps all name
// one) and no name is in two steps.
func (st *Store) disjointSteps(ctx context.Context, project uint64, steps []Entity) bool {
	seen := map[string]int{}
	for i, e := range steps {
		names := st.seriesNames(ctx, project, e)
		if names == nil {
			return false
		}
		for _, name := range names {
			if j, ok := seen[name]; ok && j != i {
				return false
			}
			seen[name] = i
		}
	}
	return true
}

// fastPersons selects pid and plevel (the person's level) with
// windowFunnel over the ranked timestamps t'.
func (fq *funnelQuery) fastPersons() (string, []any) {
	var s sqlText
	n := int64(len(fq.fn.Steps))
	base, args := fq.scan.sql()
	s.add("SELECT pid, windowFunnel(?)(toUInt32((toUInt32(timestamp) - ?) * ? + ord)", fq.fn.Window.Seconds*n+n-1, eventstore.EpochSeconds(fq.scan.from), n)
	for i := range fq.fn.Steps {
		s.add(", bitAnd(mask, toUInt64(?)) != 0", bit(i))
	}
	s.add(") AS plevel FROM (")
	s.add(base, args...)
	s.add(") GROUP BY pid")
	return s.b.String(), s.args
}
