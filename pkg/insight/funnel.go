package insight

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strconv"
	"time"
)

// Funnel limits: step and exclusion flags share one UInt64 bit mask per
// event (funnel_sql.go).
const (
	maxFunnelSteps = 20
	maxExclusions  = 20
)

// Funnel order types.
const (
	Ordered   = "ordered"
	Strict    = "strict"
	Unordered = "unordered"
)

// Funnel is the parsed funnel part of a request (reference §6).
type Funnel struct {
	Steps      []Entity
	Order      string
	Window     Window
	Exclusions []Exclusion
	// Select says which reached-step counts are wanted (levels 1..N).
	Select []int
	// Trends: the levels are those of the attempts of one entrance period.
	Trends *FunnelTrends
	// Breakdown: the person's bucket must equal BreakdownValue, one value
	// per breakdown property; Attribution says how the bucket is chosen
	// (funnel_breakdown.go). A cohort breakdown keeps the members of
	// Cohort instead.
	Breakdown       []string
	BreakdownType   string
	Attribution     string
	AttributionStep int
	BreakdownValue  []string
	Cohort          *uint64
}

// Window is the conversion window: Seconds, or Months (calendar months in
// the project's zone).
type Window struct {
	Seconds int64
	Months  int
}

// Exclusion is an event that discards an attempt when it happens between
// two steps (0-based, From < To).
type Exclusion struct {
	Entity   Entity
	From, To int
}

// ParseFunnel reads the funnel parameters over a filter ParseFilter read.
// stepRequired: funnel_step (or funnel_custom_steps) must be given; the
// correlation route takes the population of all entrants without it.
func ParseFunnel(q url.Values, f *Filter, stepRequired bool) (*Funnel, error) {
	fn := &Funnel{Steps: f.Series, Order: Ordered}
	if len(fn.Steps) < 2 {
		attr := "events"
		if q.Get("events") == "" && q.Get("actions") != "" {
			attr = "actions"
		}
		return nil, invalidf(attr, "A funnel needs at least two steps in events or actions (%d given).", len(fn.Steps))
	}
	if len(fn.Steps) > maxFunnelSteps {
		return nil, invalidf("events", "A funnel has at most %d steps.", maxFunnelSteps)
	}
	if err := fn.parseViz(q, f); err != nil {
		return nil, err
	}
	if t := q.Get("funnel_order_type"); t != "" {
		if t != Ordered && t != Strict && t != Unordered {
			return nil, invalidf("funnel_order_type", "funnel_order_type must be ordered, strict or unordered, not %q.", t)
		}
		fn.Order = t
	}
	var err error
	if fn.Window, err = parseWindow(q); err != nil {
		return nil, err
	}
	if fn.Trends == nil {
		if err := fn.parseSelect(q, stepRequired); err != nil {
			return nil, err
		}
	}
	if err := fn.parseExclusions(q.Get("exclusions")); err != nil {
		return nil, err
	}
	return fn, fn.parseBreakdown(q, f)
}

// parseViz reads funnel_viz_type: steps (default), or trends, whose
// persons are those of one entrance period (FunnelTrends). time_to_convert
// is served as steps, as PostHog does (its persons class follows the order
// type unless the view is trends); PostHog has no parameter naming a bin
// of conversion times for persons, so neither do we.
func (fn *Funnel) parseViz(q url.Values, f *Filter) error {
	viz := q.Get("funnel_viz_type")
	if viz == "" && q.Get("display") == "ActionsLineGraph" {
		viz = "trends"
	}
	switch viz {
	case "", "steps", "time_to_convert":
		return nil
	case "trends":
		return fn.parseTrends(q, f)
	}
	return invalidf("funnel_viz_type", "funnel_viz_type must be steps, trends or time_to_convert, not %q.", viz)
}

// FunnelTrends selects the attempts that started in the interval at
// Start: a person's level is the best of those attempts.
type FunnelTrends struct {
	Start    time.Time
	Interval Interval
}

// parseTrends reads entrance_period_start and drop_off (both required)
// and funnel_from_step/funnel_to_step (0-based, default 0 and last):
// drop_off=false selects the persons who reached to_step, true those who
// reached from_step but not to_step.
func (fn *Funnel) parseTrends(q url.Values, f *Filter) error {
	n := len(fn.Steps)
	raw := q.Get("entrance_period_start")
	if raw == "" {
		return invalidf("entrance_period_start", "Filter parameter entrance_period_start must be provided and a datetime for funnel trends persons!")
	}
	start, err := parseDate("entrance_period_start", raw, time.Now(), f.Loc)
	if err != nil {
		return err
	}
	if q.Get("drop_off") == "" {
		return invalidf("drop_off", "Filter parameter drop_off must be provided and a bool for funnel trends persons!")
	}
	dropOff, err := parseBool("drop_off", q.Get("drop_off"))
	if err != nil {
		return err
	}
	from, to := 0, n-1
	if v := q.Get("funnel_from_step"); v != "" {
		if from, err = strconv.Atoi(v); err != nil || from < 0 || from >= n-1 {
			return invalidf("funnel_from_step", "funnel_from_step must be a step from 0 to %d.", n-2)
		}
	}
	if v := q.Get("funnel_to_step"); v != "" {
		if to, err = strconv.Atoi(v); err != nil || to <= from || to > n-1 {
			return invalidf("funnel_to_step", "funnel_to_step must be a step after funnel_from_step, up to %d.", n-1)
		}
	}
	fn.Trends = &FunnelTrends{Start: f.Interval.Trunc(start, f.Loc), Interval: f.Interval}
	lo, hi := to+1, n
	if dropOff {
		lo, hi = from+1, to
	}
	for l := lo; l <= hi; l++ {
		fn.Select = append(fn.Select, l)
	}
	return nil
}

func parseWindow(q url.Values) (Window, error) {
	if v := q.Get("funnel_window_days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 36500 {
			return Window{}, invalidf("funnel_window_days", "funnel_window_days must be an integer from 1 to 36500.")
		}
		return Window{Seconds: int64(n) * 86400}, nil
	}
	n := 14
	if v := q.Get("funnel_window_interval"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1_000_000 {
			return Window{}, invalidf("funnel_window_interval", "funnel_window_interval must be a positive integer.")
		}
	}
	unit := map[string]int64{"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
	u := q.Get("funnel_window_interval_unit")
	switch {
	case u == "":
		return Window{Seconds: int64(n) * 86400}, nil
	case u == "month":
		if n > 1200 {
			return Window{}, invalidf("funnel_window_interval", "A window of months is at most 1200 months.")
		}
		return Window{Months: n}, nil
	case unit[u] > 0:
		if int64(n)*unit[u] > 100*366*86400 {
			return Window{}, invalidf("funnel_window_interval", "The conversion window is at most 100 years.")
		}
		return Window{Seconds: int64(n) * unit[u]}, nil
	}
	return Window{}, invalidf("funnel_window_interval_unit", "funnel_window_interval_unit must be second, minute, hour, day, week or month, not %q.", u)
}

// parseSelect reads funnel_custom_steps, else funnel_step: N > 0 wants
// the persons who reached step N or further, -N (N >= 2) those who
// reached step N-1 and stopped there.
func (fn *Funnel) parseSelect(q url.Values, required bool) error {
	n := len(fn.Steps)
	if raw := q.Get("funnel_custom_steps"); raw != "" {
		var steps []int
		if err := json.Unmarshal([]byte(raw), &steps); err != nil || len(steps) == 0 {
			return invalidf("funnel_custom_steps", "funnel_custom_steps must be a JSON array of step numbers (1 to %d).", n)
		}
		for _, s := range steps {
			if s < 1 || s > n {
				return invalidf("funnel_custom_steps", "funnel_custom_steps must be a JSON array of step numbers (1 to %d).", n)
			}
			fn.Select = append(fn.Select, s)
		}
		return nil
	}
	raw := q.Get("funnel_step")
	if raw == "" {
		if required {
			return invalidf("funnel_step", "funnel_step is required: 1 to %d for the persons who reached that step, -2 to -%d for those who dropped off before it.", n, n)
		}
		for s := 1; s <= n; s++ {
			fn.Select = append(fn.Select, s)
		}
		return nil
	}
	s, err := strconv.Atoi(raw)
	switch {
	case err != nil || s == 0 || s == -1 || s > n || s < -n:
		return invalidf("funnel_step", "funnel_step must be 1 to %d (reached the step) or -2 to -%d (dropped off before the step), not %q.", n, n, raw)
	case s > 0:
		for l := s; l <= n; l++ {
			fn.Select = append(fn.Select, l)
		}
	default:
		fn.Select = []int{-s - 1}
	}
	return nil
}

func (fn *Funnel) parseExclusions(raw string) error {
	v, err := decodeJSON("exclusions", raw)
	if err != nil || v == nil {
		return err
	}
	list, ok := v.([]any)
	if !ok {
		return invalidf("exclusions", "exclusions must be a JSON array of entities.")
	}
	if len(list) > maxExclusions {
		return invalidf("exclusions", "A funnel has at most %d exclusions.", maxExclusions)
	}
	last := len(fn.Steps) - 1
	for _, it := range list {
		obj, ok := it.(map[string]any)
		if !ok {
			return invalidf("exclusions", "Each exclusion must be a JSON object.")
		}
		typ, _ := obj["type"].(string)
		if typ != "actions" {
			typ = "events"
		}
		e, err := entityOf(typ, obj)
		if err != nil {
			return invalidf("exclusions", "%s", err.(*Error).Detail)
		}
		from, okF := intOf(obj["funnel_from_step"])
		to, okT := intOf(obj["funnel_to_step"])
		switch {
		case !okF || !okT:
			return invalidf("exclusions", "Exclusion event needs to define funnel steps.")
		case from < 0 || from >= to || from >= last || to > last:
			return invalidf("exclusions", "Exclusion event range is invalid: funnel_from_step must be before funnel_to_step, both within 0 to %d.", last)
		case fn.Order == Unordered && (from != 0 || to != last):
			return invalidf("exclusions", "Partial Exclusions not allowed in unordered funnels.")
		}
		for s := from; s <= to; s++ {
			if sameOrWider(e, fn.Steps[s]) {
				return invalidf("exclusions", "Exclusion steps cannot contain an event that's part of funnel steps.")
			}
		}
		fn.Exclusions = append(fn.Exclusions, Exclusion{Entity: e, From: from, To: to})
	}
	return nil
}

// sameOrWider: the exclusion matches every event the step does (same
// event or action, and no filters of its own beyond the step's).
func sameOrWider(x, step Entity) bool {
	if x.Type != step.Type || x.ActionID != step.ActionID || (x.ID == nil) != (step.ID == nil) || (x.ID != nil && *x.ID != *step.ID) {
		return x.Type == "events" && x.ID == nil && x.Properties == nil
	}
	return x.Properties == nil || reflect.DeepEqual(x.Properties, step.Properties)
}

func intOf(v any) (int, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.Atoi(n.String())
		return i, err == nil
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil
	}
	return 0, false
}
