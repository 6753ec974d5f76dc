package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/deletion"
)

// activityKinds lists the activity of the person at path, newest first.
func (e *env) activityKinds(path string) []string {
	e.t.Helper()
	var kinds []string
	for _, it := range e.get(e.keyAll, path+"activity/?limit=100").json(e.t)["results"].([]any) {
		kinds = append(kinds, it.(map[string]any)["activity"].(string))
	}
	return kinds
}

// TestBulkDelete: up to 1000 persons by ids (integers or uuids) or by
// distinct_ids, with PostHog's summary; each deletion is logged and, with
// delete_events, queued; keep_person keeps them. Bad input is a 400 naming
// the field, and changes nothing.
func TestBulkDelete(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	bulk := fmt.Sprintf("/api/projects/%d/persons/bulk_delete/", e.projectA.ID)
	p0, q0 := e.personPath("p0")
	p1, q1 := e.personPath("p1")
	p2, _ := e.personPath("p2")
	before, _ := e.listEmails("limit=100")
	many := strings.TrimSuffix(strings.Repeat(`1,`, 1001), ",")
	for _, c := range []struct{ body, attr string }{
		{`{}`, "ids"},
		{`{"ids":[],"distinct_ids":[]}`, "ids"},
		{`{"ids":[1],"distinct_ids":["p0"]}`, "ids"},
		{`{"distinct_ids":["p0"],"delete_recordings":[]}`, "delete_recordings"},
		{`{"ids":[` + many + `]}`, "ids"},
		{`{"ids":["not-an-id"]}`, "ids"},
		{`{"ids":[1.5]}`, "ids"},
		{`{"ids":"1"}`, "ids"},
		{`{"distinct_ids":[1]}`, "distinct_ids"},
		{`{"distinct_ids":["p0"],"delete_events":"maybe"}`, "delete_events"},
		{`{"distinct_ids":["p0"],"keep_person":3}`, "keep_person"},
	} {
		r := e.send("POST", e.keyAll, bulk, c.body)
		if r.status != 400 || r.json(t)["attr"] != c.attr {
			t.Errorf("%.60s: %d %s", c.body, r.status, r.body)
		}
	}
	// PostHog's wording, which its clients and tests match on.
	for body, words := range map[string]string{`{}`: "distinct_ids or ids", `{"ids":[1],"distinct_ids":["p0"]}`: "not both",
		`{"ids":[` + many + `]}`: "You can only pass 1000 ids in one call"} {
		if d := e.send("POST", e.keyAll, bulk, body).json(t)["detail"].(string); !strings.Contains(d, words) {
			t.Errorf("%.40s: detail %q does not say %q", body, d, words)
		}
	}
	wantError(t, e.send("POST", e.keyRead, bulk, `{"distinct_ids":["p0"]}`), 403, "authentication_error", "permission_denied")
	if after, _ := e.listEmails("limit=100"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused requests changed persons: %v -> %v", before, after)
	}

	// By ids: an integer, a uuid, an integer as text, a repeat and an
	// unknown id.
	body := fmt.Sprintf(`{"ids":[%v,%q,"%v",%v,999999],"delete_events":true}`, q0["id"], q1["uuid"], q0["id"], q1["id"])
	r := e.send("POST", e.keyAll, bulk, body)
	if r.status != 202 || strings.TrimSpace(string(r.body)) != `{"persons_found":2,"persons_deleted":2,"events_queued_for_deletion":true,"recordings_queued_for_deletion":false,"deletion_errors":[]}` {
		t.Fatalf("bulk delete by ids: %d %s", r.status, r.body)
	}
	for _, path := range []string{p0, p1} {
		wantError(t, e.get(e.keyAll, path), 404, "invalid_request", "not_found")
		if kinds := e.activityKinds(path); fmt.Sprint(kinds) != "[deleted]" {
			t.Fatalf("activity of %s: %v", path, kinds)
		}
	}
	status := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/deletion_status/", e.projectA.ID)).json(t)
	if status["count"].(float64) != 2 {
		t.Fatalf("deletion requests after bulk delete: %v", status)
	}

	// By distinct ids, keeping the persons: only their events are queued.
	r = e.send("POST", e.keyAll, bulk, `{"distinct_ids":["p2","p2","nobody"],"keep_person":true,"delete_events":"true","delete_recordings":true}`)
	if r.status != 202 || r.json(t)["recordings_queued_for_deletion"] != true || r.json(t)["persons_found"].(float64) != 1 || r.json(t)["persons_deleted"].(float64) != 0 {
		t.Fatalf("bulk delete keep_person: %d %s", r.status, r.body)
	}
	if got := e.get(e.keyAll, p2); got.status != 200 {
		t.Fatalf("kept person: %d", got.status)
	}
	if kinds := e.activityKinds(p2); fmt.Sprint(kinds) != "[delete_events]" {
		t.Fatalf("activity of the kept person: %v", kinds)
	}
	// Nothing found: nothing to do, said so.
	r = e.send("POST", e.keyAll, bulk, `{"distinct_ids":["nobody"],"delete_events":true}`)
	if r.status != 202 || strings.TrimSpace(string(r.body)) != `{"persons_found":0,"persons_deleted":0,"events_queued_for_deletion":false,"recordings_queued_for_deletion":false,"deletion_errors":[]}` {
		t.Fatalf("bulk delete of nobody: %d %s", r.status, r.body)
	}
}

// TestDeleteEventsAndDeletionStatus: delete_events/ queues the deletion of
// a person's events and keeps the person; deletion_status/ shows the
// request pending, then, after the deleter's run, verified with the count
// of events it deleted (PostHog's status and ours).
func TestDeleteEventsAndDeletionStatus(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, p := e.personPath("p4")
	statusPath := fmt.Sprintf("/api/projects/%d/persons/deletion_status/", e.projectA.ID)
	if m := e.get(e.keyRead, statusPath).json(t); m["count"].(float64) != 0 {
		t.Fatalf("deletion status before any request: %v", m)
	}
	wantError(t, e.send("POST", e.keyRead, path+"delete_events/", ""), 403, "authentication_error", "permission_denied")
	wantError(t, e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/999999/delete_events/", e.projectA.ID), ""), 404, "invalid_request", "not_found")
	if r := e.send("POST", e.keyAll, path+"delete_events/", ""); r.status != 202 || len(r.body) != 0 {
		t.Fatalf("delete_events: %d %s", r.status, r.body)
	}
	if r := e.get(e.keyAll, path); r.status != 200 {
		t.Fatalf("the person is gone: %d", r.status)
	}
	item := func(query string) map[string]any {
		t.Helper()
		m := e.get(e.keyRead, statusPath+"?"+query).json(t)
		res := m["results"].([]any)
		if len(res) != 1 || m["count"].(float64) != 1 {
			t.Fatalf("deletion status %s: %v", query, m)
		}
		return res[0].(map[string]any)
	}
	it := item("person_uuid=" + p["uuid"].(string))
	if it["status"] != "pending" || it["stage"] != "pending" || it["delete_verified_at"] != nil || it["events_deleted"] != nil || it["person_id"] != p["id"] {
		t.Fatalf("pending request: %v", it)
	}
	item("status=pending&person_id=" + fmt.Sprint(p["id"]))
	if m := e.get(e.keyRead, statusPath+"?status=completed").json(t); m["count"].(float64) != 0 {
		t.Fatalf("completed before the deleter ran: %v", m)
	}

	runner, err := deletion.New(e.store.Conn(), deletion.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := runner.RunOnce(context.Background()); err != nil || sum.Verified != 1 {
		t.Fatalf("deleter: %+v %v", sum, err)
	}
	// Its two captured events and the command itself, which is stored
	// with the person too.
	it = item("status=completed")
	if it["status"] != "completed" || it["stage"] != "verified" || it["delete_verified_at"] == nil || it["events_deleted"].(float64) != 3 {
		t.Fatalf("verified request: %v", it)
	}
	m := e.get(e.keyRead, statusPath).json(t)
	if fmt.Sprint(m["counts"]) != "map[pending:0 running:0 verified:1]" {
		t.Fatalf("counts: %v", m["counts"])
	}
	for _, q := range []string{"status=done", "person_uuid=nope", "person_id=-1", "limit=0"} {
		if r := e.get(e.keyRead, statusPath+"?"+q); r.status != 400 {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
	// Another organization's project is not found.
	wantError(t, e.get(e.keyB, statusPath), 404, "invalid_request", "not_found")
}

// TestResetPersonDistinctID: the id leaves its person, whose answer shows
// its other ids; the id's next event starts a fresh person; the change is
// logged, and a replay of the log into empty tables gives the same rows.
func TestResetPersonDistinctID(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	reset := fmt.Sprintf("/api/projects/%d/persons/reset_person_distinct_id/", e.projectA.ID)
	const anon = "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	path, p := e.personPath("p4")
	for _, c := range []struct{ body, attr string }{
		{`{}`, "distinct_id"}, {`{"distinct_id":""}`, "distinct_id"}, {`{"distinct_id":7}`, "distinct_id"},
		{`[1]`, "body"},
	} {
		r := e.send("POST", e.keyAll, reset, c.body)
		if r.status != 400 || r.json(t)["attr"] != c.attr {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	wantError(t, e.send("POST", e.keyRead, reset, `{"distinct_id":"p4"}`), 403, "authentication_error", "permission_denied")
	if r := e.send("POST", e.keyAll, reset, `{"distinct_id":"nobody"}`); r.status != 202 || strings.TrimSpace(string(r.body)) != `{"success":true,"detached":false,"person":null}` {
		t.Fatalf("reset of an unknown id: %d %s", r.status, r.body)
	}
	// A person's only id stays: 202, not detached, the person unchanged.
	p0Path, p0 := e.personPath("p0")
	if r := e.send("POST", e.keyAll, reset, `{"distinct_id":"p0"}`); r.status != 202 || r.json(t)["detached"] != false ||
		r.json(t)["person"].(map[string]any)["id"] != p0["id"] || !strings.Contains(r.json(t)["detail"].(string), "only distinct id") {
		t.Fatalf("reset of an only id: %d %s", r.status, r.body)
	}
	if kinds := e.activityKinds(p0Path); len(kinds) != 0 {
		t.Fatalf("a reset that detached nothing was logged: %v", kinds)
	}

	r := e.send("POST", e.keyAll, reset, `{"distinct_id":"`+anon+`"}`)
	m := r.json(t)
	after, _ := m["person"].(map[string]any)
	if r.status != 202 || m["detached"] != true || after == nil || fmt.Sprint(after["distinct_ids"]) != "[p4]" || after["id"] != p["id"] {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	kinds := e.activityKinds(path)
	if len(kinds) == 0 || kinds[0] != "reset_person_distinct_id" {
		t.Fatalf("activity: %v", kinds)
	}
	e.ingestRunning(`{"event":"e","distinct_id":"` + anon + `","$set":{"fresh":true}}`)
	freshPath, fresh := e.personPath(anon)
	if freshPath == path || fmt.Sprint(fresh["distinct_ids"]) != "["+anon+"]" || fmt.Sprint(fresh["properties"]) != "map[fresh:true]" {
		t.Fatalf("the reset id's next event: %s %v", freshPath, fresh)
	}
	if again := e.get(e.keyAll, path).json(t); fmt.Sprint(again["distinct_ids"]) != "[p4]" || again["properties"].(map[string]any)["email"] != "four@acme.io" {
		t.Fatalf("the former owner: %v", again)
	}

	// PostHog's flow: delete the person, then reset its id. The id is
	// owned by nobody: 202, nothing to do, nothing recorded.
	if r := e.do("DELETE", e.keyAll, freshPath); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.send("POST", e.keyAll, reset, `{"distinct_id":"`+anon+`"}`); r.status != 202 || strings.TrimSpace(string(r.body)) != `{"success":true,"detached":false,"person":null}` {
		t.Fatalf("reset after delete: %d %s", r.status, r.body)
	}

	e.wantReplayGivesTheSameTables()
}

// TestBatchByDistinctIDs: a map from each distinct id to its person (ids
// of nobody absent), by GET with a JSON list or POST with a body; at most
// 200 ids; bad input is a 400; CSV gives a row per id found.
func TestBatchByDistinctIDs(t *testing.T) {
	e := newEnv(t)
	seed(e)
	batch := fmt.Sprintf("/api/projects/%d/persons/batch_by_distinct_ids/", e.projectA.ID)
	ids := func(m map[string]any) []string {
		var out []string
		for d, p := range m["results"].(map[string]any) {
			out = append(out, d+"="+p.(map[string]any)["name"].(string))
		}
		sort.Strings(out)
		return out
	}
	const anon = "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	want := "[0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00=four@acme.io p0=zero@acme.io p4=four@acme.io]"
	r := e.get(e.keyRead, batch+"?distinct_ids="+url.QueryEscape(`["p0","p4","`+anon+`","nobody","p0"]`))
	if r.status != 200 || fmt.Sprint(ids(r.json(t))) != want {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	r = e.send("POST", e.keyRead, batch, `{"distinct_ids":["p0","p4","`+anon+`","nobody"]}`)
	if r.status != 200 || fmt.Sprint(ids(r.json(t))) != want {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	for _, q := range []string{"", "?distinct_ids=[]"} {
		if r := e.get(e.keyRead, batch+q); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"results":{}}` {
			t.Errorf("%q: %d %s", q, r.status, r.body)
		}
	}
	many := `[` + strings.TrimSuffix(strings.Repeat(`"x",`, MaxBatchLookup+1), ",") + `]`
	for _, q := range []string{`[p0]`, `"p0"`, `[1]`, `{"a":1}`, many} {
		r := e.get(e.keyRead, batch+"?distinct_ids="+url.QueryEscape(q))
		if r.status != 400 || r.json(t)["attr"] != "distinct_ids" {
			t.Errorf("%.40s: %d %s", q, r.status, r.body)
		}
	}
	if r := e.send("POST", e.keyRead, batch, `{"distinct_ids":"p0"}`); r.status != 400 {
		t.Errorf("POST with a string: %d %s", r.status, r.body)
	}
	r = e.get(e.keyRead, batch+"?format=csv&distinct_ids="+url.QueryEscape(`["p4","p0","p4","nobody"]`))
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\r\n")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || len(lines) != 3 ||
		!strings.HasPrefix(lines[0], "distinct_id,") || !strings.HasPrefix(lines[1], "p4,") || !strings.HasPrefix(lines[2], "p0,") {
		t.Fatalf("CSV: %d %q", r.status, r.body)
	}
}

// TestBatchByUUIDs: PostHog's batch_by_uuids: a map from each uuid (in
// canonical form) to its live person, uuids of nobody (or of a deleted
// person) absent; at most 200; a string that is not a uuid is a 400 in
// PostHog's words; GET with a JSON list and CSV as batch_by_distinct_ids.
func TestBatchByUUIDs(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	batch := fmt.Sprintf("/api/projects/%d/persons/batch_by_uuids/", e.projectA.ID)
	_, p0 := e.personPath("p0")
	p4Path, p4 := e.personPath("p4")
	u0, u4 := p0["uuid"].(string), p4["uuid"].(string)
	const nobody = "00000000-0000-4000-8000-000000000000"
	names := func(r response) string {
		t.Helper()
		var out []string
		for u, p := range r.json(t)["results"].(map[string]any) {
			out = append(out, u+"="+p.(map[string]any)["name"].(string))
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	want := fmt.Sprint(sortedStrings(u0+"=zero@acme.io", u4+"=four@acme.io"))
	body := fmt.Sprintf(`{"uuids":[%q,%q,%q,%q]}`, u0, strings.ToUpper(u4), nobody, u0)
	if r := e.send("POST", e.keyRead, batch, body); r.status != 200 || names(r) != want {
		t.Fatalf("POST: %d %s, want %s", r.status, r.body, want)
	}
	if r := e.get(e.keyRead, batch+"?uuids="+url.QueryEscape(fmt.Sprintf(`[%q,%q]`, u4, u0))); r.status != 200 || names(r) != want {
		t.Fatalf("GET: %d %s", r.status, r.body)
	}
	if r := e.send("POST", e.keyRead, batch, `{"uuids":[]}`); r.status != 200 || strings.TrimSpace(string(r.body)) != `{"results":{}}` {
		t.Fatalf("no uuids: %d %s", r.status, r.body)
	}
	many := `[` + strings.TrimSuffix(strings.Repeat(`"`+nobody+`",`, MaxBatchLookup+1), ",") + `]`
	for _, b := range []string{`{"uuids":["p0"]}`, `{"uuids":[1]}`, `{"uuids":"` + u0 + `"}`, `{"uuids":` + many + `}`} {
		r := e.send("POST", e.keyRead, batch, b)
		if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "uuids" {
			t.Errorf("%.40s: attr %v", b, m["attr"])
		}
	}
	if d := e.send("POST", e.keyRead, batch, `{"uuids":["p0"]}`).json(t)["detail"].(string); !strings.HasPrefix(d, "One or more UUIDs are invalid") {
		t.Errorf("detail %q is not in PostHog's words", d)
	}
	wantError(t, e.send("POST", e.keyB, batch, body), 404, "invalid_request", "not_found")

	r := e.send("POST", e.keyRead, batch+"?format=csv", fmt.Sprintf(`{"uuids":[%q,%q]}`, strings.ToUpper(u4), u0))
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\r\n")
	// Columns sorted: person.* then uuid, canonical as in JSON.
	if r.status != 200 || len(lines) != 3 || !strings.HasSuffix(lines[0], ",uuid") ||
		!strings.HasSuffix(lines[1], ","+u4) || !strings.HasSuffix(lines[2], ","+u0) {
		t.Fatalf("CSV: %d %q", r.status, r.body)
	}

	// A deleted person's uuid names nobody.
	if r := e.do("DELETE", e.keyAll, p4Path); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.send("POST", e.keyRead, batch, body); r.status != 200 || names(r) != fmt.Sprint([]string{u0 + "=zero@acme.io"}) {
		t.Fatalf("after delete: %d %s", r.status, r.body)
	}
}

func sortedStrings(s ...string) []string {
	sort.Strings(s)
	return s
}
