package insight

import (
	"context"
	"net/url"
)

// Funnel answers GET|POST /persons/funnel/: the persons whose reached-step
// count is among those funnel_step (or funnel_custom_steps) selects, in the
// breakdown bucket funnel_step_breakdown names, by person id (reference
// §6, §14.1).
func (st *Store) Funnel(ctx context.Context, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
	fn, err := ParseFunnel(q, f, true)
	if err != nil {
		return nil, err
	}
	fq, err := st.funnelScan(ctx, project, f, fn, nil)
	if err != nil {
		return nil, err
	}
	return st.funnelActors(ctx, f, fq, page, nil)
}

// funnelActors selects, by person id, the page of the persons whose level
// the funnel selects, in its breakdown bucket, and holding more (extra
// conditions over pid, level and hit).
func (st *Store) funnelActors(ctx context.Context, f *Filter, fq *funnelQuery, page Page, more func(*sqlText)) ([]Actor, error) {
	var s sqlText
	persons, args := fq.persons(f.Loc.String())
	s.add("SELECT pid FROM ("+persons+") WHERE has(?, plevel)", append(args, fq.fn.levels())...)
	if fq.fn.BreakdownValue != nil {
		s.add(" AND bucket = ?", fq.fn.BreakdownValue)
	}
	if more != nil {
		more(&s)
	}
	full := func() ([]Actor, error) {
		lim, largs := page.sql()
		s.add(" ORDER BY pid"+lim, largs...)
		return st.actors(ctx, s.b.String(), s.args, false)
	}
	if more != nil || !fq.fastLevel() {
		return full()
	}
	// The fast path's level needs a person's rows alone: a page from
	// the persons up to an id (prefix.go).
	return st.prefixPage(ctx, fq.scan.project, page, func(upTo uint64) (string, []any) {
		cut := *fq
		cut.scan.upTo = upTo
		persons, args := cut.fastPersons()
		return "SELECT pid, toUInt8(has(?, plevel)) AS ok FROM (" + persons + ")", append([]any{fq.fn.levels()}, args...)
	}, full)
}

func (fn *Funnel) levels() []uint32 {
	out := make([]uint32, len(fn.Select))
	for i, l := range fn.Select {
		out[i] = uint32(l)
	}
	return out
}
