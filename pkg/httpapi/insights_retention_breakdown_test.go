package httpapi

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"
)

// rEvent is a generated retention event with its $browser ("": none).
type rEvent struct {
	ev
	browser string
}

// refRetentionBreakdown computes a breakdown cohort directly (reference
// §5 and docs/analysis.md): bucket(e) is the event's bucket key; the
// person's target intervals are those of their target events in the
// bucket (first time: only their first target event ever, when in range
// and in the bucket); they appear at j > 0 when a returning event is j
// intervals after one of them; selected interval k keeps those appearing
// at k (0: all), positions k, k+1, ...
func refRetentionBreakdown(evs []rEvent, owner map[string]string, deleted string, starts []time.Time, sel int, firstTime bool, bucket func(rEvent) bool) []retained {
	interval := func(at time.Time) int {
		for i := 0; i+1 < len(starts); i++ {
			if !at.Before(starts[i]) && at.Before(starts[i+1]) {
				return i
			}
		}
		return -1
	}
	targets, returns := map[string]map[int]bool{}, map[string]map[int]bool{}
	first := map[string]rEvent{}
	set := func(m map[string]map[int]bool, who string, i int) {
		if m[who] == nil {
			m[who] = map[int]bool{}
		}
		m[who][i] = true
	}
	for _, x := range evs {
		who := owner[x.distinctID]
		if who == deleted {
			continue
		}
		i := interval(x.at)
		switch {
		case x.name == "signup":
			if f, ok := first[who]; !ok || x.at.Before(f.at) {
				first[who] = x
			}
			if !firstTime && i >= 0 && bucket(x) {
				set(targets, who, i)
			}
		case x.name == "use" && i >= 0:
			set(returns, who, i)
		}
	}
	if firstTime {
		for who, x := range first {
			if i := interval(x.at); i >= 0 && bucket(x) {
				set(targets, who, i)
			}
		}
	}
	total := len(starts) - 1
	var out []retained
	for who, ts := range targets {
		rel := map[int]bool{}
		for t := range ts {
			for r := range returns[who] {
				if r > t {
					rel[r-t] = true
				}
			}
		}
		if sel > 0 && !rel[sel] {
			continue
		}
		app := make([]int, total-sel)
		app[0] = 1
		for j := range rel {
			if j > sel {
				app[j-sel] = 1
			}
		}
		out = append(out, retained{who, app})
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := ones(out[i].app), ones(out[j].app); a != b {
			return a > b
		}
		return out[i].id < out[j].id
	})
	return out
}

// Retention breakdowns over a generated history in Europe/Berlin: event
// ($browser), person (plan) and mixed breakdowns, recurring and first
// time, every bucket and selected interval, against the reference; a
// merged person is one person, a deleted one absent.
func TestActorsRetentionBreakdown(t *testing.T) {
	e := newEnv(t)
	berlin := e.zone("Europe/Berlin")
	rng := rand.New(rand.NewSource(5))
	start := time.Date(2021, 3, 1, 0, 0, 0, 0, berlin)
	var evs []rEvent
	owner := map[string]string{}
	plan := map[string]string{}
	for i := range 30 {
		id := fmt.Sprintf("b%02d", i)
		owner[id] = id
		used := map[int]bool{}
		for n := range 2 + rng.Intn(9) {
			x := rEvent{ev: ev{name: []string{"signup", "use", "use"}[rng.Intn(3)], distinctID: id,
				at: start.Add(time.Duration(uniqueSecond(rng, used, 100*86400)) * time.Second)}}
			if x.browser = []string{"Chrome", "Safari", ""}[rng.Intn(3)]; x.browser != "" {
				x.props = map[string]any{"$browser": x.browser}
			}
			if n == 0 && id != "b02" {
				plan[id] = []string{"pro", "free"}[rng.Intn(2)]
				x.extra = fmt.Sprintf(`"$set":{"plan":%q}`, plan[id])
			}
			evs = append(evs, x)
		}
	}
	// b01 takes over b02 mid-window: b02's events count for b01.
	evs = append(evs, rEvent{ev: ev{name: "$identify", distinctID: "b01", at: start.AddDate(0, 0, 50), props: map[string]any{"$anon_distinct_id": "b02"}}})
	owner["b02"] = "b01"
	plain := make([]ev, len(evs))
	for i, x := range evs {
		plain[i] = x.ev
	}
	e.publishEvents(e.projectA.ID, plain...)
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=b03", e.projectA.ID)).json(t)["results"].([]any)
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, list[0].(map[string]any)["id"])); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}

	const total = 10
	starts := refStarts("Week", time.Date(2021, 5, 5, 12, 0, 0, 0, berlin), total, berlin)
	for _, c := range []struct {
		breakdowns, values string
		bucket             func(rEvent) bool
	}{
		{`[{"property":"$browser","type":"event"}]`, `["Chrome"]`, func(x rEvent) bool { return x.browser == "Chrome" }},
		{`["$browser"]`, `Safari`, func(x rEvent) bool { return x.browser == "Safari" }},
		{`[{"property":"$browser"}]`, `[""]`, func(x rEvent) bool { return x.browser == "" }},
		{`[{"property":"plan","type":"person"}]`, `["pro"]`, func(x rEvent) bool { return plan[owner[x.distinctID]] == "pro" }},
		{`[{"property":"$browser","type":"event"},{"property":"plan","type":"person"}]`, `["Chrome","free"]`,
			func(x rEvent) bool { return x.browser == "Chrome" && plan[owner[x.distinctID]] == "free" }},
	} {
		for _, typ := range []string{"retention_recurring", "retention_first_time"} {
			for sel := range total {
				p := params("period", "Week", "total_intervals", fmt.Sprint(total), "date_to", "2021-05-05T12:00:00", "selected_interval", fmt.Sprint(sel),
					"retention_type", typ, "target_entity", `{"id":"signup","type":"events"}`, "returning_entity", `{"id":"use","type":"events"}`,
					"breakdowns", c.breakdowns, "breakdown_values", c.values, "limit", "4")
				got := e.retentionAll(p)
				want := refRetentionBreakdown(evs, owner, "b03", starts, sel, typ == "retention_first_time", c.bucket)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s %s %s interval %d:\n got %v\nwant %v", c.breakdowns, c.values, typ, sel, got, want)
				}
			}
		}
	}

	base := fmt.Sprintf("/api/projects/%d/persons/retention/", e.projectA.ID)
	e.wantAttrs(base, map[string]string{
		`?breakdown_values=["a"]`:  "breakdowns",
		`?breakdowns=["$browser"]`: "breakdown_values",
		`?breakdowns=[{"property":"x","type":"cohort"}]&breakdown_values=["1"]`: "breakdowns",
		`?breakdowns={"property":"x"}&breakdown_values=["1"]`:                   "breakdowns",
		`?breakdowns=["a","b"]&breakdown_values=["1"]`:                          "breakdown_values",
	})
}

// retentionAll pages a retention answer through next to the end.
func (e *env) retentionAll(p interface{ Encode() string }) []retained {
	e.t.Helper()
	all, next := e.retentionOf(e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/retention/?%s", e.projectA.ID, p.Encode())))
	for pages := 0; next != ""; pages++ {
		if pages > 100 {
			e.t.Fatal("next never ends")
		}
		var more []retained
		more, next = e.retentionOf(e.get(e.keyAll, mustURI(e.t, next)))
		all = append(all, more...)
	}
	return all
}
