package httpapi

import (
	"context"
	"fmt"
	"testing"
)

// PATCH /api/projects/{id}/ sets the time zone (project:write); an unknown
// zone is a 400 naming timezone and changes nothing.
func TestProjectTimezone(t *testing.T) {
	e := newEnv(t)
	path := fmt.Sprintf("/api/projects/%d/", e.projectA.ID)
	if got := e.get(e.keyAll, path).json(t)["timezone"]; got != "UTC" {
		t.Fatalf("default timezone %v, want UTC", got)
	}
	for _, body := range []string{`{"timezone":"Mars/Olympus"}`, `{"timezone":""}`, `{"timezone":3}`, `{"timezone":"Local"}`} {
		m := wantError(t, e.send("PATCH", e.keyAll, path, body), 400, "validation_error", "invalid_input")
		if m["attr"] != "timezone" {
			t.Fatalf("%s: attr %v", body, m["attr"])
		}
	}
	wantError(t, e.send("PATCH", e.keyAll, path, `{"timezone":`), 400, "validation_error", "invalid_input")
	wantError(t, e.send("PATCH", e.keyRead, path, `{"timezone":"UTC"}`), 403, "authentication_error", "permission_denied")
	wantError(t, e.send("PATCH", e.keyB, path, `{"timezone":"UTC"}`), 404, "invalid_request", "not_found")

	r := e.send("PATCH", e.keyAll, path, `{"timezone":"Europe/Berlin"}`)
	if r.status != 200 || r.json(t)["timezone"] != "Europe/Berlin" {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	if got := e.get(e.keyAll, path).json(t)["timezone"]; got != "Europe/Berlin" {
		t.Fatalf("GET after PATCH: timezone %v", got)
	}
	list := e.get(e.keyAll, "/api/projects/").json(t)["results"].([]any)
	if list[0].(map[string]any)["timezone"] != "Europe/Berlin" {
		t.Fatalf("list: %v", list)
	}
	p, err := e.cp.GetProject(context.Background(), e.projectA.ID)
	if err != nil || p.Timezone != "Europe/Berlin" {
		t.Fatalf("stored: %+v %v", p, err)
	}
}
