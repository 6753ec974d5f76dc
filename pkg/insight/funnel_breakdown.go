package insight

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// Breakdown attributions of a funnel (reference §6): which breakdown
// value places a person in a bucket.
const (
	// FirstTouch: the value of the person's first step event having one.
	FirstTouch = "first_touch"
	// LastTouch: the value of the last such event.
	LastTouch = "last_touch"
	// AllEvents: every value is a bucket of its own, whose funnel uses only
	// the events carrying that value (an attempt keeps one value).
	AllEvents = "all_events"
	// StepTouch: the value on the event of one step (AttributionStep); a
	// person is in the bucket of each value their events of that step
	// carry, and there the step counts only events with that value.
	StepTouch = "step"
)

// parseBreakdown reads breakdown (one property name, or a JSON array of
// names; for breakdown_type=cohort a JSON array of cohort ids),
// breakdown_attribution_type (+ breakdown_attribution_value) and
// funnel_step_breakdown (JSON when it decodes, else the text itself).
// Without funnel_step_breakdown the breakdown does not restrict anyone.
func (fn *Funnel) parseBreakdown(q url.Values, f *Filter) error {
	raw, ok := q["funnel_step_breakdown"]
	if !ok || f.Breakdown == "" {
		return nil
	}
	switch f.BreakdownType {
	case "event", "person":
		fn.BreakdownType = f.BreakdownType
	case "cohort":
		return fn.parseCohortBreakdown(f.Breakdown, raw[0])
	default:
		return invalidf("breakdown_type", "breakdown_type %q is not supported in funnels (event, person or cohort).", f.BreakdownType)
	}
	if err := fn.parseAttribution(q); err != nil {
		return err
	}
	fn.Breakdown = []string{f.Breakdown}
	if strings.HasPrefix(strings.TrimSpace(f.Breakdown), "[") {
		if err := json.Unmarshal([]byte(f.Breakdown), &fn.Breakdown); err != nil || len(fn.Breakdown) == 0 {
			return invalidf("breakdown", "breakdown must be a property name or a JSON array of names.")
		}
	}
	fn.BreakdownValue = valuesOf(raw[0])
	if len(fn.BreakdownValue) != len(fn.Breakdown) {
		return invalidf("funnel_step_breakdown", "funnel_step_breakdown needs one value per breakdown property (%d).", len(fn.Breakdown))
	}
	return nil
}

// parseAttribution reads breakdown_attribution_type and, for step, the
// 0-based step breakdown_attribution_value (default 0).
func (fn *Funnel) parseAttribution(q url.Values) error {
	fn.Attribution = FirstTouch
	switch t := q.Get("breakdown_attribution_type"); t {
	case "", FirstTouch:
	case LastTouch, AllEvents:
		fn.Attribution = t
	case StepTouch:
		fn.Attribution = t
		if v := q.Get("breakdown_attribution_value"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n >= len(fn.Steps) {
				return invalidf("breakdown_attribution_value", "breakdown_attribution_value must be a step from 0 to %d.", len(fn.Steps)-1)
			}
			fn.AttributionStep = n
		}
	default:
		return invalidf("breakdown_attribution_type", "breakdown_attribution_type must be first_touch, last_touch, all_events or step, not %q.", t)
	}
	return nil
}

// allUsers is the cohort id of "all users" in a cohort breakdown.
const allUsers = "all"

// parseCohortBreakdown reads a cohort breakdown: breakdown a JSON array of
// cohort ids ("all" for every person), funnel_step_breakdown the id of one
// of them (0 or "all": every person). The bucket's persons are the members
// of that cohort; membership is a property of the person, so it does not
// change their level.
func (fn *Funnel) parseCohortBreakdown(breakdown, step string) error {
	var list []any
	if err := json.Unmarshal([]byte(breakdown), &list); err != nil {
		var one any
		if json.Unmarshal([]byte(breakdown), &one) != nil {
			one = breakdown
		}
		list = []any{one}
	}
	ids := map[uint64]bool{}
	for _, x := range list {
		id, ok := cohortID(x)
		if !ok {
			return invalidf("breakdown", "A cohort breakdown is a JSON array of cohort ids (or \"all\").")
		}
		ids[id] = true
	}
	var v any
	if err := json.Unmarshal([]byte(step), &v); err != nil {
		v = step
	}
	id, ok := cohortID(v)
	if !ok || !ids[id] {
		return invalidf("funnel_step_breakdown", "funnel_step_breakdown must be one of the cohort ids of breakdown.")
	}
	fn.BreakdownType = "cohort"
	fn.Cohort = &id
	return nil
}

// cohortID reads a cohort id of a cohort breakdown: a positive integer (or
// its text), or "all" / 0 for every person (0).
func cohortID(v any) (uint64, bool) {
	s := valueText(v)
	if s == allUsers {
		return 0, true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// valuesOf reads a bucket's values: a JSON array, or one value (JSON when
// it decodes, else the text itself).
func valuesOf(raw string) []string {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		v = raw
	}
	list, isList := v.([]any)
	if !isList {
		list = []any{v}
	}
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = valueText(x)
	}
	return out
}

// valueText renders a breakdown value as the event arrays hold values:
// strings as they are, anything else as its JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// breakdownSQL is the array of an event's breakdown values (e_values for
// event properties, the person's current properties for person ones); it
// registers the keys with the scan's filters.
func breakdownSQL(s *scan, keys []string, person []bool) cond {
	var b strings.Builder
	var args []any
	b.WriteString("[")
	for i, key := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if person[i] {
			s.f.person = true
			b.WriteString("property_values[indexOf(property_keys, ?)]")
		} else {
			s.f.eventKeys[key] = struct{}{}
			b.WriteString("e_values[indexOf(e_keys, ?)]")
		}
		args = append(args, key)
	}
	b.WriteString("]")
	if len(keys) == 0 {
		return cond{"emptyArrayString()", nil}
	}
	return cond{b.String(), args}
}

// bucketOf is the condition "the event is in the requested bucket", for
// the attributions that decide per event (all_events, step); empty
// otherwise.
func (fn *Funnel) bucketOf(bd cond) cond {
	if fn.BreakdownValue == nil || (fn.Attribution != AllEvents && fn.Attribution != StepTouch) {
		return cond{}
	}
	return cond{"(" + bd.sql + ") = ?", append(append([]any{}, bd.args...), fn.BreakdownValue)}
}
