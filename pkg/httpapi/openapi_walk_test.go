package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/personhub/personhub/pkg/capture"
)

// walkReq is one request of the walk: query and body as sent; noKey sends
// no personal key.
type walkReq struct {
	// path, when set, replaces the case's path.
	path               string
	query, body, ctype string
	noKey              bool
	// status is the answer wanted; 0: any 2xx for a good request, 400 for
	// a bad one.
	status int
	// semantic: the input is wrong in a way the document does not
	// describe (a missing person, a malformed filter inside a string), so
	// the request validator passes it; the answer must still match.
	semantic bool
}

// openAPIWalker sends requests and checks each request and answer
// against the document.
type openAPIWalker struct {
	t   *testing.T
	f   *fullAPI
	v   validator.Validator
	key string
}

func newOpenAPIWalker(t *testing.T, f *fullAPI, raw []byte) *openAPIWalker {
	t.Helper()
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	return &openAPIWalker{t: t, f: f, v: v, key: f.keyAll}
}

// newRequest builds the request twice: one to validate, one to send.
func (w *openAPIWalker) newRequest(method, path string, r walkReq) *http.Request {
	u := w.f.url + path
	if r.query != "" {
		u += "?" + r.query
	}
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", orDefault(r.ctype, "application/json"))
	}
	if !r.noKey && strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/api/schema") {
		req.Header.Set("Authorization", "Bearer "+w.key)
	}
	return req
}

// check sends r and returns the answer's body; good says whether the
// request is meant to be valid.
func (w *openAPIWalker) check(name, method, path string, r walkReq, good bool) []byte {
	t := w.t
	t.Helper()
	reqOK, reqErrs := w.v.ValidateHttpRequest(w.newRequest(method, path, r))
	switch {
	case good && !reqOK:
		t.Errorf("%s: the good request %s %s?%s does not match the document: %s", name, method, path, r.query, validationText(reqErrs))
	case !good && reqOK && !r.semantic:
		t.Errorf("%s: the bad request %s %s?%s %s matches the document", name, method, path, r.query, r.body)
	}
	req := w.newRequest(method, path, r)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	want := r.status
	switch {
	case want != 0 && res.StatusCode != want,
		want == 0 && good && res.StatusCode >= 300,
		want == 0 && !good && res.StatusCode != 400:
		t.Errorf("%s: %s %s?%s answered %d: %.300s", name, method, path, r.query, res.StatusCode, raw)
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if ok, errs := w.v.ValidateHttpResponse(req, res); !ok {
		t.Errorf("%s: the answer %d to %s %s?%s does not match the document: %s\n%.400s", name, res.StatusCode, method, path, r.query,
			validationText(errs), raw)
	}
	return raw
}

func validationText(errs any) string {
	raw, _ := json.Marshal(errs)
	if len(raw) > 1200 {
		raw = append(raw[:1200], "..."...)
	}
	return string(raw)
}

// TestOpenAPIWalk walks every route of the table, each method with a good
// request and a bad one, against a running API, and validates every
// request and answer against the generated document with
// libopenapi-validator: a route without a case, an answer the document
// does not describe or a request it describes wrongly fails.
func TestOpenAPIWalk(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{})
	raw, err := openAPIJSON(f.api.routes())
	if err != nil {
		t.Fatal(err)
	}
	w := newOpenAPIWalker(t, f, raw)
	fx := newWalkFixtures(t, f)
	cases := walkCases(fx)
	for _, rt := range f.api.routes() {
		if rt.Canonical != "" {
			continue
		}
		for _, m := range rt.Methods {
			key := m + " " + rt.Path
			c, ok := cases[key]
			if !ok {
				t.Errorf("%s: no case in walkCases (openapi_walk_cases_test.go)", key)
				continue
			}
			delete(cases, key)
			path := fx.fill(rt.Path)
			if c.path != "" {
				path = c.path
			}
			w.check(key+" good", m, path, c.good, true)
			if !rt.Public {
				w.check(key+" without a key", m, path, walkReq{query: c.good.query, body: c.good.body, ctype: c.good.ctype, noKey: true, status: 401}, false)
			}
			for i, bad := range c.bad {
				p := path
				if bad.path != "" {
					p = bad.path
				}
				w.check(fmt.Sprintf("%s bad %d", key, i), m, p, bad, false)
			}
		}
	}
	for key := range cases {
		t.Errorf("walkCases has %s, which the route table does not serve", key)
	}
}

// walkFixtures are the objects the walk's paths name.
type walkFixtures struct {
	t                         *testing.T
	f                         *fullAPI
	person, cohort, action    string
	plugin, config            string
	org, token                string
	projectPath, projectQuery string
}

func (fx *walkFixtures) fill(path string) string {
	return strings.NewReplacer("{project_id}", fmt.Sprint(fx.f.projectA.ID), "{organization_id}", fx.org,
		"{token}", fx.token).Replace(path)
}

// post creates an object and returns its id.
func (fx *walkFixtures) post(path, body string) string {
	fx.t.Helper()
	r := request(fx.t, "POST", fx.f.url+fx.fill(path), fx.f.keyAll, body)
	if r.status != 201 && r.status != 202 {
		fx.t.Fatalf("POST %s: %d %s", path, r.status, r.body)
	}
	return fmt.Sprint(r.json(fx.t)["id"])
}

// personID is the integer id of the person holding distinctID.
func (fx *walkFixtures) personID(distinctID string) string {
	fx.t.Helper()
	m := request(fx.t, "GET", fx.f.url+fx.fill("/api/projects/{project_id}/persons/?distinct_id="+url.QueryEscape(distinctID)), fx.f.keyAll, "").json(fx.t)
	res, _ := m["results"].([]any)
	if len(res) != 1 {
		fx.t.Fatalf("persons with %s: %v", distinctID, m)
	}
	return fmt.Sprint(res[0].(map[string]any)["id"])
}

func newWalkFixtures(t *testing.T, f *fullAPI) *walkFixtures {
	t.Helper()
	fx := &walkFixtures{t: t, f: f, org: f.projectA.OrganizationID, token: f.projectA.APIToken}
	f.ingest(f.projectA.ID,
		`{"event":"$pageview","distinct_id":"walk-1","$set":{"email":"walk@acme.io","plan":"pro"}}`,
		`{"event":"signup","distinct_id":"walk-1"}`,
		`{"event":"purchase","distinct_id":"walk-1"}`,
		`{"event":"$pageview","distinct_id":"walk-merged"}`,
		`{"event":"$pageview","distinct_id":"walk-split"}`,
		`{"event":"$create_alias","distinct_id":"walk-split","properties":{"alias":"walk-split-2"}}`,
		`{"event":"$pageview","distinct_id":"walk-deleted"}`,
		`{"event":"$pageview","distinct_id":"walk-bulk"}`,
		`{"event":"$pageview","distinct_id":"walk-reset"}`,
		`{"event":"$create_alias","distinct_id":"walk-reset","properties":{"alias":"walk-reset-2"}}`,
		`{"event":"$pageview","distinct_id":"walk-events"}`)
	f.startIngester()
	fx.person = fx.personID("walk-1")
	fx.cohort = fx.post("/api/projects/{project_id}/cohorts/", `{"name":"walk","is_static":true,"distinct_ids":["walk-1"]}`)
	fx.action = fx.post("/api/projects/{project_id}/actions/", `{"name":"walk","steps":[{"event":"$pageview"}]}`)
	fx.plugin = fx.post("/api/organizations/{organization_id}/pipeline_transformations/", `{"plugin_type":"source","name":"walk"}`)
	src := request(t, "PATCH", f.url+fx.fill("/api/organizations/{organization_id}/pipeline_transformations/"+fx.plugin+"/update_source/"),
		f.keyAll, `{"index.ts":"export function processEvent(e) { return e }"}`)
	if src.status != 200 {
		t.Fatalf("update_source: %d %s", src.status, src.body)
	}
	fx.config = fx.post("/api/projects/{project_id}/plugin_configs/", `{"plugin":`+fx.plugin+`,"enabled":true}`)
	return fx
}
