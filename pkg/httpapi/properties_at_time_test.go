package httpapi

import (
	"fmt"
	"net/url"
	"testing"
)

// TestPropertiesAtTime: a person's properties as of a moment, from the
// $set, $set_once (asked for) and $unset of every event of every one of
// its distinct ids at or before it, to the millisecond, folded in the
// order the ingester folded them (a late event counts at its own time);
// by distinct id, integer id or uuid; bad input a 400 naming it.
func TestPropertiesAtTime(t *testing.T) {
	e := newEnv(t)
	// Minute i of 2026-05-01 unless an event says otherwise.
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"a1","$set":{"plan":"free","n":1},"$set_once":{"first":"x"}}`,
		`{"event":"e","distinct_id":"a1","$set":{"plan":"pro"},"$set_once":{"first":"y"}}`,
		`{"event":"$identify","distinct_id":"a2","properties":{"$anon_distinct_id":"a1"},"$set":{"email":"a@x.io"}}`,
		`{"event":"e","distinct_id":"a2","$unset":["n"]}`,
		`{"event":"pageview","distinct_id":"a2","properties":{"path":"/"}}`,
		`{"event":"late","distinct_id":"a1","timestamp":"2026-05-01T00:01:30.500Z","$set":{"late":true}}`)
	path := fmt.Sprintf("/api/projects/%d/persons/properties_at_time/", e.projectA.ID)
	_, p := e.personPath("a2")
	at := func(who, ts string, setOnce bool) map[string]any {
		t.Helper()
		q := who + "&timestamp=" + url.QueryEscape(ts)
		if setOnce {
			q += "&include_set_once=true"
		}
		r := e.get(e.keyRead, path+"?"+q)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		return r.json(t)
	}
	for _, c := range []struct {
		ts      string
		setOnce bool
		props   string
		applied int
		last    string
	}{
		{"2026-05-01", false, "map[n:1 plan:free]", 1, "e 2026-05-01T00:00:00Z"},
		{"2026-05-01T00:00:30Z", true, "map[first:x n:1 plan:free]", 1, "e 2026-05-01T00:00:00Z"},
		{"2026-05-01T00:01:30.499Z", true, "map[first:x n:1 plan:pro]", 2, "e 2026-05-01T00:01:00Z"},
		{"2026-05-01T02:01:30.5+02:00", false, "map[late:true n:1 plan:pro]", 3, "late 2026-05-01T00:01:30.5Z"},
		{"2026-05-01T00:02:00", false, "map[email:a@x.io late:true n:1 plan:pro]", 4, "late 2026-05-01T00:01:30.5Z"},
		{"2026-05-02T00:00:00Z", true, "map[email:a@x.io first:x late:true plan:pro]", 5, "late 2026-05-01T00:01:30.5Z"},
		{"2026-04-30T23:59:59Z", true, "map[]", 0, ""},
	} {
		for _, who := range []string{"distinct_id=a1", "person_id=" + fmt.Sprint(p["id"]), "person_id=" + p["uuid"].(string)} {
			m := at(who, c.ts, c.setOnce)
			meta := m["point_in_time_metadata"].(map[string]any)
			last := ""
			if l, ok := meta["last_event_applied"].(map[string]any); ok {
				last = fmt.Sprint(l["event"], " ", l["timestamp"])
			}
			if fmt.Sprint(m["properties"]) != c.props || meta["events_applied"] != float64(c.applied) || last != c.last ||
				m["id"] != p["id"] || fmt.Sprint(meta["distinct_ids_queried"]) != "[a1 a2]" || meta["include_set_once"] != c.setOnce {
				t.Errorf("%s at %s: %v %v, want %s after %d events (last %q)", who, c.ts, m["properties"], meta, c.props, c.applied, c.last)
			}
		}
	}
	m := at("distinct_id=a1", "2026-05-01T00:00:30Z", false)["point_in_time_metadata"].(map[string]any)
	if m["query_mode"] != "distinct_id" || m["distinct_id_used"] != "a1" || m["person_id_used"] != nil || m["queried_timestamp"] != "2026-05-01T00:00:30Z" {
		t.Errorf("metadata %v", m)
	}

	for _, c := range []struct{ query, attr string }{
		{"distinct_id=a1&person_id=1&timestamp=2026-05-01", "person_id"},
		{"timestamp=2026-05-01", "distinct_id"},
		{"distinct_id=a1", "timestamp"},
		{"distinct_id=a1&timestamp=yesterday", "timestamp"},
		{"distinct_id=a1&timestamp=2026-05-01&include_set_once=maybe", "include_set_once"},
		{"person_id=abc&timestamp=2026-05-01", "person_id"},
	} {
		if r := wantError(t, e.get(e.keyRead, path+"?"+c.query), 400, "validation_error", "invalid_input"); r["attr"] != c.attr {
			t.Errorf("%s: attr %v", c.query, r["attr"])
		}
	}
	wantError(t, e.get(e.keyRead, path+"?distinct_id=nobody&timestamp=2026-05-01"), 404, "invalid_request", "not_found")
	wantError(t, e.get(e.keyRead, path+"?person_id=424242&timestamp=2026-05-01"), 404, "invalid_request", "not_found")
	wantError(t, e.get(e.keyB, path+"?distinct_id=a1&timestamp=2026-05-01"), 404, "invalid_request", "not_found")
}
