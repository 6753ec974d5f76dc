package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// refFunnel is the test's own funnel computation over the generated
// events, written apart from the SQL (reference §6): events of one person
// sorted by time; ordered = each next step is the first later event of
// that step within the window from step 1; strict = the very next event;
// unordered = 1 + the other steps having a later event within the window.
// exclude: an ordered attempt does not count when an event of that name
// comes strictly between its steps 1 and 2 (or step 1 + window).
type refEvent struct {
	name string
	at   time.Time
}

// startOK, when not nil, keeps only the attempts starting at the times it
// accepts (the trends view's entrance period).
func refLevel(evs []refEvent, steps []string, order string, window time.Duration, exclude string, startOK func(time.Time) bool) int {
	level, _, _ := refAttempt(evs, steps, order, window, exclude, startOK)
	return level
}

// refAttempt is refLevel with the best attempt's step-1 time and, for
// ordered funnels, its last step's time (the earliest start wins a tie).
func refAttempt(evs []refEvent, steps []string, order string, window time.Duration, exclude string, startOK func(time.Time) bool) (best int, first, last time.Time) {
	idx := func(name string) int { return slices.Index(steps, name) }
	for p, start := range evs {
		if (order == "unordered" && idx(start.name) < 0) || (order != "unordered" && start.name != steps[0]) || (startOK != nil && !startOK(start.at)) {
			continue
		}
		end := start.at.Add(window)
		level, at := 1, start.at
		switch order {
		case "unordered":
			for k, s := range steps {
				if k == idx(start.name) {
					continue
				}
				for _, later := range evs[p+1:] {
					if later.name == s && !later.at.After(end) {
						level++
						break
					}
				}
			}
		case "strict":
			for k := 1; k < len(steps) && p+k < len(evs); k++ {
				if evs[p+k].name != steps[k] || evs[p+k].at.After(end) {
					break
				}
				level++
			}
		default:
			cur, second := p, time.Time{}
			for k := 1; k < len(steps); k++ {
				found := -1
				for q := cur + 1; q < len(evs); q++ {
					if evs[q].name == steps[k] && !evs[q].at.After(end) {
						found = q
						break
					}
				}
				if found < 0 {
					break
				}
				if k == 1 {
					second = evs[found].at
				}
				level, cur, at = level+1, found, evs[found].at
			}
			if exclude != "" {
				until := end
				if !second.IsZero() {
					until = second
				}
				hit := false
				for _, x := range evs {
					hit = hit || (x.name == exclude && x.at.After(start.at) && x.at.Before(until))
				}
				if hit {
					level = 0
				}
			}
		}
		if level > best {
			best, first, last = level, start.at, at
		}
	}
	return best, first, last
}

// A generated history: ordered, strict and unordered funnels with day and
// hour windows and an exclusion, each funnel_step compared with refLevel;
// a person merged mid-funnel is one person, a deleted person is absent;
// every answer paged through next with a small limit.
func TestFunnelGenerated(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewSource(7))
	base := day("2022-03-01", 0)
	names := []string{"a", "b", "c", "x"}
	var evs []ev
	byPerson := map[string][]refEvent{}
	for i := range 40 {
		id := fmt.Sprintf("g%02d", i)
		used := map[int]bool{}
		for range 3 + rng.Intn(7) {
			sec := uniqueSecond(rng, used, 6*86400)
			x := ev{name: names[rng.Intn(len(names))], distinctID: id, at: base.Add(time.Duration(sec) * time.Second)}
			evs = append(evs, x)
			byPerson[id] = append(byPerson[id], refEvent{x.name, x.at})
		}
	}
	// mA does a, then identifies as mB, which does b and c: one person.
	merged := []ev{
		{name: "a", distinctID: "mA", at: day("2022-03-02", 10)},
		{name: "$identify", distinctID: "mB", at: day("2022-03-02", 11), props: map[string]any{"$anon_distinct_id": "mA"}},
		{name: "b", distinctID: "mB", at: day("2022-03-02", 12)},
		{name: "c", distinctID: "mB", at: day("2022-03-02", 13)},
	}
	// s1 completes a strict funnel; s2 has an x between a and b.
	for id, seq := range map[string][]string{"s1": {"a", "b", "c"}, "s2": {"a", "x", "b", "c"}} {
		for h, n := range seq {
			x := ev{name: n, distinctID: id, at: day("2022-03-03", h)}
			evs = append(evs, x)
			byPerson[id] = append(byPerson[id], refEvent{x.name, x.at})
		}
	}
	for _, x := range merged {
		byPerson["mA"] = append(byPerson["mA"], refEvent{x.name, x.at})
	}
	evs = append(evs, merged...)
	for h, n := range []string{"a", "b", "c"} {
		evs = append(evs, ev{name: n, distinctID: "zdeleted", at: day("2022-03-02", h)})
	}
	e.publishEvents(e.projectA.ID, evs...)
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=zdeleted", e.projectA.ID)).json(t)["results"].([]any)
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, list[0].(map[string]any)["id"])); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	from, to := day("2022-03-01", 0), day("2022-03-06", 0) // date_to 2022-03-05: the whole day
	steps := []string{"a", "b", "c"}
	entities, _ := json.Marshal([]map[string]any{{"id": "a", "order": 0}, {"id": "b", "order": 1}, {"id": "c", "order": 2}})
	for _, c := range []struct {
		order, unit, exclude string
		n                    int
		window               time.Duration
	}{
		{"ordered", "day", "", 2, 48 * time.Hour},
		{"ordered", "hour", "", 30, 30 * time.Hour},
		{"strict", "day", "", 2, 48 * time.Hour},
		{"strict", "day", "", 6, 6 * 24 * time.Hour},
		{"unordered", "day", "", 1, 24 * time.Hour},
		{"unordered", "hour", "", 50, 50 * time.Hour},
		{"ordered", "day", "x", 2, 48 * time.Hour},
	} {
		levels := map[string]int{}
		for id, all := range byPerson {
			levels[id] = refLevel(inRange(all, from, to), steps, c.order, c.window, c.exclude, nil)
		}
		p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_order_type", c.order,
			"funnel_window_interval", fmt.Sprint(c.n), "funnel_window_interval_unit", c.unit, "limit", "7")
		if c.exclude != "" {
			p.Set("exclusions", `[{"id":"x","type":"events","funnel_from_step":0,"funnel_to_step":1}]`)
		}
		for _, step := range []int{1, 2, 3, -2, -3} {
			want := atFunnelStep(levels, step)
			p.Set("funnel_step", fmt.Sprint(step))
			got := e.funnelPersons("funnel", p)
			if !slices.Equal(got, want) {
				t.Errorf("%s %d %s exclude %q, funnel_step=%d:\n got %v\nwant %v", c.order, c.n, c.unit, c.exclude, step, got, want)
			}
		}
	}
	// mA reached step 3 ordered (the merged person once), but not strict:
	// its $identify comes between a and b.
	if levels := refLevel(byPerson["mA"], steps, "strict", time.Hour*48, "", nil); levels != 1 {
		t.Fatalf("reference: strict level of mA %d", levels)
	}
	p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_step", "3")
	if got := e.funnelPersons("funnel", p); !slices.Contains(got, "mA") || slices.Contains(got, "zdeleted") || slices.Contains(got, "mB") {
		t.Errorf("merged/deleted: %v", got)
	}

	// Correlation with x over the ordered 2-day funnel: persons with an x
	// strictly after their counted attempt's start and strictly before its
	// last step (converted) or the end of its window.
	for _, conv := range []string{"", "true", "false"} {
		var want []string
		for id, all := range byPerson {
			in := inRange(all, from, to)
			l, first, last := refAttempt(in, steps, "ordered", 48*time.Hour, "", nil)
			until := first.Add(48 * time.Hour)
			if l == 3 {
				until = last
			}
			hit := false
			for _, x := range in {
				hit = hit || (x.name == "x" && x.at.After(first) && x.at.Before(until))
			}
			if l >= 1 && hit && (conv == "" || (conv == "true") == (l == 3)) {
				want = append(want, id)
			}
		}
		sort.Strings(want)
		p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_window_days", "2",
			"funnel_correlation_person_entity", `{"id":"x","type":"events"}`, "funnel_correlation_person_limit", "4")
		if conv != "" {
			p.Set("funnel_correlation_person_converted", conv)
		}
		if got := e.funnelPersons("funnel/correlation", p); !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("correlation with x, converted %q:\n got %v\nwant %v", conv, got, want)
		}
	}

	// The trends view: per entrance day, the persons whose attempts started
	// that day reached step 3 (drop_off=false), or step 2 but not 3 (true).
	for d := 1; d <= 5; d++ {
		period := day(fmt.Sprintf("2022-03-%02d", d), 0)
		for _, dropOff := range []bool{false, true} {
			var want []string
			for id, all := range byPerson {
				l := refLevel(inRange(all, from, to), steps, "ordered", 48*time.Hour, "", func(t time.Time) bool { return !t.Before(period) && t.Before(period.AddDate(0, 0, 1)) })
				if (!dropOff && l == 3) || (dropOff && l == 2) {
					want = append(want, id)
				}
			}
			sort.Strings(want)
			p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_window_days", "2",
				"funnel_viz_type", "trends", "entrance_period_start", period.Format("2006-01-02"), "drop_off", fmt.Sprint(dropOff),
				"funnel_from_step", "1", "funnel_to_step", "2")
			if got := e.funnelPersons("funnel", p); !slices.Equal(got, want) {
				t.Errorf("trends view %s drop_off=%v:\n got %v\nwant %v", period.Format("01-02"), dropOff, got, want)
			}
		}
	}

	// POST with the same parameters as a JSON object equals GET; next
	// from a POST works as a GET.
	p.Set("limit", "3")
	get := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/funnel/?%s", e.projectA.ID, p.Encode()))
	body := fmt.Sprintf(`{"events":%s,"date_from":"2022-03-01","date_to":"2022-03-05","funnel_step":3,"limit":3}`, entities)
	post := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/funnel/", e.projectA.ID), body)
	gIDs, _, gNext := e.actorsOf(get)
	pIDs, _, pNext := e.actorsOf(post)
	if !slices.Equal(gIDs, pIDs) || (gNext == "") != (pNext == "") {
		t.Errorf("POST %v next %q, GET %v next %q", pIDs, pNext, gIDs, gNext)
	}
	if pNext != "" {
		u, _ := url.Parse(pNext)
		ids, _, _ := e.actorsOf(e.get(e.keyAll, u.RequestURI()))
		g2, _, _ := e.actorsOf(e.get(e.keyAll, mustURI(t, gNext)))
		if !slices.Equal(ids, g2) {
			t.Errorf("next of POST %v, of GET %v", ids, g2)
		}
	}

	// CSV: every person of the step, one row each, the persons-list columns.
	p.Del("limit")
	all := e.funnelPersons("funnel", p)
	csv := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/funnel/?format=csv&%s", e.projectA.ID, p.Encode()))
	lines := strings.Split(strings.TrimSpace(string(csv.body)), "\n")
	if csv.status != 200 || len(lines) != len(all)+1 || !strings.Contains(lines[0], "distinct_ids") {
		t.Errorf("csv: %d, %d lines for %d persons: %.200s", csv.status, len(lines), len(all), csv.body)
	}
}

// atFunnelStep is the sorted ids whose level funnel_step=step selects:
// step or further (step > 0), exactly -step-1 (step < 0).
func atFunnelStep(levels map[string]int, step int) []string {
	var want []string
	for id, l := range levels {
		if (step > 0 && l >= step) || (step < 0 && l == -step-1) {
			want = append(want, id)
		}
	}
	sort.Strings(want)
	return want
}

// uniqueSecond draws a second in [0, span) not drawn before for used.
func uniqueSecond(rng *rand.Rand, used map[int]bool, span int) int {
	sec := rng.Intn(span)
	for used[sec] {
		sec = rng.Intn(span)
	}
	used[sec] = true
	return sec
}

// inRange is a person's events in [from, to), by time.
func inRange(all []refEvent, from, to time.Time) []refEvent {
	var in []refEvent
	for _, x := range all {
		if !x.at.Before(from) && x.at.Before(to) {
			in = append(in, x)
		}
	}
	sort.SliceStable(in, func(i, j int) bool { return in[i].at.Before(in[j].at) })
	return in
}

func mustURI(t *testing.T, s string) string {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI()
}

// Invalid funnel parameters answer 400 naming them, never 500.
func TestFunnelInvalid(t *testing.T) {
	e := newEnv(t)
	p := fmt.Sprintf("/api/projects/%d/persons/", e.projectA.ID)
	two := url.QueryEscape(`[{"id":"a"},{"id":"b"}]`)
	cases := map[string]string{
		"funnel/?funnel_step=1": "events",
		"funnel/?events=" + url.QueryEscape(`[{"id":"a"}]`) + "&funnel_step=1": "events",
		"funnel/?actions=" + url.QueryEscape(`[{"id":1}]`) + "&funnel_step=1":  "actions",
		"funnel/?events=" + two:                                                                                                                                   "funnel_step",
		"funnel/?events=" + two + "&funnel_step=-1":                                                                                                               "funnel_step",
		"funnel/?events=" + two + "&funnel_step=0":                                                                                                                "funnel_step",
		"funnel/?events=" + two + "&funnel_step=3":                                                                                                                "funnel_step",
		"funnel/?events=" + two + "&funnel_step=x":                                                                                                                "funnel_step",
		"funnel/?events=" + two + "&funnel_custom_steps=[0]":                                                                                                      "funnel_custom_steps",
		"funnel/?events=" + two + "&funnel_step=1&funnel_order_type=any":                                                                                          "funnel_order_type",
		"funnel/?events=" + two + "&funnel_step=1&funnel_window_days=0":                                                                                           "funnel_window_days",
		"funnel/?events=" + two + "&funnel_step=1&funnel_window_interval_unit=year":                                                                               "funnel_window_interval_unit",
		"funnel/?events=" + two + "&funnel_step=1&funnel_viz_type=histogram":                                                                                      "funnel_viz_type",
		"funnel/?events=" + two + "&funnel_step=1&exclusions=" + url.QueryEscape(`[{"id":"x"}]`):                                                                  "exclusions",
		"funnel/?events=" + two + "&funnel_step=1&exclusions=" + url.QueryEscape(`[{"id":"a","funnel_from_step":0,"funnel_to_step":1}]`):                          "exclusions",
		"funnel/?events=" + two + "&funnel_step=1&exclusions=" + url.QueryEscape(`[{"id":"x","funnel_from_step":1,"funnel_to_step":1}]`):                          "exclusions",
		"funnel/?events=" + two + "&funnel_step=1&breakdown=b&funnel_step_breakdown=1&breakdown_attribution_type=any":                                             "breakdown_attribution_type",
		"funnel/?events=" + two + "&funnel_step=1&breakdown=b&funnel_step_breakdown=1&breakdown_attribution_type=step&breakdown_attribution_value=2":              "breakdown_attribution_value",
		"funnel/?events=" + two + "&funnel_step=1&date_from=nope":                                                                                                 "date_from",
		"funnel/correlation/?events=" + two + "&funnel_correlation_person_limit=0":                                                                                "funnel_correlation_person_limit",
		"funnel/correlation/?events=" + two + "&funnel_correlation_person_offset=x":                                                                               "funnel_correlation_person_offset",
		"funnel/correlation/?events=" + two:                                                                                                                       "funnel_correlation_person_entity",
		"funnel/correlation/?events=" + two + "&funnel_correlation_type=properties":                                                                               "funnel_correlation_property_values",
		"funnel/correlation/?events=" + two + "&funnel_correlation_type=other":                                                                                    "funnel_correlation_type",
		"funnel/correlation/?events=" + two + "&funnel_correlation_person_entity={":                                                                               "funnel_correlation_person_entity",
		"funnel/correlation/?events=" + two + "&funnel_correlation_person_entity=" + url.QueryEscape(`{"id":"v"}`) + "&funnel_correlation_person_converted=maybe": "funnel_correlation_person_converted",
	}
	for q, attr := range cases {
		m := wantError(t, e.get(e.keyAll, p+q), 400, "validation_error", "invalid_input")
		if m["attr"] != attr {
			t.Errorf("%s: attr %v, want %s (%v)", q, m["attr"], attr, m["detail"])
		}
	}
	m := wantError(t, e.send("POST", e.keyAll, p+"funnel/", `[1]`), 400, "validation_error", "invalid_input")
	if m["attr"] != "body" {
		t.Errorf("POST array: attr %v", m["attr"])
	}
	m = wantError(t, e.send("POST", e.keyAll, p+"funnel/", `{"events":[{"id":"a"}],"funnel_step":1}`), 400, "validation_error", "invalid_input")
	if m["attr"] != "events" {
		t.Errorf("POST one step: attr %v", m["attr"])
	}
}
