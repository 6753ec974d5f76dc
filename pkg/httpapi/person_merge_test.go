package httpapi

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestMergePersons: merge/ moves the named persons' distinct ids to this
// person (identified ones too), keeps this person's value of a property
// both have, takes the other's others, and deletes them; activity on
// both sides; names of nobody and the person itself are skipped; split/
// takes an id off again; bad input is a 400 and changes nothing; a
// replay of the log gives the same tables.
func TestMergePersons(t *testing.T) {
	e := newEnv(t)
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"m1","$set":{"plan":"free","a":1}}`,
		`{"event":"e","distinct_id":"m2","$set":{"plan":"pro","b":2}}`,
		`{"event":"$identify","distinct_id":"m2","properties":{"$anon_distinct_id":"m2-anon"}}`,
		`{"event":"e","distinct_id":"m3","$set":{"c":3}}`)
	e.startIngester()
	path, m1 := e.personPath("m1")
	m2Path, m2 := e.personPath("m2")
	m3Path, m3 := e.personPath("m3")
	merge := path + "merge/"

	many := `[` + strings.TrimSuffix(strings.Repeat(`"x",`, MaxMerge+1), ",") + `]`
	for _, c := range []struct{ body, attr string }{
		{`{}`, "ids"}, {`{"ids":[1],"distinct_ids":["m2"]}`, "ids"}, {`{"distinct_ids":` + many + `}`, "distinct_ids"},
		{`{"ids":["not-an-id"]}`, "ids"}, {`{"distinct_ids":[2]}`, "distinct_ids"}, {`[1]`, "body"},
	} {
		if m := wantError(t, e.send("POST", e.keyAll, merge, c.body), 400, "validation_error", "invalid_input"); m["attr"] != c.attr {
			t.Errorf("%.40s: attr %v", c.body, m["attr"])
		}
	}
	wantError(t, e.send("POST", e.keyRead, merge, `{"distinct_ids":["m2"]}`), 403, "authentication_error", "permission_denied")
	wantError(t, e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/424242/merge/", e.projectA.ID), `{"distinct_ids":["m2"]}`), 404, "invalid_request", "not_found")
	if r := e.get(e.keyAll, m2Path); r.status != 200 {
		t.Fatalf("refused merges changed m2: %d", r.status)
	}

	r := e.send("POST", e.keyAll, merge, `{"distinct_ids":["m2-anon","nobody","m1"],"ids":null}`)
	m := r.json(t)
	if r.status != 200 || m["success"] != true || fmt.Sprint(m["merged"]) != fmt.Sprintf("[map[id:%v uuid:%v]]", m2["id"], m2["uuid"]) {
		t.Fatalf("merge: %d %s", r.status, r.body)
	}
	kept := m["person"].(map[string]any)
	ids := func(p map[string]any) []string {
		var out []string
		for _, d := range p["distinct_ids"].([]any) {
			out = append(out, d.(string))
		}
		sort.Strings(out)
		return out
	}
	if kept["id"] != m1["id"] || fmt.Sprint(ids(kept)) != "[m1 m2 m2-anon]" || fmt.Sprint(kept["properties"]) != "map[a:1 b:2 plan:free]" {
		t.Fatalf("the person kept: %v", kept)
	}
	wantError(t, e.get(e.keyAll, m2Path), 404, "invalid_request", "not_found")
	if kinds := e.activityKinds(path); len(kinds) == 0 || kinds[0] != "merge" {
		t.Fatalf("activity of the person kept: %v", kinds)
	}
	if kinds := e.activityKinds(m2Path); len(kinds) == 0 || kinds[0] != "merged_into" {
		t.Fatalf("activity of the person merged away: %v", kinds)
	}

	// By id, the person itself skipped; then split/ takes m3 off again.
	r = e.send("POST", e.keyAll, merge, fmt.Sprintf(`{"ids":[%v,%q]}`, m3["id"], m1["uuid"]))
	if r.status != 200 || len(r.json(t)["merged"].([]any)) != 1 || fmt.Sprint(ids(r.json(t)["person"].(map[string]any))) != "[m1 m2 m2-anon m3]" {
		t.Fatalf("merge by id: %d %s", r.status, r.body)
	}
	wantError(t, e.get(e.keyAll, m3Path), 404, "invalid_request", "not_found")
	if r := e.send("POST", e.keyAll, path+"split/", `{"distinct_ids_to_split":["m3"]}`); r.status != 200 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	if _, back := e.personPath("m3"); back["id"] == m1["id"] || fmt.Sprint(back["distinct_ids"]) != "[m3]" {
		t.Fatalf("m3 after the split: %v", back)
	}
	// Nothing to merge: 200, nothing recorded.
	before := e.activityKinds(path)
	if r := e.send("POST", e.keyAll, merge, `{"distinct_ids":["nobody","m1"]}`); r.status != 200 || len(r.json(t)["merged"].([]any)) != 0 {
		t.Fatalf("merge of nobody: %d %s", r.status, r.body)
	}
	if after := e.activityKinds(path); len(after) != len(before) {
		t.Fatalf("a merge of nobody was logged: %v", after)
	}

	e.wantReplayGivesTheSameTables()
}
