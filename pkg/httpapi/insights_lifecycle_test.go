package httpapi

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Reference §11.1: lifecycle by day in UTC, then the same data in
// US/Pacific where p1's first two events fall on local 01-11.
func TestActorsWorkedLifecycle(t *testing.T) {
	e := newEnv(t)
	var evs []ev
	pv := func(id, d string, hour int) {
		evs = append(evs, ev{name: "$pageview", distinctID: id, at: day(d, hour)})
	}
	pv("p1", "2020-01-11", 23) // UTC 01-11; Pacific 01-11 15:00
	pv("p1", "2020-01-12", 1)  // UTC 01-12; Pacific 01-11 17:00
	for _, d := range []string{"2020-01-13", "2020-01-15", "2020-01-17", "2020-01-19"} {
		pv("p1", d, 12)
	}
	pv("p2", "2020-01-09", 12)
	pv("p2", "2020-01-12", 12)
	pv("p3", "2020-01-12", 12)
	pv("p4", "2020-01-15", 12)
	e.publishEvents(e.projectA.ID, evs...)
	life := func(target, typ string) []string {
		p := params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", "2020-01-12", "date_to", "2020-01-19",
			"target_date", target, "lifecycle_type", typ)
		ids, _, _ := e.actors("lifecycle", p)
		return ids
	}
	check := func(zone string, want map[string][]string) {
		t.Helper()
		for k, w := range want {
			parts := strings.SplitN(k, " ", 2)
			if got := life(parts[0], parts[1]); !slices.Equal(got, w) {
				t.Errorf("%s %s: %v, want %v", zone, k, got, w)
			}
		}
	}
	check("UTC", map[string][]string{
		"2020-01-12 new": {"p3"}, "2020-01-15 new": {"p4"}, "2020-01-12 returning": {"p1"}, "2020-01-13 returning": {"p1"},
		"2020-01-12 resurrecting": {"p2"}, "2020-01-15 resurrecting": {"p1"}, "2020-01-13 dormant": {"p2", "p3"},
		"2020-01-14 dormant": {"p1"}, "2020-01-16 dormant": {"p1", "p4"}, "2020-01-14 new": nil,
	})
	r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID), `{"timezone":"US/Pacific"}`)
	if r.status != 200 {
		t.Fatalf("PATCH timezone: %d %s", r.status, r.body)
	}
	check("US/Pacific", map[string][]string{
		"2020-01-12 dormant": {"p1"}, "2020-01-13 dormant": {"p2", "p3"}, "2020-01-12 new": {"p3"},
		"2020-01-12 resurrecting": {"p2"}, "2020-01-13 resurrecting": {"p1"}, "2020-01-12 returning": nil, "2020-01-13 returning": nil,
	})
}

// Paging through next returns every person once, in id order; CSV holds
// the same persons; a deleted person and the API's command events are
// never counted.
func TestActorsPagingCSVDeleted(t *testing.T) {
	e := newEnv(t)
	var evs []ev
	for i := range 23 {
		evs = append(evs, ev{name: "signup", distinctID: fmt.Sprintf("u%02d", i), at: day("2021-03-04", 10), props: map[string]any{"plan": "pro"}})
	}
	e.publishEvents(e.projectA.ID, evs...)
	base := params("events", `[{"id":"signup","type":"events"}]`, "date_from", "2021-03-04", "date_to", "2021-03-04",
		"target_date", "2021-03-04", "lifecycle_type", "new", "stickiness_days", "1", "entity_id", "signup", "limit", "5")
	for _, route := range []string{"lifecycle", "stickiness", "trends"} {
		var all []string
		ids, _, next := e.actors(route, base)
		all = append(all, ids...)
		for pages := 0; next != ""; pages++ {
			if pages > 10 {
				t.Fatalf("%s: next never ends", route)
			}
			u, _ := url.Parse(next)
			ids, _, next = e.actorsOf(e.get(e.keyAll, u.RequestURI()))
			all = append(all, ids...)
		}
		if len(all) != 23 || !slices.IsSorted(all) {
			t.Errorf("%s: paged %d persons %v", route, len(all), all)
		}
	}
	// Delete u03 and edit u04 through the API (a command event each).
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=u03", e.projectA.ID)).json(t)["results"].([]any)
	id := list[0].(map[string]any)["id"]
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, id)); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	list = e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=u04", e.projectA.ID)).json(t)["results"].([]any)
	id = list[0].(map[string]any)["id"]
	if r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, id), `{"properties":{"plan":"pro"}}`); r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	anyEvent := params("date_from", "2021-03-04", "date_to", "-0d", "entity_type", "events", "limit", "100")
	ids, vals, _ := e.actors("trends", anyEvent)
	if len(ids) != 22 || slices.Contains(ids, "u03") {
		t.Errorf("after delete: %v", ids)
	}
	for _, v := range vals {
		if v != 1 {
			t.Errorf("an API command event was counted: values %v", vals)
			break
		}
	}
	csv := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/trends/?format=csv&%s", e.projectA.ID, anyEvent.Encode()))
	lines := strings.Split(strings.TrimSpace(string(csv.body)), "\n")
	if csv.status != 200 || len(lines) != 23 || !strings.Contains(lines[0], "value_at_data_point") || !strings.Contains(lines[0], "properties.plan") {
		t.Errorf("csv: %d %d lines: %s", csv.status, len(lines), lines[0])
	}
}

// Invalid parameters answer 400 naming them.
func TestActorsInvalid(t *testing.T) {
	e := newEnv(t)
	p := fmt.Sprintf("/api/projects/%d/persons/", e.projectA.ID)
	cases := map[string]string{
		"trends/?events=[":                        "events",
		"trends/":                                 "entity_id",
		"trends/?entity_id=x&interval=fortnight":  "interval",
		"trends/?entity_id=x&date_from=yesterday": "date_from",
		"trends/?entity_id=x&date_to=2020-13-01":  "date_to",
		"trends/?entity_id=x&limit=abc":           "limit",
		"trends/?entity_id=x&offset=-1":           "offset",
		"trends/?entity_id=x&properties={":        "properties",
		"trends/?entity_id=x&properties=[{\"key\":\"a\",\"operator\":\"nope\"}]":       "properties",
		"trends/?entity_type=actions&entity_id=7":                                      "actions",
		"stickiness/?entity_id=x":                                                      "stickiness_days",
		"stickiness/?entity_id=x&stickiness_days=0":                                    "stickiness_days",
		"lifecycle/?events=[{\"id\":\"x\"}]&lifecycle_type=new":                        "target_date",
		"lifecycle/?events=[{\"id\":\"x\"}]&target_date=2020-01-01":                    "lifecycle_type",
		"lifecycle/?events=[{\"id\":\"x\"}]&target_date=2020-01-01&lifecycle_type=old": "lifecycle_type",
		"lifecycle/?target_date=2020-01-01&lifecycle_type=new":                         "events",
		"lifecycle/?actions=[{\"id\":3}]&target_date=2020-01-01&lifecycle_type=new":    "actions",
	}
	for q, attr := range cases {
		m := wantError(t, e.get(e.keyAll, p+strings.ReplaceAll(q, " ", "%20")), 400, "validation_error", "invalid_input")
		if m["attr"] != attr {
			t.Errorf("%s: attr %v, want %s (%v)", q, m["attr"], attr, m["detail"])
		}
	}
}
