package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/capture"
)

// TestTimestampedPersonProperties: with the project's
// timestamped_person_properties on (PATCH), capture stores each event with
// a $set as timestamp-aware ("$set_timestamp":true in the events table),
// and a historical import sent out of timestamp order leaves each person
// property at the value of its newest event; properties_at_time folds the
// same way. Turned off again, events are stored as sent and $set is last
// ingested wins, and the events stamped before keep their stamp.
func TestTimestampedPersonProperties(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	c.startIngester()
	send := func(events ...string) {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}}
		if r := c.post("/batch/", h, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, c.projectA.APIToken, strings.Join(events, ","))); r.status != 200 {
			t.Fatalf("capture: %d %s", r.status, r.body)
		}
	}
	path := fmt.Sprintf("/api/projects/%d/", c.projectA.ID)
	for _, body := range []string{`{"timestamped_person_properties":"yes"}`, `{"timestamped_person_properties":null}`, `{"timestamped_person_properties":true,"timezone":"Mars/Olympus"}`} {
		if m := wantError(t, c.send("PATCH", c.keyAll, path, body), 400, "validation_error", "invalid_input"); body != `{"timestamped_person_properties":true,"timezone":"Mars/Olympus"}` && m["attr"] != "timestamped_person_properties" {
			t.Fatalf("%s: attr %v", body, m["attr"])
		}
	}
	if got := c.get(c.keyAll, path).json(t)["timestamped_person_properties"]; got != false {
		t.Fatalf("default, and after refused PATCHes: %v", got)
	}
	if r := c.send("PATCH", c.keyAll, path, `{"timestamped_person_properties":true}`); r.status != 200 || r.json(t)["timestamped_person_properties"] != true {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}

	// An import, newest first.
	send(`{"event":"import","distinct_id":"u","timestamp":"2024-05-01T00:00:00Z","$set":{"plan":"pro"}}`,
		`{"event":"import","distinct_id":"u","timestamp":"2024-01-01T00:00:00Z","$set":{"plan":"free","seats":1}}`,
		`{"event":"import","distinct_id":"u","timestamp":"2024-03-01T00:00:00Z","properties":{"$set":{"plan":"team","seats":3}}}`,
		`{"event":"view","distinct_id":"u","timestamp":"2024-02-01T00:00:00Z","properties":{"path":"/"}}`,
		`{"event":"import","distinct_id":"u","timestamp":"2024-06-01T00:00:00Z","$set":{"done":1}}`)
	p := c.waitPerson("u", func(p map[string]any) bool { return personProps(p)["done"] != nil })
	if got := fmt.Sprint(personProps(p)); got != "map[done:1 plan:pro seats:3]" {
		t.Fatalf("after the import: %s", got)
	}
	// properties_at_time folds the events up to a moment with the same rule.
	r := c.get(c.keyAll, fmt.Sprintf("/api/projects/%d/persons/properties_at_time/?distinct_id=u&timestamp=%s", c.projectA.ID, url.QueryEscape("2024-05-15T00:00:00Z")))
	if r.status != 200 || fmt.Sprint(r.json(t)["properties"]) != "map[plan:pro seats:3]" {
		t.Fatalf("properties_at_time: %d %s", r.status, r.body)
	}

	// Off again: a live $set is last ingested wins (it records its moment
	// for later imports, being on a person that keeps moments).
	if r := c.send("PATCH", c.keyAll, path, `{"timestamped_person_properties":false}`); r.status != 200 {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	send(`{"event":"live","distinct_id":"u","timestamp":"2023-01-01T00:00:00Z","$set":{"plan":"live","done":2}}`)
	p = c.waitPerson("u", func(p map[string]any) bool { return personProps(p)["done"] == float64(2) })
	if got := fmt.Sprint(personProps(p)); got != "map[done:2 plan:live seats:3]" {
		t.Fatalf("after a live event: %s", got)
	}

	want := []string{
		`import u {"$ip":"127.0.0.1","$set":{"plan":"pro"},"$set_timestamp":true}`,
		`import u {"$ip":"127.0.0.1","$set":{"plan":"free","seats":1},"$set_timestamp":true}`,
		`import u {"$ip":"127.0.0.1","$set":{"plan":"team","seats":3},"$set_timestamp":true}`,
		`view u {"$ip":"127.0.0.1","path":"/"}`,
		`import u {"$ip":"127.0.0.1","$set":{"done":1},"$set_timestamp":true}`,
		`live u {"$ip":"127.0.0.1","$set":{"done":2,"plan":"live"}}`,
	}
	// Compared as JSON: the stored text keeps the order the event had.
	normal := func(lines []string) string {
		var out []string
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, " ")
			id, props, _ := strings.Cut(rest, " ")
			var m map[string]any
			if err := json.Unmarshal([]byte(props), &m); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			out = append(out, fmt.Sprint(name, " ", id, " ", m))
		}
		return strings.Join(out, "\n")
	}
	if got := storedEvents(t, c.store, c.projectA.ID); normal(got) != normal(want) {
		t.Fatalf("stored events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
