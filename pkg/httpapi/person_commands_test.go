package httpapi

import (
	"context"
	"fmt"
	"sort"
	"testing"
)

// TestPartialSplit: distinct_ids_to_split moves exactly those ids off, each
// to a person of its own; the person keeps the others and its properties.
// Invalid requests answer 400 with attr and change nothing.
func TestPartialSplit(t *testing.T) {
	e := newEnv(t)
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"main","$set":{"email":"m@x.io"}}`,
		`{"event":"$identify","distinct_id":"main","properties":{"$anon_distinct_id":"anon-1"}}`,
		`{"event":"$create_alias","distinct_id":"main","properties":{"alias":"other"}}`,
		`{"event":"$create_alias","distinct_id":"main","properties":{"alias":"third"}}`,
		`{"event":"e","distinct_id":"stranger"}`)
	e.startIngester()
	path, _ := e.personPath("main")
	before := string(e.get(e.keyAll, path).body)
	for _, body := range []string{
		`{"distinct_ids_to_split":["other","stranger"]}`,
		`{"distinct_ids_to_split":["nobody"]}`,
		`{"distinct_ids_to_split":"other"}`,
		`{"distinct_ids_to_split":[1]}`,
		`{"distinct_ids_to_split":[]}`,
		`{"distinct_ids_to_split":{"other":true}}`,
		`{"distinct_ids_to_split":["main","anon-1","other","third"]}`,
		`{"distinct_ids_to_split":["other"],"main_distinct_id":"main"}`,
		`{"main_distinct_id":7}`,
	} {
		r := e.send("POST", e.keyAll, path+"split/", body)
		attr := "distinct_ids_to_split"
		if body == `{"distinct_ids_to_split":["other"],"main_distinct_id":"main"}` || body == `{"main_distinct_id":7}` {
			attr = "main_distinct_id"
		}
		if r.status != 400 || r.json(t)["attr"] != attr {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
	if after := string(e.get(e.keyAll, path).body); after != before {
		t.Fatalf("refused splits changed the person:\n%s\n%s", before, after)
	}

	r := e.send("POST", e.keyAll, path+"split/", `{"distinct_ids_to_split":["other","anon-1","other"],"main_distinct_id":null}`)
	m := r.json(t)
	if r.status != 200 || len(m["created"].([]any)) != 2 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	p := m["person"].(map[string]any)
	var kept []string
	for _, d := range p["distinct_ids"].([]any) {
		kept = append(kept, d.(string))
	}
	sort.Strings(kept)
	if fmt.Sprint(kept) != "[main third]" || p["properties"].(map[string]any)["email"] != "m@x.io" {
		t.Fatalf("person after a partial split: %v", p)
	}
	e.wantSplitOff(path, "anon-1", "other")
}

// wantSplitOff checks that each distinct id is now the only id of a person
// other than the one at path.
func (e *env) wantSplitOff(path string, ids ...string) {
	e.t.Helper()
	for _, d := range ids {
		q, moved := e.personPath(d)
		if q == path || len(moved["distinct_ids"].([]any)) != 1 {
			e.t.Fatalf("%s after split: %v", d, moved)
		}
	}
}

// TestDeleteKeepPerson: keep_person=true with delete_events=true queues the
// events' deletion and keeps the person; keep_person=true alone does
// nothing (as PostHog).
func TestDeleteKeepPerson(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, p := e.personPath("p4")
	before := string(e.get(e.keyAll, path).body)
	wantError(t, e.do("DELETE", e.keyAll, path+"?keep_person=perhaps&delete_events=true"), 400, "validation_error", "invalid_input")
	requests := func() uint64 {
		var n uint64
		if err := e.store.Conn().QueryRow(context.Background(),
			"SELECT count() FROM person_deletion_requests FINAL WHERE project_id = ? AND person_id = ?",
			e.projectA.ID, uint64(p["id"].(float64))).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if r := e.do("DELETE", e.keyAll, path+"?keep_person=true"); r.status != 204 || requests() != 0 {
		t.Fatalf("keep_person alone: %d %s, %d requests", r.status, r.body, requests())
	}
	if r := e.do("DELETE", e.keyAll, path+"?keep_person=true&delete_events=true"); r.status != 204 {
		t.Fatalf("keep_person with delete_events: %d %s", r.status, r.body)
	}
	if after := e.get(e.keyAll, path); after.status != 200 || string(after.body) != before {
		t.Fatalf("the person changed: %d\n%s\n%s", after.status, before, after.body)
	}
	if n := requests(); n != 1 {
		t.Fatalf("deletion requests: %d, want 1", n)
	}
}
