package httpapi

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/stream"
)

// publishAt publishes an envelope to project A at the given timestamp
// (RFC 3339 text) and returns its stream sequence.
func (e *env) publishAt(ts, ev string) uint64 {
	e.t.Helper()
	id := uuid.NewString()
	body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, ts, strings.TrimPrefix(ev, "{"))
	ack, err := stream.Publish(context.Background(), e.nats.JS, e.projectA.ID, id, []byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// lastSeen is the last_seen_at of the person owning distinctID, "null"
// when it is null.
func (e *env) lastSeen(distinctID string) string {
	e.t.Helper()
	_, p := e.personPath(distinctID)
	if s, ok := p["last_seen_at"].(string); ok {
		return s
	}
	if v, ok := p["last_seen_at"]; !ok || v != nil {
		e.t.Fatalf("person of %s: last_seen_at %v (present %v), want a string or null", distinctID, v, ok)
	}
	return "null"
}

// TestLastSeenAt: a person's last_seen_at is the time of its newest
// behaviour event over its current distinct ids, to the millisecond: an
// older event folded later does not lower it, the API's own commands do
// not count, an id split off takes its events' time along (none: null),
// a merge gives the newest of both; retrieve, the batch routes and CSV
// show the same; a replay of the log gives the same table; once the
// deleter has deleted a person's events, it is null again, and a new
// event sets it.
func TestLastSeenAt(t *testing.T) {
	e := newEnv(t)
	e.startIngester()
	var last uint64
	for _, m := range []struct{ ts, ev string }{
		{"2026-03-05T10:00:00.900Z", `{"event":"e","distinct_id":"ls-a","$set":{"email":"a@ls.io"}}`},
		{"2026-03-01T00:00:00Z", `{"event":"$identify","distinct_id":"ls-a","properties":{"$anon_distinct_id":"ls-anon"}}`},
		{"2026-03-06T08:00:00.123Z", `{"event":"$pageview","distinct_id":"ls-anon"}`},
		{"2026-03-02T00:00:00Z", `{"event":"$pageview","distinct_id":"ls-a"}`}, // older, folded after
		{"2026-03-08T00:00:00.5Z", `{"event":"e","distinct_id":"ls-b"}`},
		{"2026-03-03T00:00:00Z", `{"event":"$create_alias","distinct_id":"ls-c","properties":{"alias":"ls-c2"}}`},
		{"2026-02-01T00:00:00.001Z", `{"event":"e","distinct_id":"ls-d"}`},
		{"2026-02-02T00:00:00.002Z", `{"event":"e","distinct_id":"ls-d"}`},
	} {
		last = e.publishAt(m.ts, m.ev)
	}
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	want := func(id, seen string) {
		t.Helper()
		if got := e.lastSeen(id); got != seen {
			t.Fatalf("last_seen_at of %s's person: %s, want %s", id, got, seen)
		}
	}
	want("ls-a", "2026-03-06T08:00:00.123Z")
	want("ls-b", "2026-03-08T00:00:00.500Z")
	want("ls-c", "2026-03-03T00:00:00.000Z")

	// The API's commands (a PATCH now, months after) are not behaviour.
	bPath, b := e.personPath("ls-b")
	if r := e.send("PATCH", e.keyAll, bPath, `{"properties":{"plan":"pro"}}`); r.status != 200 || r.json(t)["last_seen_at"] != "2026-03-08T00:00:00.500Z" {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	want("ls-b", "2026-03-08T00:00:00.500Z")

	// An id split off has no events of its own: null; its former person
	// keeps its time.
	cPath, _ := e.personPath("ls-c")
	if r := e.send("POST", e.keyAll, cPath+"split/", `{"main_distinct_id":"ls-c"}`); r.status != 201 && r.status != 200 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	want("ls-c2", "null")
	want("ls-c", "2026-03-03T00:00:00.000Z")

	// Retrieve (by id and uuid), the batch routes and CSV agree.
	aPath, a := e.personPath("ls-a")
	for _, path := range []string{aPath, fmt.Sprintf("/api/projects/%d/persons/%s/", e.projectA.ID, a["uuid"])} {
		if got := e.get(e.keyRead, path).json(t)["last_seen_at"]; got != "2026-03-06T08:00:00.123Z" {
			t.Errorf("GET %s: last_seen_at %v", path, got)
		}
	}
	byDID := e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/batch_by_distinct_ids/?distinct_ids=%s", e.projectA.ID,
		url.QueryEscape(`["ls-anon","ls-c2"]`))).json(t)["results"].(map[string]any)
	if got := fmt.Sprint(byDID["ls-anon"].(map[string]any)["last_seen_at"], " ", byDID["ls-c2"].(map[string]any)["last_seen_at"]); got != "2026-03-06T08:00:00.123Z <nil>" {
		t.Errorf("batch_by_distinct_ids: %s", got)
	}
	byUUID := e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/batch_by_uuids/?uuids=%s", e.projectA.ID,
		url.QueryEscape(fmt.Sprintf(`[%q]`, b["uuid"])))).json(t)["results"].(map[string]any)
	if got := byUUID[b["uuid"].(string)].(map[string]any)["last_seen_at"]; got != "2026-03-08T00:00:00.500Z" {
		t.Errorf("batch_by_uuids: %v", got)
	}
	r := e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/?format=csv", e.projectA.ID))
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(rows) != 6 {
		t.Fatalf("CSV: %v %q", err, r.body)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	seen := map[string]string{}
	for _, row := range rows[1:] {
		seen[row[col["distinct_ids.0"]]] = row[col["last_seen_at"]]
	}
	if got := fmt.Sprint(seen); got != "map[ls-a:2026-03-06T08:00:00.123Z ls-b:2026-03-08T00:00:00.500Z ls-c:2026-03-03T00:00:00.000Z ls-c2: ls-d:2026-02-02T00:00:00.002Z]" {
		t.Errorf("CSV last_seen_at by first distinct id: %s", got)
	}

	// A merge: the newest of both persons' ids.
	if r := e.send("POST", e.keyAll, aPath+"merge/", `{"distinct_ids":["ls-b"]}`); r.status != 200 || r.json(t)["person"].(map[string]any)["last_seen_at"] != "2026-03-08T00:00:00.500Z" {
		t.Fatalf("merge: %d %s", r.status, r.body)
	}
	want("ls-anon", "2026-03-08T00:00:00.500Z")
	e.wantReplayGivesTheSameTables()

	// The deleter deletes ls-d's events: null, until its next event.
	dPath, _ := e.personPath("ls-d")
	if r := e.send("POST", e.keyAll, dPath+"delete_events/", ""); r.status != 202 {
		t.Fatalf("delete_events: %d %s", r.status, r.body)
	}
	runner, err := deletion.New(e.store.Conn(), deletion.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := runner.RunOnce(context.Background()); err != nil || sum.Verified != 1 || sum.LastSeen != 1 {
		t.Fatalf("deleter: %+v %v", sum, err)
	}
	want("ls-d", "null")
	want("ls-anon", "2026-03-08T00:00:00.500Z")
	if err := e.waitSeq(e.publishAt("2026-01-15T00:00:00.042Z", `{"event":"e","distinct_id":"ls-d"}`)); err != nil {
		t.Fatal(err)
	}
	want("ls-d", "2026-01-15T00:00:00.042Z")
}
