package httpapi

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestFilterParityWithPostHog runs, against the real ClickHouse, the
// property filters PostHog's clients send that used to match nobody or
// answer 400: object and array values, as JSON text (Python's json.dumps
// spacing, another key order) or as JSON values, and relative dates in the
// date operators, counted back from now.
func TestFilterParityWithPostHog(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	day := func(n int) string { return now.AddDate(0, 0, -n).Format(time.RFC3339) }
	e.ingest(e.projectA.ID,
		fmt.Sprintf(`{"event":"e","distinct_id":"obj","$set":{"email":"obj@x","address":{"city":"Oslo","zip":[1,2]},"tags":["a","b"],"signup":%q}}`, day(3)),
		fmt.Sprintf(`{"event":"e","distinct_id":"str","$set":{"email":"str@x","address":"{\"city\": \"Oslo\", \"zip\": [1, 2]}","signup":%q}}`, day(40)),
		fmt.Sprintf(`{"event":"e","distinct_id":"old","$set":{"email":"old@x","address":{"city":"Bergen"},"tags":["b"],"signup":%q}}`, day(400)),
	)
	cases := map[string]string{
		// JSON text as a Python client writes it, keys in another order.
		`[{"key":"address","value":"{\"zip\": [1, 2], \"city\": \"Oslo\"}","type":"person"}]`: "obj@x",
		// The very text a string property holds still matches it too.
		`[{"key":"address","value":"{\"city\": \"Oslo\", \"zip\": [1, 2]}","type":"person"}]`: "obj@x,str@x",
		`[{"key":"address","value":{"zip":[1,2],"city":"Oslo"},"type":"person"}]`:             "obj@x",
		`[{"key":"tags","value":"[\"a\", \"b\"]","type":"person"}]`:                           "obj@x",
		`[{"key":"tags","value":"[\"b\"]","operator":"is_not","type":"person"}]`:              "obj@x,str@x",
		`[{"key":"signup","value":"-7d","operator":"is_date_after","type":"person"}]`:         "obj@x",
		`[{"key":"signup","value":"7d","operator":"is_date_before","type":"person"}]`:         "old@x,str@x",
		`[{"key":"signup","value":"-2m","operator":"is_date_after","type":"person"}]`:         "obj@x,str@x",
		`[{"key":"signup","value":"1y","operator":"is_date_before","type":"person"}]`:         "old@x",
		`[{"key":"signup","value":"24h","operator":"is_date_after","type":"person"}]`:         "",
		`[{"key":"signup","value":"-1w","operator":"is_date_before","type":"person"}]`:        "old@x,str@x",
	}
	for filter, want := range cases {
		got, _ := e.listEmails("properties=" + url.QueryEscape(filter))
		sort.Strings(got)
		if s := strings.Join(got, ","); s != want {
			t.Errorf("%s: got %q, want %q", filter, s, want)
		}
	}
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?properties=%s", e.projectA.ID,
		url.QueryEscape(`[{"key":"signup","value":"-7x","operator":"is_date_after"}]`)))
	wantError(t, r, 400, "validation_error", "invalid_input")
}

// TestSplitActivity: a split_person entry in PostHog's shape: one change
// with no field, after.distinct_ids all the person's ids before the split,
// and the person named by its uuid.
func TestSplitActivity(t *testing.T) {
	e := newEnv(t)
	path, p := e.personWithThreeIDs()
	if r := e.send("POST", e.keyAll, path+"split/", `{"main_distinct_id":"main"}`); r.status != 200 {
		t.Fatalf("split: %d %s", r.status, r.body)
	}
	entry := e.get(e.keyAll, path+"activity/").json(t)["results"].([]any)[0].(map[string]any)
	detail := entry["detail"].(map[string]any)
	changes := detail["changes"].([]any)
	if entry["activity"] != "split_person" || detail["name"] != p["uuid"] || entry["item_id"] != fmt.Sprint(p["id"]) || len(changes) != 1 {
		t.Fatalf("split entry: %v", entry)
	}
	c := changes[0].(map[string]any)
	field, hasField := c["field"]
	after, _ := c["after"].(map[string]any)["distinct_ids"].([]any)
	ids := strings.Fields(strings.Trim(fmt.Sprint(after), "[]"))
	sort.Strings(ids)
	if !hasField || field != nil || c["action"] != "split" || c["type"] != "Person" || c["before"] != nil || strings.Join(ids, ",") != "anon-1,main,other" {
		t.Fatalf("split change: %v, want after.distinct_ids %v", c, p["distinct_ids"])
	}
}

// TestMiddlewareServesPathsWithoutTheFinalSlash: every route also answers
// without its final slash, as PostHog's router does, with no redirect: the
// bodies of PATCH and POST arrive, the query is kept, and the answer is the
// one the slashed path gives.
func TestMiddlewareServesPathsWithoutTheFinalSlash(t *testing.T) {
	e := newEnv(t)
	path, p := e.personWithThreeIDs()
	short := strings.TrimSuffix(path, "/")
	if r := e.get(e.keyAll, short); r.status != 200 || r.json(t)["uuid"] != p["uuid"] {
		t.Fatalf("GET %s: %d %s", short, r.status, r.body)
	}
	if r := e.send("PATCH", e.keyAll, short, `{"properties":{"plan":"pro"}}`); r.status != 200 || fmt.Sprint(r.json(t)["properties"]) != "map[email:m@x.io plan:pro]" {
		t.Fatalf("PATCH %s: %d %s", short, r.status, r.body)
	}
	if r := e.send("POST", e.keyAll, path+"update_property", `{"key":"n","value":7}`); r.status != 200 || r.json(t)["properties"].(map[string]any)["n"] != 7.0 {
		t.Fatalf("POST update_property: %d %s", r.status, r.body)
	}
	list := fmt.Sprintf("/api/projects/%d/persons?properties=%s", e.projectA.ID, url.QueryEscape(`[{"key":"plan","value":"pro"}]`))
	if r := e.get(e.keyAll, list); r.status != 200 || r.json(t)["count"] != 1.0 {
		t.Fatalf("GET %s: %d %s", list, r.status, r.body)
	}
	if r := e.get(e.keyAll, short+"/activity?format=csv"); r.status != 200 || r.header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("activity as CSV: %d %s", r.status, r.body)
	}
	// Scopes and 404s are the same as with the slash.
	wantError(t, e.send("PATCH", e.keyRead, short, `{"properties":{"x":1}}`), 403, "authentication_error", "permission_denied")
	wantError(t, e.get(e.keyAll, short+"/nothing"), 404, "invalid_request", "not_found")
	if r := e.do("DELETE", e.keyAll, short); r.status != 204 {
		t.Fatalf("DELETE %s: %d %s", short, r.status, r.body)
	}
}
