package httpapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/stream"
)

// TestPersonCohortsMatchMembers is the differential test of
// persons/cohorts/ (which evaluates each cohort for one person) against
// the cohorts' member lists (cohorts/{id}/persons/, evaluated over the
// whole project): for every live person of a generated history, the
// cohorts it is listed in are exactly those whose members include it.
// The history has merged persons (an anonymous id identified later),
// persons with no event, a deleted person, person properties, and the
// cohorts every kind of condition: property, static (by distinct id, one
// of them merged away), performed_event, performed_event_multiple, an
// action, a nested cohort, negation, OR groups.
func TestPersonCohortsMatchMembers(t *testing.T) {
	e := newEnv(t)
	e.startIngester()
	ctx := context.Background()
	now := time.Now().UTC()
	rng := rand.New(rand.NewPCG(11, 3))
	var last uint64
	publish := func(name, did string, props string, at time.Time) {
		id := uuid.NewString()
		msg := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,"event":%q,"distinct_id":%q,"properties":%s}`, id, at.Format(time.RFC3339), name, did, props)
		ack, err := stream.Publish(ctx, e.nats.JS, e.projectA.ID, id, []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	const n = 36
	for i := range n {
		key := fmt.Sprintf("p%02d", i)
		plan := []string{"free", "pro", "team"}[rng.IntN(3)]
		publish("$set", key, fmt.Sprintf(`{"$set":{"plan":%q,"n":%d}}`, plan, i), now.Add(-30*24*time.Hour))
		if i%5 == 0 {
			continue // no behaviour
		}
		anon := i%4 == 1
		for range 1 + rng.IntN(8) {
			did := key
			if anon && rng.IntN(2) == 0 {
				did = "anon" + key
			}
			at := now.Add(-time.Duration(rng.IntN(20))*24*time.Hour - 6*time.Hour - time.Duration(rng.IntN(600))*time.Minute)
			publish([]string{"buy", "view", "other"}[rng.IntN(3)], did, fmt.Sprintf(`{"$browser":%q}`, []string{"Chrome", "Firefox"}[rng.IntN(2)]), at)
		}
		if anon {
			publish("$identify", key, fmt.Sprintf(`{"$anon_distinct_id":"anon%s"}`, key), now.Add(-time.Hour))
		}
	}
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	personOf := func(did string) chstore.PersonRecord {
		list, _, err := e.store.ListPersons(ctx, chstore.ListQuery{ProjectID: e.projectA.ID, DistinctID: did, Limit: 1})
		if err != nil || len(list) != 1 {
			t.Fatalf("person %s: %v %v", did, list, err)
		}
		return list[0]
	}
	deleted := personOf("p03")
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, deleted.ID)); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/actions/", e.projectA.ID),
		`{"name":"engaged","steps":[{"event":"buy"},{"event":"view","properties":[{"type":"event","key":"$browser","value":"Chrome"}]}]}`)
	if r.status != 201 {
		t.Fatalf("create action: %d %s", r.status, r.body)
	}
	action := r.json(t)["id"]
	create := func(body string) string {
		t.Helper()
		r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), body)
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", body, r.status, r.body)
		}
		return fmt.Sprint(r.json(t)["id"])
	}
	dynamic := func(typ string, values ...string) string {
		return create(fmt.Sprintf(`{"name":"c","filters":{"properties":{"type":%q,"values":[%s]}}}`, typ, strings.Join(values, ",")))
	}
	behavioral := func(key any, value, eventType, extra string, days int) string {
		return fmt.Sprintf(`{"type":"behavioral","key":%s,"value":%q,"event_type":%q,"time_value":%d,"time_interval":"day"%s}`,
			mustJSON(key), value, eventType, days, extra)
	}
	pro := dynamic("AND", `{"type":"person","key":"plan","value":"pro"}`)
	static := create(`{"name":"s","is_static":true,"distinct_ids":["p01","anonp05","p06","p07","p10","p03"]}`)
	cohorts := []string{
		pro, static,
		dynamic("AND", behavioral("buy", "performed_event", "events", "", 9)),
		dynamic("AND", behavioral("view", "performed_event_multiple", "events", `,"operator":"gte","operator_value":2`, 15)),
		dynamic("AND", behavioral(action, "performed_event", "actions", "", 7)),
		dynamic("AND", behavioral(action, "performed_event_multiple", "actions", `,"operator":"lte","operator_value":2`, 20)),
		dynamic("OR", `{"type":"cohort","key":"id","value":`+static+`}`, `{"type":"person","key":"plan","value":"team"}`),
		dynamic("AND", `{"type":"cohort","key":"id","value":`+pro+`,"negation":true}`,
			strings.Replace(behavioral("other", "performed_event", "events", "", 30), "{", `{"negation":true,`, 1)),
		dynamic("AND", `{"type":"person","key":"n","operator":"gt","value":10}`, `{"type":"cohort","key":"id","value":`+static+`,"negation":true}`),
	}
	// By id ascending, as persons/cohorts/ answers (decimal: length, then text).
	byID := func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	}
	slices.SortFunc(cohorts, byID)
	// The reference: each cohort's members, evaluated over the project.
	members := map[string]map[string]bool{}
	for _, c := range cohorts {
		members[c] = map[string]bool{}
		for _, p := range cohortPersonKeys(t, e, c) {
			members[c][p] = true
		}
		if len(members[c]) == 0 || len(members[c]) >= n-1 {
			t.Fatalf("cohort %s has %d of %d persons: the history does not test it", c, len(members[c]), n)
		}
	}
	checked := 0
	for i := range n {
		if i == 3 {
			continue
		}
		p := personOf(fmt.Sprintf("p%02d", i))
		ids := slices.Clone(p.DistinctIDs)
		sort.Strings(ids)
		key := strings.Join(ids, "+")
		var want []string
		for _, c := range cohorts {
			if members[c][key] {
				want = append(want, c)
			}
		}
		ref := fmt.Sprint(p.ID)
		if i%2 == 1 {
			ref = p.UUID.String()
		}
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%s", e.projectA.ID, ref))
		if r.status != 200 {
			t.Fatalf("persons/cohorts %s: %d %s", key, r.status, r.body)
		}
		var got []string
		for _, c := range r.json(t)["results"].([]any) {
			got = append(got, fmt.Sprint(c.(map[string]any)["id"]))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("persons/cohorts of %s = %v, want %v", key, got, want)
		}
		checked++
	}
	if checked != n-1 {
		t.Fatalf("checked %d persons", checked)
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%d", e.projectA.ID, deleted.ID)), 404, "invalid_request", "not_found")
}
