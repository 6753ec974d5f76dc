package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// TestPersonExport: export/ is one JSON document with the person, its
// distinct ids, its activity, its property history and every stored event
// of its distinct ids, in stream order; format=csv and other projects are
// refused.
func TestPersonExport(t *testing.T) {
	e := newEnv(t)
	e.ingest(e.projectA.ID,
		`{"event":"signup","distinct_id":"x1","$set":{"plan":"free"},"$set_once":{"source":"ad"}}`,
		`{"event":"pageview","distinct_id":"x1","properties":{"path":"/a <b>"}}`,
		`{"event":"$identify","distinct_id":"x2","properties":{"$anon_distinct_id":"x1"}}`,
		`{"event":"e","distinct_id":"x2","$unset":["plan"]}`,
		`{"event":"other","distinct_id":"y1","$set":{"plan":"pro"}}`)
	e.startIngester()
	path, p := e.personPath("x2")
	if r := e.send("PATCH", e.keyAll, path, `{"properties":{"email":"x@y.io"}}`); r.status != 200 {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}

	r := e.get(e.keyAll, path+"export/")
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("export: %d %s %s", r.status, r.header, r.body)
	}
	var doc struct {
		ExportedAt      string           `json:"exported_at"`
		Person          map[string]any   `json:"person"`
		DistinctIDs     []string         `json:"distinct_ids"`
		Activity        []map[string]any `json:"activity"`
		PropertyHistory []map[string]any `json:"property_history"`
		Events          []struct {
			UUID       string         `json:"uuid"`
			Event      string         `json:"event"`
			DistinctID string         `json:"distinct_id"`
			Timestamp  string         `json:"timestamp"`
			Properties map[string]any `json:"properties"`
		} `json:"events"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if doc.ExportedAt == "" || doc.Person["id"] != p["id"] || fmt.Sprint(doc.Person["properties"]) != "map[email:x@y.io source:ad]" ||
		fmt.Sprint(doc.DistinctIDs) != "[x2 x1]" && fmt.Sprint(doc.DistinctIDs) != "[x1 x2]" {
		t.Fatalf("person: %s", r.body)
	}
	if len(doc.Activity) != 1 || doc.Activity[0]["activity"] != "updated" {
		t.Fatalf("activity: %v", doc.Activity)
	}
	var names []string
	for _, ev := range doc.Events {
		names = append(names, ev.Event)
	}
	// Every stored event of x1 and x2 (the PATCH is a $set command of
	// its own), none of y1's, in stream order.
	var want uint64
	if err := e.store.Conn().QueryRow(context.Background(), "SELECT count() FROM events FINAL WHERE project_id = ? AND distinct_id IN ('x1', 'x2')", e.projectA.ID).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if uint64(len(doc.Events)) != want || !slices.Equal(names[:4], []string{"signup", "pageview", "$identify", "e"}) || names[len(names)-1] != "$set" {
		t.Fatalf("events %v, want %d of them", names, want)
	}
	if doc.Events[1].Properties["path"] != "/a <b>" || doc.Events[1].DistinctID != "x1" {
		t.Fatalf("an event's properties: %+v", doc.Events[1])
	}
	var hist []string
	for _, h := range doc.PropertyHistory {
		hist = append(hist, fmt.Sprint(h["event"], " ", h["$set"], " ", h["$set_once"], " ", h["$unset"]))
	}
	if fmt.Sprint(hist) != "[signup map[plan:free] map[source:ad] <nil> e <nil> <nil> [plan] $set map[email:x@y.io] <nil> <nil>]" {
		t.Fatalf("property history: %q", hist)
	}

	// A key that may not read the activity log (person:read only) gets
	// none of it.
	r = e.get(e.keyRead, path+"export/")
	var partial map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &partial); r.status != 200 || err != nil || string(partial["activity"]) != "null" || len(partial["events"]) < 10 {
		t.Fatalf("export without activity_log:read: %d %v %.200s", r.status, err, r.body)
	}
	if m := wantError(t, e.get(e.keyRead, path+"export/?format=csv"), 400, "validation_error", "invalid_input"); m["attr"] != "format" {
		t.Fatalf("csv: %v", m)
	}
	wantError(t, e.get(e.keyB, fmt.Sprintf("/api/projects/%d/persons/%v/export/", e.projectA.ID, p["id"])), 404, "invalid_request", "not_found")
	wantError(t, e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/424242/export/", e.projectA.ID)), 404, "invalid_request", "not_found")
}
