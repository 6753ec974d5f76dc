package httpapi

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestPropertiesTimeline(t *testing.T) {
	e := newEnv(t)
	// e.ingest stamps event i at 2026-05-01 00:00 + i minutes.
	e.ingest(e.projectA.ID,
		`{"event":"signup","distinct_id":"anon","$set":{"plan":"free","n":1}}`,
		`{"event":"$pageview","distinct_id":"anon","$set":{"n":2}}`,
		`{"event":"$identify","distinct_id":"u","properties":{"$anon_distinct_id":"anon"},"$set":{"plan":"pro"}}`,
		`{"event":"$pageview","distinct_id":"u"}`,
		`{"event":"$pageview","distinct_id":"u","$unset":["plan"]}`,
	)
	path, _ := e.personPath("u")
	q := url.Values{}
	q.Set("properties", `[{"key":"plan","value":"pro","type":"person"}]`)
	q.Set("date_from", "2026-05-01")
	q.Set("date_to", "2026-05-01")
	m := e.get(e.keyAll, path+"properties_timeline/?"+q.Encode()).json(t)
	if fmt.Sprint(m["crucial_property_keys"]) != "[plan]" || m["effective_date_from"] != "2026-05-01T00:00:00Z" {
		t.Fatalf("timeline: %v", m)
	}
	var got []string
	for _, p := range m["points"].([]any) {
		pt := p.(map[string]any)
		got = append(got, fmt.Sprint(pt["timestamp"], " ", pt["properties"], " ", pt["relevant_event_count"]))
	}
	// Each point shows all the properties then, not only the crucial plan.
	want := []string{"2026-05-01T00:00:00Z map[n:1 plan:free] 2", "2026-05-01T00:02:00Z map[n:2 plan:pro] 2", "2026-05-01T00:04:00Z map[n:2] 1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("points:\n got %v\nwant %v", got, want)
	}
	// Only $pageview is relevant.
	q.Set("events", `[{"id":"$pageview","type":"events"}]`)
	m = e.get(e.keyAll, path+"properties_timeline/?"+q.Encode()).json(t)
	if n := len(m["points"].([]any)); n != 3 {
		t.Fatalf("pageview points: %v", m["points"])
	}
	// No filter at all: no change is relevant, one point counts every event.
	q = url.Values{"date_from": {"2026-05-01"}, "date_to": {"2026-05-01"}}
	m = e.get(e.keyAll, path+"properties_timeline/?"+q.Encode()).json(t)
	if pts := m["points"].([]any); len(pts) != 1 || fmt.Sprint(pts[0]) != "map[properties:map[n:1 plan:free] relevant_event_count:5 timestamp:2026-05-01T00:00:00Z]" {
		t.Fatalf("no filter: %v", m)
	}
	wantError(t, e.get(e.keyAll, path+"properties_timeline/?date_from=yesterdayish"), 400, "validation_error", "invalid_input")
	wantError(t, e.get(e.keyAll, path+"properties_timeline/?events=nope"), 400, "validation_error", "invalid_input")
}

func TestEveryPersonsRouteTakesCSV(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, _ := e.personPath("p1")
	for _, c := range []struct{ method, path, body string }{
		{"GET", path + "properties_timeline/?format=csv", ""},
		{"GET", path + "activity/?format=csv", ""},
		{"PATCH", path + "?format=csv", `{"properties":{"csv":"=1+1"}}`},
	} {
		r := e.send(c.method, e.keyAll, c.path, c.body)
		if r.status != 200 || r.header.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Fatalf("%s %s: %d %s %s", c.method, c.path, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	r := e.send("PATCH", e.keyAll, path+"?format=csv", `{"properties":{"csv":"=1+1"}}`)
	if !strings.Contains(string(r.body), "'=1+1") || !strings.Contains(string(r.body), "properties.csv") {
		t.Fatalf("PATCH as CSV: %s", r.body)
	}
	wantError(t, e.get(e.keyAll, path+"activity/?format=yaml"), 400, "validation_error", "invalid_input")
}

// TestPropertiesTimelineIsBounded: every point carries all the person's
// properties, so one event setting many properties and then many small
// changes of a crucial key (anyone with the project token can send them)
// would make an answer of points × properties; past timeline.DefaultMaxBytes
// it is a 400 naming the window, and a narrower window answers.
func TestPropertiesTimelineIsBounded(t *testing.T) {
	e := newEnv(t)
	var set []string
	for i := 0; i < 1000; i++ {
		set = append(set, fmt.Sprintf(`"k%d":%q`, i, strings.Repeat("v", 100)))
	}
	events := []string{`{"event":"e","distinct_id":"u","$set":{` + strings.Join(set, ",") + `}}`}
	for i := 0; i < 200; i++ {
		events = append(events, fmt.Sprintf(`{"event":"e","distinct_id":"u","$set":{"c":%d}}`, i))
	}
	e.ingest(e.projectA.ID, events...) // event i at 2026-05-01 00:00 + i minutes
	path, _ := e.personPath("u")
	q := url.Values{"properties": {`[{"key":"c","operator":"is_set","type":"person"}]`}, "date_from": {"2026-05-01"}, "date_to": {"2026-05-02"}}
	r := e.get(e.keyAll, path+"properties_timeline/?"+q.Encode())
	if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "date_from" {
		t.Fatalf("attr: %v", m)
	}
	q.Set("date_to", "2026-05-01T00:10:00Z")
	m := e.get(e.keyAll, path+"properties_timeline/?"+q.Encode()).json(t)
	if n := len(m["points"].([]any)); n != 11 {
		t.Fatalf("narrow window: %d points", n)
	}
}
