package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/deletion"
)

// publishEvent publishes a captured event of distinct id did at ts (RFC
// 3339) with properties props (a JSON object) and returns its sequence.
func (e *env) publishEvent(did, name, ts, props string) uint64 {
	e.t.Helper()
	return e.publishAt(ts, fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, did, props))
}

// behaviour lists the project's captured events (not the API's commands)
// as "distinct_id event timestamp", sorted.
func (e *env) behaviour() []string {
	e.t.Helper()
	rows, err := e.store.Conn().Query(context.Background(), `SELECT concat(distinct_id, ' ', event, ' ', toString(timestamp)) AS s
		FROM events WHERE project_id = ? AND visitParamHas(properties, '$actor') = 0 ORDER BY s`, e.projectA.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// hourlyDrift lists the keys of events_hourly whose sum is not the number
// of captured events of the key in events, as "key: sum != count".
func (e *env) hourlyDrift() []string {
	e.t.Helper()
	rows, err := e.store.Conn().Query(context.Background(), `SELECT concat(event, ' ', toString(hour), ' ', distinct_id, ' ', toString(person_id)) AS k,
			sum(h) AS hs, sum(c) AS cs FROM (
			SELECT event, hour, distinct_id, person_id, toInt64(events) AS h, toInt64(0) AS c FROM events_hourly WHERE project_id = ?
			UNION ALL
			SELECT event, toStartOfHour(timestamp) AS hour, distinct_id, person_id, toInt64(0) AS h, toInt64(1) AS c FROM events
			WHERE project_id = ? AND visitParamHas(properties, '$actor') = 0
		) GROUP BY k HAVING hs != cs ORDER BY k`, e.projectA.ID, e.projectA.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		var h, c int64
		if err := rows.Scan(&k, &h, &c); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s: %d != %d", k, h, c))
	}
	return out
}

// TestFilteredEventDeletion: through the API, the ingester and the
// deleter, a person's events in a time range, a person's events by name
// and the project's events by property are deleted, and nothing else:
// not the events outside the filters, not an event captured after the
// request; the dry run's count is what is deleted; the hourly counts
// agree with the events left; deletion_status/ and the activity show the
// requests.
func TestFilteredEventDeletion(t *testing.T) {
	e := newEnv(t)
	e.startIngester()
	var last uint64
	for _, ev := range [][4]string{
		{"u1", "view", "2026-03-01T10:00:00Z", `{"plan":"free"}`},
		{"u1", "view", "2026-03-02T00:00:00Z", `{"plan":"free"}`},
		{"u1", "click", "2026-03-02T23:59:59.999Z", `{}`},
		{"u1", "view", "2026-03-03T00:00:00Z", `{"plan":"free"}`},
		{"u1", "view", "2026-03-04T10:00:00Z", `{"plan":"pro"}`},
		{"u2", "view", "2026-03-02T10:30:00Z", `{"plan":"pro","n":3}`},
		{"u2", "buy", "2026-03-02T10:40:00Z", `{"plan":"free"}`},
		{"u2", "view", "2026-03-02T10:50:00Z", `{"plan":"free"}`},
	} {
		last = e.publishEvent(ev[0], ev[1], ev[2], ev[3])
	}
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	u1Path, u1 := e.personPath("u1")
	u2Path, _ := e.personPath("u2")
	before := e.behaviour()
	if len(before) != 8 {
		t.Fatalf("captured: %v", before)
	}

	// Hostile and malformed input: 400 naming the field, nothing queued.
	evPath := fmt.Sprintf("/api/projects/%d/events/delete/", e.projectA.ID)
	bulk := fmt.Sprintf("/api/projects/%d/persons/bulk_delete/", e.projectA.ID)
	names := make([]string, deletion.MaxFilterEvents+1)
	for i := range names {
		names[i] = fmt.Sprintf("%q", fmt.Sprint("e", i))
	}
	for _, c := range []struct{ path, body, attr string }{
		{u1Path + "delete_events/", `{"after":"yesterday"}`, "after"},
		{u1Path + "delete_events/", `{"after":"2026-13-01"}`, "after"},
		{u1Path + "delete_events/", `{"before":7}`, "before"},
		{u1Path + "delete_events/", `{"after":"2026-03-02","before":"2026-03-02"}`, "before"},
		{u1Path + "delete_events/", `{"after":"2026-03-03","before":"2026-03-02"}`, "before"},
		{u1Path + "delete_events/", `{"after":"1969-12-31"}`, "after"},
		{u1Path + "delete_events/", `{"event":""}`, "event"},
		{u1Path + "delete_events/", `{"event":[]}`, "event"},
		{u1Path + "delete_events/", `{"event":["view",""]}`, "event"},
		{u1Path + "delete_events/", `{"event":{"a":1}}`, "event"},
		{u1Path + "delete_events/", `{"event":[` + strings.Join(names, ",") + `]}`, "event"},
		{u1Path + "delete_events/", `{"properties":[{"key":"plan","value":"pro"}]}`, "properties"},
		{u1Path + "delete_events/", `[1]`, "body"},
		{bulk, `{"distinct_ids":["u1"],"event":"view"}`, "delete_events"},
		{bulk, `{"distinct_ids":["u1"],"delete_events":true,"before":"x"}`, "before"},
		{evPath, `{}`, "properties"},
		{evPath, `{"properties":[]}`, "properties"},
		{evPath, `{"dry_run":true}`, "properties"},
		{evPath, `{"event":"view","dry_run":"yes"}`, "dry_run"},
		{evPath, `{"properties":[{"key":"plan","value":"pro","type":"person"}]}`, "properties"},
		{evPath, `{"properties":[{"key":"plan","value":"pro","type":"cohort"}]}`, "properties"},
		{evPath, `{"properties":[{"key":"plan","operator":"no_such_op","value":1}]}`, "properties"},
		{evPath, `{"properties":[{"value":1}]}`, "properties"},
		{evPath, `{"properties":"[{"}`, "properties"},
		{evPath, `{"properties":[{"key":"a","operator":"regex","value":"("}]}`, "properties"},
		{evPath, `{"properties":7}`, "properties"},
		// Groups with nothing in them constrain nothing (PostHog's "no
		// filter"): refused as the empty filter they are.
		{evPath, `{"properties":{"type":"AND","values":[]}}`, "properties"},
		{evPath, `{"properties":{"values":[]}}`, "properties"},
		{evPath, `{"properties":"[ ]"}`, "properties"},
		{evPath, `{"properties":[{"type":"OR","values":[]}]}`, "properties"},
		{evPath, `{"properties":{"type":"AND","values":[{"type":"OR","values":[]}]},"dry_run":true}`, "properties"},
	} {
		r := e.send("POST", e.keyAll, c.path, c.body)
		if r.status != 400 || r.json(t)["attr"] != c.attr || r.json(t)["type"] != "validation_error" || r.json(t)["code"] == nil || r.json(t)["detail"] == nil {
			t.Errorf("%s %s: %d %s", c.path, c.body, r.status, r.body)
		}
	}
	// The project-wide route needs the project's write scope too.
	wantError(t, e.send("POST", e.keyRead, evPath, `{"event":"view","dry_run":true}`), 403, "authentication_error", "permission_denied")

	// A person's events in a day: after inclusive, before exclusive.
	if r := e.send("POST", e.keyAll, u1Path+"delete_events/", `{"after":"2026-03-02","before":"2026-03-03T00:00:00Z"}`); r.status != 202 {
		t.Fatalf("range delete: %d %s", r.status, r.body)
	}
	// A person's events by name (bulk_delete, the person kept).
	if r := e.send("POST", e.keyAll, bulk, `{"distinct_ids":["u2"],"delete_events":true,"keep_person":true,"event":["buy"]}`); r.status != 202 {
		t.Fatalf("name delete: %d %s", r.status, r.body)
	}
	// The project's events by property: the dry run counts, then queues.
	prop := `"properties":[{"key":"plan","value":"pro","type":"event"}]`
	dry := e.send("POST", e.keyAll, evPath, `{`+prop+`,"dry_run":true}`)
	if dry.status != 200 || dry.json(t)["count"].(float64) != 2 {
		t.Fatalf("dry run: %d %s", dry.status, dry.body)
	}
	if after := e.behaviour(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the dry run or a request deleted events: %v", after)
	}
	r := e.send("POST", e.keyAll, evPath, `{`+prop+`}`)
	if r.status != 202 || r.json(t)["request_id"] == nil {
		t.Fatalf("property delete: %d %s", r.status, r.body)
	}
	propID := r.json(t)["request_id"].(string)
	// Captured after the requests: higher sequences, kept.
	last = e.publishEvent("u2", "view", "2026-03-02T10:55:00Z", `{"plan":"pro"}`)
	last = max(last, e.publishEvent("u1", "click", "2026-03-02T12:00:00Z", `{}`))
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}

	statusPath := fmt.Sprintf("/api/projects/%d/persons/deletion_status/", e.projectA.ID)
	dels := e.get(e.keyRead, statusPath).json(t)["event_deletions"].(map[string]any)
	if dels["count"].(float64) != 3 {
		t.Fatalf("event deletions queued: %v", dels)
	}
	if got := e.lastSeen("u1"); got != "2026-03-04T10:00:00.000Z" {
		t.Fatalf("u1's last_seen_at before the run: %s", got)
	}
	runner, err := deletion.New(e.store.Conn(), deletion.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := runner.RunOnce(context.Background())
	if err != nil || sum.Verified != 3 || sum.Failed != 0 {
		t.Fatalf("deleter: %+v %v", sum, err)
	}
	// The last seen times are those of the events left: u1's newest
	// (plan pro) is gone; u2's newest was captured after the requests.
	for path, want := range map[string]string{u1Path: "2026-03-03T00:00:00.000Z", u2Path: "2026-03-02T10:55:00.000Z"} {
		if got := e.get(e.keyRead, path).json(t)["last_seen_at"]; got != want {
			t.Errorf("%s last_seen_at after the run: %v, want %s", path, got, want)
		}
	}
	want := []string{
		"u1 click 2026-03-02 12:00:00", // captured after the request
		"u1 view 2026-03-01 10:00:00",
		"u1 view 2026-03-03 00:00:00",
		"u2 view 2026-03-02 10:50:00",
		"u2 view 2026-03-02 10:55:00", // captured after the request
	}
	if got := e.behaviour(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events left:\n got %v\nwant %v", got, want)
	}
	if d := e.hourlyDrift(); len(d) != 0 {
		t.Fatalf("events_hourly disagrees with events: %v", d)
	}
	// Trends' actors of a whole UTC day read events_hourly
	// (docs/analysis.md): they count the events left.
	for _, c := range []struct {
		name, ids, vals string
	}{{"view", "[u2]", "[2]"}, {"click", "[u1]", "[1]"}, {"buy", "[]", "[]"}} {
		series := `[{"id":"` + c.name + `","type":"events","order":0}]`
		ids, vals, _ := e.actors("trends", params("events", series, "date_from", "2026-03-02", "date_to", "2026-03-02",
			"entity_id", c.name, "entity_type", "events"))
		if fmt.Sprint(ids) != c.ids || fmt.Sprint(vals) != c.vals {
			t.Errorf("trends of %s on 03-02: %v %v, want %s %s", c.name, ids, vals, c.ids, c.vals)
		}
	}
	var copies uint64
	if err := e.store.Conn().QueryRow(context.Background(), "SELECT count() FROM events_by_distinct_id WHERE project_id = ?", e.projectA.ID).Scan(&copies); err != nil || copies != uint64(len(want)) {
		t.Fatalf("copies left: %d %v", copies, err)
	}

	// deletion_status/: every request verified, with its filter and count.
	dels = e.get(e.keyRead, statusPath+"?status=completed").json(t)["event_deletions"].(map[string]any)
	byID := map[string]map[string]any{}
	for _, it := range dels["results"].([]any) {
		m := it.(map[string]any)
		byID[m["request_id"].(string)] = m
		if m["stage"] != "verified" || m["status"] != "completed" || m["delete_verified_at"] == nil {
			t.Errorf("request not verified: %v", m)
		}
	}
	if len(byID) != 3 {
		t.Fatalf("completed event deletions: %v", dels)
	}
	pr := byID[propID]
	if pr == nil || pr["events_deleted"].(float64) != dry.json(t)["count"].(float64) || pr["person_id"] != nil ||
		!strings.Contains(fmt.Sprint(pr["filter"]), "plan") {
		t.Fatalf("the property request: %v", pr)
	}
	perPerson := e.get(e.keyRead, statusPath+"?person_id="+fmt.Sprint(u1["id"])).json(t)["event_deletions"].(map[string]any)
	res := perPerson["results"].([]any)
	if len(res) != 1 || res[0].(map[string]any)["events_deleted"].(float64) != 2 ||
		fmt.Sprint(res[0].(map[string]any)["filter"]) != "map[after:2026-03-02T00:00:00Z before:2026-03-03T00:00:00Z]" {
		t.Fatalf("u1's request: %v", perPerson)
	}
	for _, p := range []string{u1Path, u2Path} {
		if kinds := e.activityKinds(p); len(kinds) == 0 || kinds[0] != "delete_events" {
			t.Errorf("activity of %s: %v", p, kinds)
		}
	}
	// A second run finds nothing to do.
	if sum, err := runner.RunOnce(context.Background()); err != nil || sum.Taken != 0 {
		t.Fatalf("second run: %+v %v", sum, err)
	}

	// bulk_delete without keep_person: the person goes, and of its events
	// only those the filter matches.
	last = e.publishEvent("u3", "view", "2026-04-01T10:00:00Z", `{}`)
	last = max(last, e.publishEvent("u3", "click", "2026-04-01T11:00:00Z", `{}`))
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	u3Path, _ := e.personPath("u3")
	if r := e.send("POST", e.keyAll, bulk, `{"distinct_ids":["u3"],"delete_events":true,"event":"click"}`); r.status != 202 || r.json(t)["persons_deleted"].(float64) != 1 {
		t.Fatalf("bulk delete with a filter: %d %s", r.status, r.body)
	}
	wantError(t, e.get(e.keyAll, u3Path), 404, "invalid_request", "not_found")
	if sum, err := runner.RunOnce(context.Background()); err != nil || sum.Verified != 1 {
		t.Fatalf("third run: %+v %v", sum, err)
	}
	want = append(want, "u3 view 2026-04-01 10:00:00")
	if got := e.behaviour(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events left:\n got %v\nwant %v", got, want)
	}
	if d := e.hourlyDrift(); len(d) != 0 {
		t.Fatalf("events_hourly disagrees with events: %v", d)
	}
}
