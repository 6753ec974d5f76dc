package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// personPath returns the path of the person owning distinctID in project A.
func (e *env) personPath(distinctID string) (string, map[string]any) {
	e.t.Helper()
	m := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=%s", e.projectA.ID, distinctID)).json(e.t)
	res := m["results"].([]any)
	if len(res) != 1 {
		e.t.Fatalf("persons with %s: %v", distinctID, m)
	}
	p := res[0].(map[string]any)
	return fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, int(p["id"].(float64))), p
}

func TestWritesAreVisibleWhenTheyReturn(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, _ := e.personPath("p1")

	r := e.send("PATCH", e.keyAll, path, `{"properties":{"plan":"enterprise","seats":12,"tags":["a","b"]}}`)
	p := r.json(t)
	props := p["properties"].(map[string]any)
	if r.status != 200 || props["plan"] != "enterprise" || props["seats"].(float64) != 12 || props["email"] != "one@Acme.io" {
		t.Fatalf("PATCH: %d %v", r.status, p)
	}
	if got := e.get(e.keyAll, path).json(t)["properties"].(map[string]any)["plan"]; got != "enterprise" {
		t.Fatalf("GET after PATCH: %v", got)
	}

	r = e.send("POST", e.keyAll, path+"update_property/", `{"key":"nested","value":{"x":[1,true,null]}}`)
	if r.status != 200 || fmt.Sprint(r.json(t)["properties"].(map[string]any)["nested"]) != "map[x:[1 true <nil>]]" {
		t.Fatalf("update_property body: %d %s", r.status, r.body)
	}
	r = e.send("POST", e.keyAll, path+"update_property/?key=plan&value=free", "")
	if r.status != 200 || r.json(t)["properties"].(map[string]any)["plan"] != "free" {
		t.Fatalf("update_property query: %d %s", r.status, r.body)
	}
	r = e.send("POST", e.keyAll, path+"delete_property/", `{"$unset":"seats"}`)
	if _, still := r.json(t)["properties"].(map[string]any)["seats"]; r.status != 200 || still {
		t.Fatalf("delete_property: %d %s", r.status, r.body)
	}

	// Bad input: 400 with the field, nothing changed.
	before := string(e.get(e.keyAll, path).body)
	checks := []struct{ method, path, body, attr string }{
		{"PATCH", path, `{}`, "properties"},
		{"PATCH", path, `{"properties":[1]}`, "properties"},
		{"POST", path + "update_property/", `{"value":1}`, "key"},
		{"POST", path + "update_property/", `{"key":"k"}`, "value"},
		{"POST", path + "delete_property/", `{}`, "$unset"},
		{"POST", path + "split/", `{"main_distinct_id":"nobody"}`, "main_distinct_id"},
	}
	for _, c := range checks {
		r := e.send(c.method, e.keyAll, c.path, c.body)
		if r.status != 400 || r.json(t)["attr"] != c.attr {
			t.Errorf("%s %s %s: %d %s", c.method, c.path, c.body, r.status, r.body)
		}
	}
	if r := e.send("PATCH", e.keyAll, path, `{"properties":`); r.status != 400 {
		t.Errorf("malformed JSON: %d", r.status)
	}
	if after := string(e.get(e.keyAll, path).body); after != before {
		t.Fatalf("bad input changed the person:\n%s\n%s", before, after)
	}
	wantError(t, e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/99999/", e.projectA.ID), `{"properties":{}}`), 404, "invalid_request", "not_found")
	m := wantError(t, e.send("PATCH", e.keyRead, path, `{"properties":{"a":1}}`), 403, "authentication_error", "permission_denied")
	if !strings.Contains(m["detail"].(string), "person:write") {
		t.Fatalf("detail: %v", m["detail"])
	}
}

func TestDeleteAndReuse(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, p := e.personPath("p4")
	wantError(t, e.do("DELETE", e.keyAll, path+"?delete_events=maybe"), 400, "validation_error", "invalid_input")
	r := e.do("DELETE", e.keyAll, path+"?delete_events=true")
	if r.status != 204 || len(r.body) != 0 {
		t.Fatalf("DELETE: %d %q", r.status, r.body)
	}
	wantError(t, e.get(e.keyAll, path), 404, "invalid_request", "not_found")
	wantError(t, e.do("DELETE", e.keyAll, path), 404, "invalid_request", "not_found")
	if _, m := e.listEmails("distinct_id=p4"); m["count"].(float64) != 0 {
		t.Fatalf("deleted person listed: %v", m)
	}
	// The request to delete its events is queued, once.
	var status string
	var n uint64
	if err := e.store.Conn().QueryRow(context.Background(),
		"SELECT any(status), count() FROM person_deletion_requests FINAL WHERE project_id = ? AND person_id = ?",
		e.projectA.ID, uint64(p["id"].(float64))).Scan(&status, &n); err != nil || status != "pending" || n != 1 {
		t.Fatalf("deletion request: %q %d %v", status, n, err)
	}
	// A distinct id of the deleted person, seen again, is a new person.
	e.ingestRunning(`{"event":"e","distinct_id":"p4","$set":{"back":true}}`)
	newPath, np := e.personPath("p4")
	if newPath == path || np["properties"].(map[string]any)["back"] != true || len(np["distinct_ids"].([]any)) != 1 {
		t.Fatalf("reused id: %s %v", newPath, np)
	}
}

// ingestRunning publishes events to project A for the running ingester and
// waits until a read shows the last one's person.
func (e *env) ingestRunning(events ...string) {
	e.t.Helper()
	seq := uint64(0)
	for _, ev := range events {
		r := e.publishRaw(e.projectA.ID, ev)
		seq = r
	}
	if err := e.waitSeq(seq); err != nil {
		e.t.Fatal(err)
	}
}

// personWithThreeIDs makes a person of distinct ids main, anon-1 and
// other, starts the ingester, and returns the person's path and JSON.
func (e *env) personWithThreeIDs() (string, map[string]any) {
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"main","$set":{"email":"m@x.io"}}`,
		`{"event":"$identify","distinct_id":"main","properties":{"$anon_distinct_id":"anon-1"}}`,
		`{"event":"$create_alias","distinct_id":"main","properties":{"alias":"other"}}`)
	e.startIngester()
	return e.personPath("main")
}

func TestSplit(t *testing.T) {
	e := newEnv(t)
	path, _ := e.personWithThreeIDs()
	r := e.send("POST", e.keyAll, path+"split/", `{"main_distinct_id":"main"}`)
	m := r.json(t)
	if r.status != 200 || len(m["created"].([]any)) != 2 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	if ids := m["person"].(map[string]any)["distinct_ids"].([]any); len(ids) != 1 || ids[0] != "main" {
		t.Fatalf("person after split: %v", m["person"])
	}
	e.wantSplitOff(path, "anon-1", "other")
}

func TestPersonActivity(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, p0 := e.personPath("p0")
	other, _ := e.personPath("p1")
	for _, body := range []string{`{"properties":{"plan":"pro"}}`, `{"properties":{"n":6}}`} {
		if r := e.send("PATCH", e.keyAll, path, body); r.status != 200 {
			t.Fatalf("PATCH: %d %s", r.status, r.body)
		}
	}
	e.send("POST", e.keyAll, path+"delete_property/?$unset=signup", "")
	e.send("PATCH", e.keyAll, other, `{"properties":{"x":1}}`)

	m := e.get(e.keyAll, path+"activity/?limit=2").json(t)
	res := m["results"].([]any)
	if m["total_count"].(float64) != 3 || len(res) != 2 || m["next"] == nil || m["previous"] != nil {
		t.Fatalf("activity page: %v", m)
	}
	first := res[0].(map[string]any)
	if first["activity"] != "delete_property" || first["scope"] != "Person" || first["user"].(map[string]any)["first_name"] != "all" {
		t.Fatalf("newest entry: %v", first)
	}
	change := res[1].(map[string]any)["detail"].(map[string]any)["changes"].([]any)[0].(map[string]any)
	if fmt.Sprint(change["before"], change["after"]) != "map[n:5] map[n:6]" || change["field"] != "properties" {
		t.Fatalf("change: %v", change)
	}
	all := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/activity/", e.projectA.ID)).json(t)
	if all["total_count"].(float64) != 4 {
		t.Fatalf("project activity: %v", all["total_count"])
	}
	// Deleting is recorded, and a deleted person's log stays readable. As
	// in PostHog, the entry has no changes (null) and names the person by
	// uuid: its display name is gone with it.
	e.do("DELETE", e.keyAll, path)
	m = e.get(e.keyAll, path+"activity/").json(t)
	del := m["results"].([]any)[0].(map[string]any)
	detail := del["detail"].(map[string]any)
	if changes, ok := detail["changes"]; del["activity"] != "deleted" || !ok || changes != nil || detail["name"] != p0["uuid"] ||
		del["item_id"] != fmt.Sprint(p0["id"]) {
		t.Fatalf("after delete: %v", del)
	}
	wantError(t, e.get(e.keyRead, path+"activity/"), 403, "authentication_error", "permission_denied")
}

func TestWriteWhenTheLogOrTheIngesterIsDown(t *testing.T) {
	e := newEnvWait(t, 300*time.Millisecond)
	seed(e)
	path, _ := e.personPath("p2")
	// No ingester running: the change is recorded but not yet visible.
	r := e.send("PATCH", e.keyAll, path, `{"properties":{"late":true}}`)
	if r.status != 202 || r.json(t)["code"] != "not_yet_visible" {
		t.Fatalf("without ingester: %d %s", r.status, r.body)
	}
	if _, ok := e.get(e.keyAll, path).json(t)["properties"].(map[string]any)["late"]; ok {
		t.Fatal("a pending write claimed visible")
	}
	// JetStream unreachable: 503, nothing recorded.
	e.nats.Server.Shutdown()
	r = e.send("PATCH", e.keyAll, path, `{"properties":{"lost":true}}`)
	if r.status != 503 || !strings.Contains(r.json(t)["detail"].(string), "nothing was changed") {
		t.Fatalf("without JetStream: %d %s", r.status, r.body)
	}
}
