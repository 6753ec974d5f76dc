package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestLongFilterValues: filter, search, email and distinct_id values of
// 300k characters answer correctly (or 400 naming the parameter), never
// 500. The driver splices bound values into the statement, which was then
// over ClickHouse's default max_query_size.
func TestLongFilterValues(t *testing.T) {
	e := newEnv(t)
	seed(e)
	long := strings.Repeat("x", 300_000)
	// One long property: two would pass the person size limit (512 KiB).
	e.ingest(e.projectA.ID, fmt.Sprintf(`{"event":"e","distinct_id":"long","$set":{"email":%q}}`, long+"@acme.io"))
	filter := func(key, value string) string {
		raw, _ := json.Marshal([]map[string]any{{"key": key, "value": value, "type": "person"}})
		return string(raw)
	}
	cases := []struct {
		param, value string
		want         []string // emails found, when answered 200
	}{
		{"email", long + "@acme.io", []string{long + "@acme.io"}},
		{"email", long, nil},
		{"search", long, []string{long + "@acme.io"}},
		{"search", "y" + long, nil},
		{"distinct_id", long, nil},
		{"properties", filter("email", long+"@acme.io"), []string{long + "@acme.io"}},
		{"properties", filter("email", "y"+long), nil},
	}
	for _, c := range cases {
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?%s=%s", e.projectA.ID, c.param, url.QueryEscape(c.value)))
		switch r.status {
		case 200:
			var got []string
			for _, p := range r.json(t)["results"].([]any) {
				email, _ := p.(map[string]any)["properties"].(map[string]any)["email"].(string)
				got = append(got, email)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%s of %d characters: found %d persons, want %d", c.param, len(c.value), len(got), len(c.want))
			}
		case 400:
			if attr := r.json(t)["attr"]; attr != c.param {
				t.Errorf("%s of %d characters: 400 with attr %v", c.param, len(c.value), attr)
			}
		default:
			t.Errorf("%s of %d characters: %d %.300s", c.param, len(c.value), r.status, r.body)
		}
	}
}
