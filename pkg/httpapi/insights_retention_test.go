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

// retained is one person of a retention answer: the first of its
// distinct ids (sorted) and its appearances.
type retained struct {
	id  string
	app []int
}

func (e *env) retention(p url.Values) ([]retained, string) {
	e.t.Helper()
	return e.retentionOf(e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/retention/?%s", e.projectA.ID, p.Encode())))
}

func (e *env) retentionOf(r response) ([]retained, string) {
	e.t.Helper()
	if r.status != 200 {
		e.t.Fatalf("status %d: %s", r.status, r.body)
	}
	var body struct {
		Result []struct {
			Person struct {
				Type        string   `json:"type"`
				DistinctIDs []string `json:"distinct_ids"`
			} `json:"person"`
			Appearances []int `json:"appearances"`
		} `json:"result"`
		Next           *string `json:"next"`
		MissingPersons *int    `json:"missing_persons"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.MissingPersons == nil {
		e.t.Fatalf("body %s: %v", r.body, err)
	}
	var out []retained
	for _, x := range body.Result {
		ds := slices.Clone(x.Person.DistinctIDs)
		sort.Strings(ds)
		if x.Person.Type != "person" {
			e.t.Fatalf("type %q", x.Person.Type)
		}
		out = append(out, retained{ds[0], x.Appearances})
	}
	next := ""
	if body.Next != nil {
		next = *body.Next
	}
	return out, next
}

// Reference §11.5, and its paging example.
func TestActorsWorkedRetention(t *testing.T) {
	e := newEnv(t)
	var evs []ev
	pv := func(id string, d, hour int) {
		evs = append(evs, ev{name: "$pageview", distinctID: id, at: day("2020-06-10", 12).AddDate(0, 0, d).Add(time.Duration(hour-12) * time.Hour)})
	}
	for _, d := range []int{0, 1, 2, 5, 6} {
		pv("person1", d, 12)
	}
	pv("alias1", 5, 9)
	evs = append(evs, ev{name: "$identify", distinctID: "person1", at: day("2020-06-18", 0), props: map[string]any{"$anon_distinct_id": "alias1"}})
	for _, d := range []int{1, 2, 3, 6, 7} {
		pv("person2", d, 12)
	}
	e.publishEvents(e.projectA.ID, evs...)
	p := params("period", "Day", "total_intervals", "11", "date_to", "2020-06-20T06:00:00", "selected_interval", "2",
		"target_entity", `{"id":"$pageview","type":"events"}`)
	got, next := e.retention(p)
	want := []retained{{"person2", []int{1, 1, 0, 0, 1, 1, 0, 0, 0}}, {"alias1", []int{1, 0, 0, 1, 1, 0, 0, 0, 0}}}
	if fmt.Sprint(got) != fmt.Sprint(want) || next != "" {
		t.Errorf("§11.5: %v next %q, want %v", got, next, want)
	}

	// 150 persons with pageviews on days 0, 1, 2 and 5: 100, then 50.
	evs = nil
	for i := range 150 {
		for _, d := range []int{0, 1, 2, 5} {
			pv(fmt.Sprintf("many%03d", i), d, 10)
		}
	}
	e.publishEvents(e.projectA.ID, evs...)
	got, next = e.retention(p)
	if len(got) != 100 || next == "" {
		t.Fatalf("first page: %d persons, next %q", len(got), next)
	}
	u, _ := url.Parse(next)
	rest, next2 := e.retentionOf(e.get(e.keyAll, u.RequestURI()))
	if len(rest) != 52 || next2 != "" {
		t.Fatalf("second page: %d persons, next %q", len(rest), next2)
	}
	all := append(got, rest...)
	seen := map[string]bool{}
	for i, x := range all {
		if seen[x.id] {
			t.Errorf("%s twice", x.id)
		}
		seen[x.id] = true
		if i > 0 && ones(all[i-1].app) < ones(x.app) {
			t.Errorf("not by appearances: %v before %v", all[i-1], x)
		}
	}
}

// zone sets the project's time zone and returns it.
func (e *env) zone(name string) *time.Location {
	e.t.Helper()
	if r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID), fmt.Sprintf(`{"timezone":%q}`, name)); r.status != 200 {
		e.t.Fatalf("timezone: %d %s", r.status, r.body)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return loc
}

func ones(a []int) (n int) {
	for _, x := range a {
		n += x
	}
	return n
}

// A generated history in Europe/Berlin (a DST change inside the range),
// weekly and monthly, first time and recurring, checked against a
// reference computed here from the same events; a person merged mid-window
// is one person and a deleted person is absent.
func TestActorsRetentionGenerated(t *testing.T) {
	e := newEnv(t)
	berlin := e.zone("Europe/Berlin")
	rng := rand.New(rand.NewSource(7))
	start := time.Date(2021, 1, 4, 0, 0, 0, 0, berlin) // a Monday
	var evs []ev
	owner := map[string]string{} // distinct id -> person key in the reference
	for i := range 30 {
		id := fmt.Sprintf("g%02d", i)
		owner[id] = id
		for range 2 + rng.Intn(8) {
			name := []string{"signup", "use", "use"}[rng.Intn(3)]
			// Events either side of local midnight, hours after the zone's offset.
			at := start.AddDate(0, 0, rng.Intn(170)).Add(time.Duration(rng.Intn(48)-12) * time.Hour / 2)
			evs = append(evs, ev{name: name, distinctID: id, at: at})
		}
	}
	// g01 takes over g02 mid-window: g02's events count for g01.
	evs = append(evs, ev{name: "$identify", distinctID: "g01", at: start.AddDate(0, 0, 60), props: map[string]any{"$anon_distinct_id": "g02"}})
	owner["g02"] = "g01"
	e.publishEvents(e.projectA.ID, evs...)
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=g03", e.projectA.ID)).json(t)["results"].([]any)
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, list[0].(map[string]any)["id"])); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	deleted := "g03"

	dateTo := time.Date(2021, 6, 10, 15, 0, 0, 0, berlin)
	for _, period := range []string{"Week", "Month"} {
		for _, typ := range []string{"retention_recurring", "retention_first_time"} {
			total := map[string]int{"Week": 12, "Month": 5}[period]
			starts := refStarts(period, dateTo, total, berlin)
			for sel := range total {
				p := params("period", period, "total_intervals", fmt.Sprint(total), "date_to", "2021-06-10T15:00:00", "selected_interval", fmt.Sprint(sel),
					"retention_type", typ, "target_entity", `{"id":"signup","type":"events"}`, "returning_entity", `{"id":"use","type":"events"}`, "limit", "1000")
				got, _ := e.retention(p)
				want := refRetention(evs, owner, deleted, starts, sel, typ == "retention_first_time")
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s %s interval %d:\n got %v\nwant %v", period, typ, sel, got, want)
				}
			}
		}
	}
}

// Hours and days across Berlin's DST change (a 23-hour local day), with
// events either side of local midnight, against the same reference.
func TestActorsRetentionHourDay(t *testing.T) {
	e := newEnv(t)
	berlin := e.zone("Europe/Berlin")
	rng := rand.New(rand.NewSource(3))
	start := time.Date(2021, 3, 26, 20, 0, 0, 0, berlin)
	var evs []ev
	owner := map[string]string{}
	for i := range 20 {
		id := fmt.Sprintf("h%02d", i)
		owner[id] = id
		for range 3 + rng.Intn(10) {
			at := start.Add(time.Duration(rng.Intn(4*24*4)) * 15 * time.Minute)
			evs = append(evs, ev{name: []string{"signup", "use"}[rng.Intn(2)], distinctID: id, at: at})
		}
	}
	e.publishEvents(e.projectA.ID, evs...)
	for _, tc := range []struct {
		period, dateTo string
		total          int
	}{{"Day", "2021-03-29T10:00:00", 4}, {"Hour", "2021-03-28T09:30:00", 30}} {
		to, _ := time.ParseInLocation("2006-01-02T15:04:05", tc.dateTo, berlin)
		starts := refStarts(tc.period, to, tc.total, berlin)
		for _, typ := range []string{"retention_recurring", "retention_first_time"} {
			for sel := range tc.total {
				p := params("period", tc.period, "total_intervals", fmt.Sprint(tc.total), "date_to", tc.dateTo, "selected_interval", fmt.Sprint(sel),
					"retention_type", typ, "target_entity", `{"id":"signup"}`, "returning_entity", `{"id":"use","type":"events"}`, "limit", "1000")
				got, _ := e.retention(p)
				if want := refRetention(evs, owner, "", starts, sel, typ == "retention_first_time"); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s %s interval %d:\n got %v\nwant %v", tc.period, typ, sel, got, want)
				}
			}
		}
	}
}

// refStarts is the interval starts of a retention range: total periods
// ending with dateTo's, in loc, weeks from Monday.
func refStarts(period string, dateTo time.Time, total int, loc *time.Location) []time.Time {
	t := dateTo.In(loc)
	var last time.Time
	step := func(x time.Time, n int) time.Time { return x.AddDate(0, n, 0) }
	switch period {
	case "Hour":
		last = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
		step = func(x time.Time, n int) time.Time { return x.Add(time.Duration(n) * time.Hour) }
	case "Day":
		last = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		step = func(x time.Time, n int) time.Time { return x.AddDate(0, 0, n) }
	case "Week":
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		for d.Weekday() != time.Monday {
			d = d.AddDate(0, 0, -1)
		}
		last = d
		step = func(x time.Time, n int) time.Time { return x.AddDate(0, 0, 7*n) }
	default:
		last = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	}
	out := make([]time.Time, total+1)
	for i := range out {
		out[i] = step(last, i-total+1)
	}
	return out // out[total] is the end
}

// refRetention computes the answer directly: interval of each event by
// comparing with the starts, cohort, appearances, order.
func refRetention(evs []ev, owner map[string]string, deleted string, starts []time.Time, sel int, firstTime bool) []retained {
	interval := func(at time.Time) int {
		for i := 0; i+1 < len(starts); i++ {
			if !at.Before(starts[i]) && at.Before(starts[i+1]) {
				return i
			}
		}
		return -1
	}
	first := map[string]time.Time{}
	inCohort := map[string]bool{}
	back := map[string]map[int]bool{}
	for _, x := range evs {
		who := owner[x.distinctID]
		if who == deleted {
			continue
		}
		i := interval(x.at)
		switch x.name {
		case "signup":
			if f, ok := first[who]; !ok || x.at.Before(f) {
				first[who] = x.at
			}
			if i == sel {
				inCohort[who] = true
			}
		case "use":
			if i > sel {
				if back[who] == nil {
					back[who] = map[int]bool{}
				}
				back[who][i] = true
			}
		}
	}
	var out []retained
	for who := range first {
		if firstTime && interval(first[who]) != sel || !firstTime && !inCohort[who] {
			continue
		}
		app := make([]int, len(starts)-1-sel)
		app[0] = 1
		for i := range back[who] {
			app[i-sel] = 1
		}
		out = append(out, retained{who, app})
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := ones(out[i].app), ones(out[j].app); a != b {
			return a > b
		}
		return out[i].id < out[j].id // ids are created in this order
	})
	return out
}

// CSV columns appearances.N; invalid parameters answer 400 naming them.
func TestActorsRetentionCSVInvalid(t *testing.T) {
	e := newEnv(t)
	e.publishEvents(e.projectA.ID,
		ev{name: "$pageview", distinctID: "c1", at: day("2022-02-01", 10)},
		ev{name: "$pageview", distinctID: "c1", at: day("2022-02-03", 10)},
		ev{name: "$pageview", distinctID: "c2", at: day("2022-02-01", 11)})
	base := fmt.Sprintf("/api/projects/%d/persons/retention/", e.projectA.ID)
	r := e.get(e.keyAll, base+"?format=csv&total_intervals=3&date_to=2022-02-03")
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
	if r.status != 200 || len(lines) != 3 || !strings.Contains(lines[0], "appearances.2") {
		t.Fatalf("csv %d: %q", r.status, lines)
	}
	header := strings.Split(lines[0], ",")
	col := slices.Index(header, "appearances.2")
	if got := strings.Split(lines[1], ",")[col]; got != "1" {
		t.Errorf("c1's appearances.2 = %q (%s)", got, lines[1])
	}
	cases := map[string]string{
		"?period=Fortnight":                              "period",
		"?total_intervals=0":                             "total_intervals",
		"?total_intervals=x":                             "total_intervals",
		"?total_intervals=3&selected_interval=3":         "selected_interval",
		"?retention_type=sometimes":                      "retention_type",
		"?target_entity={":                               "target_entity",
		"?returning_entity=[1]":                          "returning_entity",
		"?target_entity={\"id\":5,\"type\":\"actions\"}": "actions",
		"?date_to=tomorrow":                              "date_to",
		"?properties=[{\"key\":1}]":                      "properties",
		"?limit=-2":                                      "limit",
	}
	e.wantAttrs(base, cases)
}

// wantAttrs checks that each query (appended to base) answers 400 naming
// the attr it maps to.
func (e *env) wantAttrs(base string, cases map[string]string) {
	e.t.Helper()
	for q, attr := range cases {
		m := wantError(e.t, e.get(e.keyAll, base+strings.ReplaceAll(q, " ", "%20")), 400, "validation_error", "invalid_input")
		if m["attr"] != attr {
			e.t.Errorf("%s: attr %v, want %s (%v)", q, m["attr"], attr, m["detail"])
		}
	}
}
