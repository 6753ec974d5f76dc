package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestPersonUUIDsAfterResetSplitAndDelete: a distinct id that leaves its
// person (reset, split) or whose person is deleted, seen again, gives a
// person a uuid of its own, though its former owner was created from that
// id. A lookup by each uuid finds the right person, the events of the two
// persons carry different person uuids, and a replay of the log into
// empty tables gives the same rows.
func TestPersonUUIDsAfterResetSplitAndDelete(t *testing.T) {
	e := newEnv(t)
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"r1","$set":{"name":"reset owner"}}`,
		`{"event":"$identify","distinct_id":"r2","properties":{"$anon_distinct_id":"r1"}}`,
		`{"event":"e","distinct_id":"s1","$set":{"name":"split owner"}}`,
		`{"event":"$create_alias","distinct_id":"s1","properties":{"alias":"s2"}}`,
		`{"event":"e","distinct_id":"d1","$set":{"name":"deleted"}}`)
	e.startIngester()
	_, resetOwner := e.personPath("r1")
	splitPath, splitOwner := e.personPath("s1")
	deletedPath, deleted := e.personPath("d1")

	reset := fmt.Sprintf("/api/projects/%d/persons/reset_person_distinct_id/", e.projectA.ID)
	if r := e.send("POST", e.keyAll, reset, `{"distinct_id":"r1"}`); r.status != 202 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	r := e.send("POST", e.keyAll, splitPath+"split/", `{"main_distinct_id":"s2"}`)
	created, _ := r.json(t)["created"].([]any)
	if r.status != 200 || len(created) != 1 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", e.keyAll, deletedPath); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	e.ingestRunning(`{"event":"e","distinct_id":"r1","$set":{"name":"fresh after reset"}}`,
		`{"event":"e","distinct_id":"d1","$set":{"name":"fresh after delete"}}`)
	_, afterReset := e.personPath("r1")
	_, splitOff := e.personPath("s1")
	_, afterDelete := e.personPath("d1")
	if created[0].(map[string]any)["uuid"] != splitOff["uuid"] {
		t.Fatalf("split answer %v, person of s1 %v", created[0], splitOff)
	}

	// Each uuid names one person: the former owners keep theirs.
	byUUID := func(p map[string]any) map[string]any {
		t.Helper()
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%s/", e.projectA.ID, p["uuid"]))
		if r.status != 200 {
			t.Fatalf("GET by uuid %s: %d %s", p["uuid"], r.status, r.body)
		}
		return r.json(t)
	}
	for _, c := range []struct {
		person map[string]any
		name   any // nil: none (a split-off person has no properties)
	}{
		{resetOwner, "reset owner"}, {afterReset, "fresh after reset"},
		{splitOwner, "split owner"}, {splitOff, nil},
		{afterDelete, "fresh after delete"},
	} {
		got := byUUID(c.person)
		if got["id"] != c.person["id"] || got["properties"].(map[string]any)["name"] != c.name {
			t.Errorf("GET by uuid %s (person %v, %v): got person %v %v", c.person["uuid"], c.person["id"], c.name, got["id"], got["properties"])
		}
	}
	if deleted["uuid"] == afterDelete["uuid"] {
		t.Fatalf("the deleted person's uuid %s was given to the fresh person", deleted["uuid"])
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%s/", e.projectA.ID, deleted["uuid"])), 404, "invalid_request", "not_found")

	// Events of different persons never share a person uuid.
	var shared uint64
	if err := e.store.Conn().QueryRow(context.Background(),
		"SELECT count() FROM (SELECT person_uuid FROM events WHERE project_id = ? GROUP BY person_uuid HAVING uniqExact(person_id) > 1)",
		e.projectA.ID).Scan(&shared); err != nil || shared != 0 {
		t.Fatalf("person uuids shared by several persons' events: %d %v", shared, err)
	}
	e.wantReplayGivesTheSameTables()
}

// wantReplayGivesTheSameTables replays the whole log into empty tables
// and compares every table with the running ingester's.
func (e *env) wantReplayGivesTheSameTables() {
	t := e.t
	t.Helper()
	last, err := e.store.LastCommitted(context.Background(), ingest.DefaultConfig().Consumer)
	if err != nil {
		t.Fatal(err)
	}
	replay := testenv.ClickHouse(t)
	cfg := ingest.DefaultConfig()
	cfg.Consumer, cfg.BatchWait = "replay", 10*time.Millisecond
	ing, err := ingest.New(cfg, e.nats.JS, replay, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	testenv.WaitCommitted(t, replay, "replay", last, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := testenv.Snapshot(t, replay), testenv.Snapshot(t, e.store); got != want {
		t.Fatalf("replay differs:\n%s", testenv.FirstDiff(got, want))
	}
}
