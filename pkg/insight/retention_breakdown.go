package insight

import (
	"context"
	"net/url"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// retentionBreakdown is a retention cohort chosen by breakdown instead of
// by interval (reference §5): breakdowns names the properties (event or
// person), breakdown_values the bucket, one value per property.
type retentionBreakdown struct {
	keys   []string
	person []bool
	values []string
}

// parseRetentionBreakdown reads breakdowns (a JSON array of
// {"property", "type"} objects or property names; a type missing from an
// object is breakdown_type's, default event) and breakdown_values (a JSON
// array of values, or a single value's text). Neither given: nil.
func parseRetentionBreakdown(q url.Values) (*retentionBreakdown, error) {
	_, hasB := q["breakdowns"]
	_, hasV := q["breakdown_values"]
	if !hasB && !hasV {
		return nil, nil
	}
	v, err := decodeJSON("breakdowns", q.Get("breakdowns"))
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, invalidf("breakdowns", "breakdowns must be a JSON array of {\"property\", \"type\"} objects (event or person properties).")
	}
	def := q.Get("breakdown_type")
	if def == "" {
		def = "event"
	}
	b := &retentionBreakdown{}
	for _, it := range list {
		key, typ := "", def
		switch x := it.(type) {
		case string:
			key = x
		case map[string]any:
			if p, ok := x["property"]; ok && p != nil {
				key = valueText(p)
			}
			if t, ok := x["type"].(string); ok && t != "" {
				typ = t
			}
		}
		if key == "" || (typ != "event" && typ != "person") {
			return nil, invalidf("breakdowns", "Each breakdown names an event or person property: {\"property\": \"name\", \"type\": \"event\"|\"person\"}.")
		}
		b.keys = append(b.keys, key)
		b.person = append(b.person, typ == "person")
	}
	if !hasV {
		return nil, invalidf("breakdown_values", "breakdown_values is required with breakdowns: the bucket whose persons are wanted.")
	}
	b.values = valuesOf(q.Get("breakdown_values"))
	if len(b.values) != len(b.keys) {
		return nil, invalidf("breakdown_values", "breakdown_values needs one value per breakdown (%d).", len(b.keys))
	}
	return b, nil
}

// retentionByBreakdown answers a breakdown cohort. The cohort is the
// persons whose target event carries the bucket's values: recurring, any
// target event in the range; first time, the first target event ever,
// which must be in the range. Intervals are relative, as in PostHog's
// breakdown table: the person appears at j > 0 when a returning event
// falls j intervals after one of those target events (both in range).
// selected_interval k picks the cell: persons appearing at k (0: all of
// the bucket; PostHog lists the whole bucket for every cell, a count its
// table does not show). appearances has total_intervals − k positions,
// position i for relative interval k + i, position 0 always 1. Order:
// number of appearances descending, then person id.
func (st *Store) retentionByBreakdown(ctx context.Context, s scan, r *retention, page Page) ([]Actor, error) {
	b := r.breakdown
	bd := breakdownSQL(&s, b.keys, b.person)
	s.extra = append(s.extra, cond{bd.sql + " AS bd", bd.args})
	base, args := s.sql()
	var q sqlText
	q.add("SELECT pid, rel FROM (SELECT pid, arrayMap((tt, rr) -> arrayFilter(j -> j > 0 AND arrayExists(t -> has(rr, t + toInt64(j)), tt), range(toUInt64(?))), [T], [R])[1] AS rel FROM (SELECT pid, ", r.total)
	if r.firstTime {
		// The first target event, ties broken by uuid so the bucket is
		// deterministic; argMinIf of no rows is a default, hence countIf.
		q.add("if(countIf(is_target = 1) > 0 AND argMinIf(bd, (timestamp, toString(uuid)), is_target = 1) = ? AND argMinIf(idx, (timestamp, toString(uuid)), is_target = 1) >= 0, "+
			"[argMinIf(idx, (timestamp, toString(uuid)), is_target = 1)], emptyArrayInt64()) AS T", b.values)
	} else {
		q.add("groupUniqArrayIf(idx, is_target = 1 AND idx >= 0 AND bd = ?) AS T", b.values)
	}
	q.add(", groupUniqArrayIf(idx, is_return = 1 AND idx >= 0) AS R FROM (")
	q.add(base, args...)
	q.add(") GROUP BY pid HAVING length(T) > 0))")
	if r.selected > 0 {
		q.add(" WHERE has(rel, ?)", r.selected)
	}
	lim, largs := page.sql()
	q.add(" ORDER BY arrayCount(j -> j > ?, rel) DESC, pid ASC"+lim, append([]any{r.selected}, largs...)...)
	return st.scanActors(ctx, q.b.String(), q.args, func(rows driver.Rows, a *Actor) error {
		var rel []uint64
		if err := rows.Scan(&a.PersonID, &rel); err != nil {
			return err
		}
		a.Appearances = make([]int, r.total-r.selected)
		a.Appearances[0] = 1
		for _, j := range rel {
			if int(j) > r.selected {
				a.Appearances[int(j)-r.selected] = 1
			}
		}
		return nil
	})
}
