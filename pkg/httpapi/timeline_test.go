package httpapi

import (
	"fmt"
	"net/url"
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
	want := []string{"2026-05-01T00:00:00Z map[plan:free] 2", "2026-05-01T00:02:00Z map[plan:pro] 2", "2026-05-01T00:04:00Z map[] 1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("points:\n got %v\nwant %v", got, want)
	}
	// Only $pageview is relevant.
	q.Set("events", `[{"id":"$pageview","type":"events"}]`)
	m = e.get(e.keyAll, path+"properties_timeline/?"+q.Encode()).json(t)
	if n := len(m["points"].([]any)); n != 3 {
		t.Fatalf("pageview points: %v", m["points"])
	}
	wantError(t, e.get(e.keyAll, path+"properties_timeline/?date_from=yesterdayish"), 400, "validation_error", "invalid_input")
	wantError(t, e.get(e.keyAll, path+"properties_timeline/?events=nope"), 400, "validation_error", "invalid_input")
}
