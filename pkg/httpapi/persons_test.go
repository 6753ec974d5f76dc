package httpapi

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestAuthAndTenancy(t *testing.T) {
	e := newEnv(t)
	a := fmt.Sprintf("/api/projects/%d/persons/", e.projectA.ID)
	b := fmt.Sprintf("/api/projects/%d/persons/", e.projectB.ID)

	wantError(t, e.get("", a), 401, "authentication_error", "not_authenticated")
	wantError(t, e.get("phx_nonsense", a), 401, "authentication_error", "authentication_failed")
	// Another organization's project looks exactly like a missing one.
	other := e.get(e.keyAll, b)
	missing := e.get(e.keyAll, "/api/projects/999/persons/")
	wantError(t, other, 404, "invalid_request", "not_found")
	if string(other.body) != string(missing.body) {
		t.Fatalf("other tenant %s differs from missing %s", other.body, missing.body)
	}
	if r := e.get(e.keyB, b); r.status != 200 {
		t.Fatalf("own project: %d %s", r.status, r.body)
	}
	// A key without project:read cannot list projects, and the 403 names
	// the scope.
	m := wantError(t, e.get(e.keyRead, "/api/projects/"), 403, "authentication_error", "permission_denied")
	if !strings.Contains(m["detail"].(string), "project:read") {
		t.Fatalf("detail %v", m["detail"])
	}
	// Revocation takes effect.
	if r := e.get(e.keyAll, a); r.status != 200 {
		t.Fatalf("before revoke: %d", r.status)
	}
	if err := e.cp.RevokeKey(context.Background(), e.keyAID); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.get(e.keyAll, a), 401, "authentication_error", "authentication_failed")
}

func TestProjects(t *testing.T) {
	e := newEnv(t)
	m := e.get(e.keyAll, "/api/projects/").json(t)
	res := m["results"].([]any)
	if m["count"].(float64) != 1 || len(res) != 1 || res[0].(map[string]any)["id"].(float64) != float64(e.projectA.ID) {
		t.Fatalf("projects: %v", m)
	}
	if m["next"] != nil || m["previous"] != nil {
		t.Fatalf("links on a single page: %v", m)
	}
	p := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID)).json(t)
	if p["name"] != "a" || !strings.HasPrefix(p["api_token"].(string), "phc_") {
		t.Fatalf("project: %v", p)
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectB.ID)), 404, "invalid_request", "not_found")
}

// seed creates persons in project A: p0..p4 with emails, numbers, dates,
// one merged pair.
func seed(e *env) {
	e.ingest(e.projectA.ID,
		`{"event":"e","distinct_id":"p0","$set":{"email":"zero@acme.io","n":5,"plan":"free","signup":"2026-01-10"}}`,
		`{"event":"e","distinct_id":"p1","$set":{"email":"one@Acme.io","n":15,"plan":"pro","signup":"2026-02-10"}}`,
		`{"event":"e","distinct_id":"p2","$set":{"email":"two@other.org","n":"25","plan":"pro"}}`,
		`{"event":"e","distinct_id":"p3","$set":{"name":"=cmd|' /C calc'!A0","n":-3}}`,
		`{"event":"e","distinct_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"}`,
		`{"event":"$identify","distinct_id":"p4","properties":{"$anon_distinct_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"},"$set":{"email":"four@acme.io"}}`,
	)
	// Another project's person never shows in project A.
	e.ingest(e.projectB.ID, `{"event":"e","distinct_id":"p0","$set":{"email":"zero@acme.io"}}`)
}

func (e *env) listEmails(query string) ([]string, map[string]any) {
	e.t.Helper()
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?%s", e.projectA.ID, query))
	if r.status != 200 {
		e.t.Fatalf("%s: %d %s", query, r.status, r.body)
	}
	m := r.json(e.t)
	var out []string
	for _, p := range m["results"].([]any) {
		props := p.(map[string]any)["properties"].(map[string]any)
		email, _ := props["email"].(string)
		if email == "" {
			email = p.(map[string]any)["name"].(string)
		}
		out = append(out, email)
	}
	return out, m
}

func TestListAndFilters(t *testing.T) {
	e := newEnv(t)
	seed(e)
	all, m := e.listEmails("")
	// Newest first: p4's person was created by the anonymous id's event.
	want := "four@acme.io,=cmd|' /C calc'!A0,two@other.org,one@Acme.io,zero@acme.io"
	if strings.Join(all, ",") != want || m["count"].(float64) != 5 {
		t.Fatalf("list: %v (%v)", all, m["count"])
	}
	cases := map[string]string{
		"distinct_id=p1": "one@Acme.io",
		"distinct_id=0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00": "four@acme.io",
		"email=two@other.org":                              "two@other.org",
		"search=ACME":                                      "four@acme.io,one@Acme.io,zero@acme.io",
		"search=p2":                                        "two@other.org",
		"properties=" + url.QueryEscape(`[{"key":"plan","value":"pro","operator":"exact","type":"person"}]`):               "two@other.org,one@Acme.io",
		"properties=" + url.QueryEscape(`[{"key":"n","value":10,"operator":"gt"}]`):                                        "two@other.org,one@Acme.io",
		"properties=" + url.QueryEscape(`[{"key":"n","value":0,"operator":"lt"}]`):                                         "=cmd|' /C calc'!A0",
		"properties=" + url.QueryEscape(`{"type":"OR","values":[{"key":"plan","value":"free"},{"key":"n","value":"25"}]}`): "two@other.org,zero@acme.io",
		"properties=" + url.QueryEscape(`{"email__icontains":"ACME"}`):                                                     "four@acme.io,one@Acme.io,zero@acme.io",
		"properties=" + url.QueryEscape(`[{"key":"email","operator":"is_not_set"}]`):                                       "=cmd|' /C calc'!A0",
		"properties=" + url.QueryEscape(`[{"key":"email","value":"^t.o@","operator":"regex"}]`):                            "two@other.org",
		"properties=" + url.QueryEscape(`[{"key":"signup","value":"2026-02-01","operator":"is_date_after"}]`):              "one@Acme.io",
		"properties=" + url.QueryEscape(`[{"key":"plan","value":["free","pro"],"operator":"is_not"}]`):                     "four@acme.io,=cmd|' /C calc'!A0",
		"properties=" + url.QueryEscape(`[{"key":"$browser","value":"x","type":"event"}]`):                                 want,
		"properties=" + url.QueryEscape(`[{"key":"email","value":"x' OR 1=1 --"}]`):                                        "",
	}
	for q, w := range cases {
		got, _ := e.listEmails(q)
		if strings.Join(got, ",") != w {
			t.Errorf("%s:\n got %q\nwant %q", q, strings.Join(got, ","), w)
		}
	}
	for _, q := range []string{"properties=" + url.QueryEscape(`{not json`), "properties=" + url.QueryEscape(`[{"key":"a","operator":"nope"}]`)} {
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?%s", e.projectA.ID, q))
		m := wantError(t, r, 400, "validation_error", "invalid_input")
		if m["attr"] != "properties" || !strings.HasPrefix(m["detail"].(string), "Properties are unparsable!") {
			t.Fatalf("%s: %v", q, m)
		}
	}
	for _, q := range []string{"limit=0", "limit=abc", "limit=100000", "offset=-1", "format=xml"} {
		wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?%s", e.projectA.ID, q)), 400, "validation_error", "invalid_input")
	}
}

func TestPaging(t *testing.T) {
	e := newEnv(t)
	seed(e)
	var seen []string
	path := fmt.Sprintf("/api/projects/%d/persons/?limit=2&search=acme", e.projectA.ID)
	for pages := 0; path != ""; pages++ {
		m := e.get(e.keyAll, path).json(t)
		for _, p := range m["results"].([]any) {
			seen = append(seen, p.(map[string]any)["properties"].(map[string]any)["email"].(string))
		}
		if pages == 1 {
			prev, _ := url.Parse(m["previous"].(string))
			if prev.Query().Get("offset") != "0" || prev.Query().Get("limit") != "2" || prev.Query().Get("search") != "acme" {
				t.Fatalf("previous = %v", m["previous"])
			}
		}
		path = ""
		if next, ok := m["next"].(string); ok {
			u, _ := url.Parse(next)
			if !strings.HasPrefix(next, e.url) || u.Query().Get("search") != "acme" {
				t.Fatalf("next = %s", next)
			}
			path = u.RequestURI()
		}
		if pages > 3 {
			t.Fatal("too many pages")
		}
	}
	if strings.Join(seen, ",") != "four@acme.io,one@Acme.io,zero@acme.io" {
		t.Fatalf("paged: %v", seen)
	}
	// An exactly full last page has no next.
	m := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?limit=5", e.projectA.ID)).json(t)
	if m["next"] != nil {
		t.Fatalf("next on the last page: %v", m["next"])
	}
}

func TestRetrieve(t *testing.T) {
	e := newEnv(t)
	seed(e)
	_, m := e.listEmails("distinct_id=p4")
	p := m["results"].([]any)[0].(map[string]any)
	id, uid := int(p["id"].(float64)), p["uuid"].(string)
	for _, key := range []string{fmt.Sprint(id), uid} {
		got := e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/%s/", e.projectA.ID, key)).json(t)
		ids := got["distinct_ids"].([]any)
		if got["uuid"] != uid || got["name"] != "four@acme.io" || len(ids) != 2 || ids[0] != "p4" || got["is_identified"] != true {
			t.Fatalf("retrieve %s: %v", key, got)
		}
		created, err := time.Parse(time.RFC3339, got["created_at"].(string))
		if err != nil || !strings.HasSuffix(got["created_at"].(string), "Z") || created.IsZero() {
			t.Fatalf("created_at %v", got["created_at"])
		}
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/424242/", e.projectA.ID)), 404, "invalid_request", "not_found")
	// A distinct id where the id goes: the detail shows how to look it up
	// (PostHog points to ?distinct_id= too).
	bad := wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/p%%2B4/", e.projectA.ID)), 400, "validation_error", "invalid_input")
	if want := fmt.Sprintf("/api/projects/%d/persons/?distinct_id=p%%2B4", e.projectA.ID); bad["attr"] != "id" || !strings.Contains(bad["detail"].(string), want) {
		t.Fatalf("retrieve by a distinct id: %v, want the detail to name %s", bad, want)
	}
	// PostHog's sentence, which its clients match on, comes first.
	if d := bad["detail"].(string); !strings.HasPrefix(d, "The ID provided does not look like a personID. If you are using a distinctId, please use /persons?distinct_id=p+4 instead.") {
		t.Fatalf("detail %q is not in PostHog's words", d)
	}
	// A person of project A is not found through project B's key and path.
	wantError(t, e.get(e.keyB, fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectB.ID, id)), 404, "invalid_request", "not_found")
}

func TestCSV(t *testing.T) {
	e := newEnv(t)
	seed(e)
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?format=csv", e.projectA.ID))
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("%d %s", r.status, r.header)
	}
	records, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := records[0]
	for i := 1; i < len(header); i++ {
		if header[i-1] >= header[i] {
			t.Fatalf("header not sorted: %v", header)
		}
	}
	if len(records) != 6 {
		t.Fatalf("rows: %d", len(records)-1)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, want := range []string{"distinct_ids.0", "distinct_ids.1", "properties.email", "properties.n", "uuid", "id", "created_at"} {
		if _, ok := col[want]; !ok {
			t.Fatalf("no column %s in %v", want, header)
		}
	}
	for _, rec := range records[1:] {
		for _, cell := range rec {
			if cell != "" && strings.ContainsAny(cell[:1], "=+-@\t\r") {
				t.Fatalf("dangerous cell %q", cell)
			}
		}
	}
	// A limited CSV is that page only.
	r = e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?format=csv&limit=2", e.projectA.ID))
	if records, _ := csv.NewReader(strings.NewReader(string(r.body))).ReadAll(); len(records) != 3 {
		t.Fatalf("limited csv rows: %d", len(records)-1)
	}
}
