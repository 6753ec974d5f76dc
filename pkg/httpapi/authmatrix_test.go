package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/controlplane"
)

// TestAuthMatrix walks the route table itself: every authenticated route
// x {no key, malformed header, unknown key, revoked key, a key lacking
// each required scope, another organization's key, a key with exactly the
// needed scopes}. A route added to the table is covered without editing
// this test; a route without scopes that is not public fails it. Public
// (capture) routes must never act on a personal key.
func TestAuthMatrix(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{})
	ctx := context.Background()
	orgA, orgB := f.projectA.OrganizationID, f.projectB.OrganizationID
	keys := map[string]string{}
	keyWith := func(org string, scopes ...string) string {
		id := org + "|" + strings.Join(scopes, ",")
		if k, ok := keys[id]; ok {
			return k
		}
		secret, _, err := f.cp.CreateKey(ctx, org, id, scopes)
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = secret
		return secret
	}
	revoked, k, _ := f.cp.CreateKey(ctx, orgA, "revoked", []string{"*"})
	if err := f.cp.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	// Every scope the table uses, with its write form: a key "lacking s"
	// holds all of them but those that allow s.
	var universe []string
	routes := f.api.routes()
	for _, rt := range routes {
		for _, s := range rt.Scopes {
			resource, _, _ := strings.Cut(s, ":")
			for _, u := range []string{s, resource + ":write"} {
				if !slices.Contains(universe, u) {
					universe = append(universe, u)
				}
			}
		}
	}
	sort.Strings(universe)
	// Every path is served with and without its final slash (PostHog's
	// router accepts both), so the matrix below checks both forms.
	served := map[string]bool{}
	for _, rt := range routes {
		served[strings.Join(rt.Methods, ",")+" "+rt.Path] = true
	}
	for _, rt := range routes {
		if short := strings.TrimSuffix(rt.Path, "/"); short != rt.Path && !served[strings.Join(rt.Methods, ",")+" "+short] {
			t.Errorf("%v %s is not served without its final slash", rt.Methods, rt.Path)
		}
	}

	fill := func(path, org string, projectID uint64) string {
		return strings.NewReplacer("{project_id}", fmt.Sprint(projectID), "{organization_id}", org,
			"{id}", "999999", "{token}", "phc_none").Replace(path)
	}
	call := func(method, path, header string) response {
		req, _ := http.NewRequest(method, f.url+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return response{status: res.StatusCode, header: res.Header, body: readBody(t, res)}
	}
	cells, authRoutes, publicRoutes := 0, 0, 0
	for _, rt := range routes {
		if rt.Public {
			publicRoutes++
			continue
		}
		if len(rt.Scopes) == 0 {
			t.Errorf("%v %s: neither public nor scoped", rt.Methods, rt.Path)
			continue
		}
		authRoutes++
		own := fill(rt.Path, orgA, f.projectA.ID)
		for _, method := range rt.Methods {
			name := method + " " + rt.Path
			expect := func(what string, r response, status int, code string) {
				t.Helper()
				cells++
				if r.status != status {
					t.Errorf("%s, %s: %d, want %d: %s", name, what, r.status, status, r.body)
					return
				}
				if m := r.json(t); m["code"] != code {
					t.Errorf("%s, %s: code %v, want %s", name, what, m["code"], code)
				}
			}
			expect("no key", call(method, own, ""), 401, "not_authenticated")
			for _, h := range []string{"Bearer", "Bearer ", "Basic " + keyWith(orgA, "*"), "Token " + keyWith(orgA, "*"), keyWith(orgA, "*")} {
				expect("header "+strings.SplitN(h, " ", 2)[0], call(method, own, h), 401, "not_authenticated")
			}
			expect("unknown key", call(method, own, "Bearer phx_unknownunknownunknownunknown"), 401, "authentication_failed")
			expect("revoked key", call(method, own, "Bearer "+revoked), 401, "authentication_failed")
			for _, need := range rt.Scopes {
				var held []string
				for _, u := range universe {
					if !controlplane.ScopeAllows([]string{u}, need) {
						held = append(held, u)
					}
				}
				r := call(method, own, "Bearer "+keyWith(orgA, held...))
				expect("lacking "+need, r, 403, "permission_denied")
				if !strings.Contains(string(r.body), "'"+need+"'") {
					t.Errorf("%s: 403 does not name %s: %s", name, need, r.body)
				}
			}
			exact := "Bearer " + keyWith(orgA, rt.Scopes...)
			if other := fill(rt.Path, orgB, f.projectB.ID); strings.Contains(rt.Path, "{project_id}") || strings.Contains(rt.Path, "{organization_id}") {
				// Another organization's project or organization, with an
				// all-powerful key of this one and the other's own key
				// pointed at ours: both look like nothing there.
				expect("other organization's path", call(method, other, exact), 404, "not_found")
				expect("other organization's key", call(method, own, "Bearer "+keyWith(orgB, "*")), 404, "not_found")
			}
			cells++
			if r := call(method, own, exact); r.status == 401 || r.status == 403 || r.status >= 500 {
				t.Errorf("%s with exactly %v: %d %s", name, rt.Scopes, r.status, r.body)
			}
		}
	}

	// Public routes: a personal key is no substitute for the capture token,
	// and nothing reaches the log.
	before := streamMessages(t, f.env)
	personal := keyWith(orgA, "*")
	for _, rt := range routes {
		if !rt.Public || !rt.CORS {
			continue
		}
		path := strings.ReplaceAll(rt.Path, "{token}", personal)
		body := fmt.Sprintf(`{"api_key":%q,"event":"$set","distinct_id":"x","properties":{"$set":{"pwned":true}}}`, personal)
		req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+personal)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
		cells++
		if res.StatusCode != 401 && res.StatusCode != 404 {
			t.Errorf("POST %s with a personal key as token and header: %d", rt.Path, res.StatusCode)
		}
	}
	if after := streamMessages(t, f.env); after != before {
		t.Fatalf("public routes published %d messages on a personal key", after-before)
	}
	t.Logf("auth matrix: %d routes with scopes, %d public, %d cells checked", authRoutes, publicRoutes, cells)
}

// streamMessages counts the events stream's messages.
func streamMessages(t *testing.T, e *env) uint64 {
	t.Helper()
	return (&captureEnv{env: e}).streamCount()
}
