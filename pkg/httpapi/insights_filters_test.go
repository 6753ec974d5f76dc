package httpapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func propText(m map[string]any, k string) (string, bool) {
	v, ok := m[k]
	if !ok {
		return "", false
	}
	if s, ok := v.(string); ok {
		return s, true
	}
	return mustJSON(v), true
}

func personProp(k, want string) match {
	return func(_ wEvent, p *wPerson) bool { v, _ := propText(p.props, k); return v == want }
}

func eventProp(k, want string) match {
	return func(x wEvent, _ *wPerson) bool { v, _ := propText(x.props, k); return v == want }
}

func all(ms ...match) match {
	return func(x wEvent, p *wPerson) bool {
		for _, m := range ms {
			if !m(x, p) {
				return false
			}
		}
		return true
	}
}

func anyOf(ms ...match) match {
	return func(x wEvent, p *wPerson) bool {
		for _, m := range ms {
			if m(x, p) {
				return true
			}
		}
		return false
	}
}

func contains(s, sub string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(sub)) }

// TestActorsFilters compares person filters, event and person filters
// mixed in groups, search, breakdown values, property maths and cohort
// filters with the reference over the generated history.
func TestActorsFilters(t *testing.T) {
	w := newWorld(t)
	from, to := w.day(0), w.day(worldDays)
	rangeQ := func(kv ...string) map[string][]string {
		q := params(append([]string{"entity_id", "$pageview", "date_from", "2026-10-05", "date_to", "2026-11-08"}, kv...)...)
		return q
	}
	pageview := eventNamed("$pageview")
	age := func(p *wPerson) int { n, _ := strconv.Atoi(fmt.Sprint(p.props["age"])); return n }

	// A static cohort (u001 was merged into u000's person) and a dynamic one.
	static := w.createCohortID(t, `{"name":"s","is_static":true,"distinct_ids":["u001","u050","u100"]}`)
	dynamic := w.createCohortID(t, `{"name":"d","filters":{"properties":{"type":"AND","values":[{"key":"plan","value":"pro","type":"person"},{"key":"age","operator":"lt","value":30,"type":"person"}]}}}`)
	inStatic := func(_ wEvent, p *wPerson) bool {
		for _, d := range []string{"u001", "u050", "u100"} {
			if w.live(d) == p {
				return true
			}
		}
		return false
	}
	inDynamic := all(personProp("plan", "pro"), func(_ wEvent, p *wPerson) bool { return age(p) < 30 })

	cases := []struct {
		name, props string
		m           match
	}{
		{"person", `[{"key":"plan","value":"pro","type":"person"}]`, personProp("plan", "pro")},
		{"person not set", `[{"key":"email","operator":"is_not_set","type":"person"}]`,
			func(_ wEvent, p *wPerson) bool { _, ok := p.props["email"]; return !ok }},
		{"mixed or", `{"type":"OR","values":[{"key":"$browser","value":"Safari"},{"key":"plan","value":"team","type":"person"}]}`,
			anyOf(eventProp("$browser", "Safari"), personProp("plan", "team"))},
		{"nested", `{"type":"AND","values":[{"type":"OR","values":[{"key":"$browser","value":["Chrome","Firefox"]},{"key":"$browser","operator":"is_not_set"}]},{"key":"age","operator":"gt","value":40,"type":"person"}]}`,
			all(anyOf(eventProp("$browser", "Chrome"), eventProp("$browser", "Firefox"), func(x wEvent, _ *wPerson) bool { _, ok := x.props["$browser"]; return !ok }),
				func(_ wEvent, p *wPerson) bool { return age(p) > 40 })},
		{"legacy", `{"$browser":"Chrome"}`, eventProp("$browser", "Chrome")},
		{"cohort static", fmt.Sprintf(`[{"type":"cohort","key":"id","value":%d}]`, static), inStatic},
		{"cohort dynamic", fmt.Sprintf(`[{"type":"cohort","key":"id","value":%d}]`, dynamic), inDynamic},
		{"cohort or event", fmt.Sprintf(`{"type":"OR","values":[{"type":"cohort","key":"id","value":"%d"},{"key":"$browser","value":"Safari"}]}`, static),
			anyOf(inStatic, eventProp("$browser", "Safari"))},
		{"cohort negated", fmt.Sprintf(`[{"type":"cohort","key":"id","value":%d,"negation":true}]`, dynamic),
			func(x wEvent, p *wPerson) bool { return !inDynamic(x, p) }},
	}
	for _, c := range cases {
		m := all(pageview, c.m)
		if len(w.refTrends(m, from, to)) == 0 {
			t.Errorf("%s: no persons match in the reference: the case proves nothing", c.name)
		}
		compare(t, "properties "+c.name, w.fetchAll(t, "trends", rangeQ("properties", c.props)), w.refTrends(m, from, to), true)
		// The same filters as the series' own.
		s := fmt.Sprintf(`[{"id":"$pageview","type":"events","order":0,"properties":%s}]`, c.props)
		if !strings.HasPrefix(c.props, "{\"$") {
			compare(t, "entity "+c.name, w.fetchAll(t, "trends", rangeQ("events", s)), w.refTrends(m, from, to), true)
		}
		compare(t, "stickiness "+c.name, w.fetchAll(t, "stickiness", rangeQ("properties", c.props, "stickiness_days", "2")),
			w.refStickiness("day", m, from, to, 2), false)
		for _, typ := range []string{"new", "returning", "resurrecting", "dormant"} {
			q := rangeQ("events", `[{"id":"$pageview","type":"events"}]`, "properties", c.props, "target_date", "2026-10-20", "lifecycle_type", typ)
			compare(t, "lifecycle "+typ+" "+c.name, w.fetchAll(t, "lifecycle", q), w.refLifecycle("day", m, from, to, w.day(15), typ), false)
		}
	}

	// search: person email or name, or the event's distinct id (then only
	// that id's events count).
	for _, s := range []string{"EXAMPLE", "person 1", "known", "u00", "nobody"} {
		m := all(pageview, func(x wEvent, p *wPerson) bool {
			e, _ := p.props["email"].(string)
			n, _ := p.props["name"].(string)
			return contains(e, s) || contains(n, s) || contains(x.did, s)
		})
		compare(t, "search "+s, w.fetchAll(t, "trends", rangeQ("search", s)), w.refTrends(m, from, to), true)
	}

	// breakdown values, event (default) and person; "" is "none".
	bd := []struct {
		typ, key, value string
		m               match
	}{
		{"", "$browser", "Chrome", eventProp("$browser", "Chrome")},
		{"event", "$browser", "", func(x wEvent, _ *wPerson) bool { _, ok := x.props["$browser"]; return !ok }},
		{"person", "plan", "team", personProp("plan", "team")},
		{"person", "email", "", func(_ wEvent, p *wPerson) bool { _, ok := p.props["email"]; return !ok }},
	}
	for _, b := range bd {
		q := rangeQ("breakdown", b.key, "breakdown_value", b.value)
		if b.typ != "" {
			q["breakdown_type"] = []string{b.typ}
		}
		compare(t, "breakdown "+b.key+"="+b.value, w.fetchAll(t, "trends", q), w.refTrends(all(pageview, b.m), from, to), true)
	}

	// property maths over purchase amounts (numbers, numeric text, absent).
	for _, math := range []string{"sum", "avg", "min", "max", "median", "p90"} {
		s := fmt.Sprintf(`[{"id":"purchase","type":"events","order":0,"math":%q,"math_property":"amount"}]`, math)
		q := rangeQ("events", s, "entity_id", "purchase", "entity_math", math)
		want := map[*wPerson]float64{}
		for p, xs := range w.per(eventNamed("purchase"), from, to) {
			var vs []float64
			for _, x := range xs {
				if txt, ok := propText(x.props, "amount"); ok {
					if v, err := strconv.ParseFloat(txt, 64); err == nil {
						vs = append(vs, v)
					}
				}
			}
			want[p] = aggregate(math, vs)
		}
		compare(t, "math "+math, w.fetchAll(t, "trends", q), want, true)
	}

	// An unknown cohort is a 400 of the parameter naming it.
	for q, attr := range map[string]string{
		`properties=[{"type":"cohort","key":"id","value":99999}]`:                               "properties",
		`events=[{"id":"$pageview","properties":[{"type":"cohort","key":"id","value":99999}]}]`: "events",
		`properties=[{"type":"cohort","key":"id","value":"x"}]`:                                 "properties",
	} {
		r := w.e.get(w.e.keyAll, fmt.Sprintf("/api/projects/%d/persons/trends/?entity_id=$pageview&%s", w.e.projectA.ID, strings.ReplaceAll(q, `"`, "%22")))
		if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != attr {
			t.Errorf("%s: attr %v, want %s", q, m["attr"], attr)
		}
	}
}

// aggregate is ClickHouse's aggregate of the values: quantileExact(l)
// takes the element at index floor(l*n) of the sorted values; no values
// is 0.
func aggregate(math string, vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sort.Float64s(vs)
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	q := func(l float64) float64 { return vs[min(int(l*float64(len(vs))), len(vs)-1)] }
	switch math {
	case "sum":
		return sum
	case "avg":
		return sum / float64(len(vs))
	case "min":
		return vs[0]
	case "max":
		return vs[len(vs)-1]
	case "median":
		return q(0.5)
	}
	return q(0.9)
}

// createCohortID creates a cohort through the API and returns its id.
func (w *aWorld) createCohortID(t *testing.T, body string) uint64 {
	t.Helper()
	r := w.e.send("POST", w.e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", w.e.projectA.ID), body)
	if r.status != 201 {
		t.Fatalf("create cohort: %d %s", r.status, r.body)
	}
	return uint64(r.json(t)["id"].(float64))
}
