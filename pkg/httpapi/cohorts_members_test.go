package httpapi

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// members lists a cohort's persons through GET /cohorts/{id}/persons/,
// following next until exhausted, as reference keys (u5 for u4+u5).
func (w *cohortWorld) members(id any, limit int) []string {
	w.e.t.Helper()
	next := fmt.Sprintf("%s/api/projects/%d/cohorts/%v/persons/?limit=%d", w.e.url, w.e.projectA.ID, id, limit)
	var out []string
	for pages := 0; next != ""; pages++ {
		r := request(w.e.t, "GET", next, w.e.keyAll, "")
		if r.status != 200 || pages > 100 {
			w.e.t.Fatalf("cohort persons %s: %d %s", next, r.status, r.body)
		}
		m := r.json(w.e.t)
		if _, ok := m["count"]; ok {
			w.e.t.Fatalf("cohort persons answer has count (PostHog's has results, next, previous): %s", r.body)
		}
		for _, p := range m["results"].([]any) {
			var ids []string
			for _, d := range p.(map[string]any)["distinct_ids"].([]any) {
				ids = append(ids, d.(string))
			}
			sort.Strings(ids)
			out = append(out, w.firstOf(ids))
		}
		next, _ = m["next"].(string)
	}
	sort.Strings(out)
	return out
}

// TestStaticCohortMembersThroughTheLog: members added and removed through
// the API are commands on commands.<project>, folded by the ingester;
// reads after each answer show the change; a replay of the stream into
// empty tables gives the same membership; and the cohort's persons route
// pages and exports them.
func TestStaticCohortMembersThroughTheLog(t *testing.T) {
	w := newCohortWorld(t)
	e := w.e
	ctx := context.Background()
	u1, u2, u5 := w.person("u1"), w.person("u2"), w.person("u5")
	c := w.createCohort(fmt.Sprintf(`{"name":"s","is_static":true,"person_ids":[%d,%q],"distinct_ids":["u3","nobody"]}`, u1.ID, u2.UUID))
	// Read your writes: the create answered after the ingester folded it.
	if got := w.members(c["id"], 2); !slices.Equal(got, []string{"u1", "u2", "u3"}) || c["count"].(float64) != 3 {
		t.Fatalf("created static cohort: members %v, count %v", got, c["count"])
	}
	path := fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c["id"])
	// u5 by its uuid adds both of its distinct ids; u4 alone names the same person.
	r := e.send("PATCH", e.keyAll, path+"add_persons_to_static_cohort/", fmt.Sprintf(`{"person_ids":[%q]}`, u5.UUID))
	if r.status != 200 || r.json(t)["count"].(float64) != 4 {
		t.Fatalf("add u5: %d %s", r.status, r.body)
	}
	if got := w.members(c["id"], 100); !slices.Equal(got, []string{"u1", "u2", "u3", "u5"}) {
		t.Fatalf("after add: %v", got)
	}
	// Remove by integer id, then by uuid; again: 404 (not a member).
	for _, ref := range []string{fmt.Sprint(u1.ID), fmt.Sprintf("%q", u5.UUID)} {
		r := e.send("PATCH", e.keyAll, path+"remove_person_from_static_cohort/", `{"person_id":`+ref+`}`)
		if r.status != 200 {
			t.Fatalf("remove %s: %d %s", ref, r.status, r.body)
		}
		wantError(t, e.send("PATCH", e.keyAll, path+"remove_person_from_static_cohort/", `{"person_id":`+ref+`}`), 404, "invalid_request", "not_found")
	}
	if got := w.members(c["id"], 1); !slices.Equal(got, []string{"u2", "u3"}) {
		t.Fatalf("after removals: %v", got)
	}
	// Removal errors: no person_id, a malformed one, a dynamic cohort.
	m := wantError(t, e.send("PATCH", e.keyAll, path+"remove_person_from_static_cohort/", `{}`), 400, "validation_error", "required")
	if m["attr"] != "person_id" {
		t.Fatalf("missing person_id: %v", m)
	}
	wantError(t, e.send("PATCH", e.keyAll, path+"remove_person_from_static_cohort/", `{"person_id":"abc"}`), 400, "validation_error", "invalid_input")
	dyn := w.createCohort(`{"name":"pro","filters":{"properties":{"type":"AND","values":[{"type":"person","key":"plan","value":"pro"}]}}}`)
	m = wantError(t, e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/remove_person_from_static_cohort/", e.projectA.ID, dyn["id"]),
		fmt.Sprintf(`{"person_id":%d}`, u1.ID)), 400, "validation_error", "invalid_input")
	if m["attr"] != "is_static" {
		t.Fatalf("dynamic cohort removal: %v", m)
	}
	// The persons route serves dynamic cohorts too, from the reference model.
	if got, want := w.members(dyn["id"], 1), w.refSelect(func(p *refPerson) bool { return p.props["plan"] == "pro" }); !slices.Equal(got, want) {
		t.Fatalf("dynamic cohort persons %v, want %v", got, want)
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/99999/persons/", e.projectA.ID)), 404, "invalid_request", "not_found")
	// It needs person:read as well as cohort:read.
	secret, _, err := e.cp.CreateKey(ctx, e.projectA.OrganizationID, "cr", []string{"cohort:read"})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, e.get(secret, path+"persons/"), 403, "authentication_error", "permission_denied")
	// CSV: every member, one row each.
	req, _ := http.NewRequest("GET", e.url+path+"persons/?format=csv", nil)
	req.Header.Set("Authorization", "Bearer "+e.keyAll)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(res.Body).ReadAll()
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(rows) != 3 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %v %v", res.StatusCode, rows, err)
	}

	// The commands are in the log: a replay into empty tables gives the
	// same membership, row for row.
	want := testenv.Snapshot(t, e.store)
	info, err := e.nats.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	replay := testenv.ClickHouse(t)
	cfg := ingest.DefaultConfig()
	cfg.Consumer, cfg.BatchWait, cfg.BatchSize = "replay", 10*time.Millisecond, 3
	ing, err := ingest.New(cfg, e.nats.JS, replay, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ing.Run(rctx) }()
	last := info.CachedInfo().State.LastSeq
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if seq, _ := replay.LastCommitted(ctx, cfg.Consumer); seq >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replay did not finish")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, replay); got != want {
		t.Fatalf("replay differs:\n%s", testenv.FirstDiff(got, want))
	}
	var live uint64
	if err := replay.Conn().QueryRow(ctx, "SELECT count() FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ? AND is_deleted = 0", e.projectA.ID, uint64(c["id"].(float64))).Scan(&live); err != nil || live != 2 {
		t.Fatalf("replayed members: %d %v", live, err)
	}
}

// TestStaticCohortWhileTheIngesterIsDown: with no ingester, a create with
// members answers 202 with the cohort (its id is needed) and an add 202
// not_yet_visible; the members are in the log and appear once an ingester
// folds it.
func TestStaticCohortWhileTheIngesterIsDown(t *testing.T) {
	e := newEnvWait(t, 300*time.Millisecond)
	seed(e) // runs an ingester until the persons are folded, then stops it
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), `{"name":"late","is_static":true,"distinct_ids":["p0"]}`)
	c := r.json(t)
	if r.status != 202 || c["id"] == nil || c["count"].(float64) != 0 {
		t.Fatalf("create without ingester: %d %s", r.status, r.body)
	}
	path := fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c["id"])
	r = e.send("PATCH", e.keyAll, path+"add_persons_to_static_cohort/", `{"distinct_ids":["p1"]}`)
	if r.status != 202 || r.json(t)["code"] != "not_yet_visible" {
		t.Fatalf("add without ingester: %d %s", r.status, r.body)
	}
	e.startIngester()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got := e.get(e.keyAll, path).json(t); got["count"].(float64) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorded members never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
