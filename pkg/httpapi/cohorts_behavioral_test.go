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

// bEvent is one generated event of the behavioural world.
type bEvent struct {
	name, browser string
	at            time.Time
}

// bPerson is the reference model of a person: its distinct ids and every
// event any of them sent, computed apart from the SQL.
type bPerson struct {
	ids     []string
	events  []bEvent
	deleted bool
}

// cohortPersonKeys pages through GET /cohorts/{id}/persons/ and returns
// each person as its sorted distinct ids joined by "+", sorted.
func cohortPersonKeys(t *testing.T, e *env, id any) []string {
	t.Helper()
	next := fmt.Sprintf("%s/api/projects/%d/cohorts/%v/persons/?limit=7", e.url, e.projectA.ID, id)
	var out []string
	for pages := 0; next != ""; pages++ {
		r := request(t, "GET", next, e.keyAll, "")
		if r.status != 200 || pages > 100 {
			t.Fatalf("cohort persons %s: %d %s", next, r.status, r.body)
		}
		m := r.json(t)
		for _, p := range m["results"].([]any) {
			var ids []string
			for _, d := range p.(map[string]any)["distinct_ids"].([]any) {
				ids = append(ids, d.(string))
			}
			sort.Strings(ids)
			out = append(out, strings.Join(ids, "+"))
		}
		next, _ = m["next"].(string)
	}
	sort.Strings(out)
	return out
}

// TestCohortsBehavioural compares performed_event_multiple and filters on
// actions with a Go reference over a generated history: counts of an
// event within day windows, merged persons (events before the merge count
// for the survivor), a deleted person, the API's own command events (not
// behaviour), and an action with two steps, one with an event property
// filter.
func TestCohortsBehavioural(t *testing.T) {
	e := newEnv(t)
	e.startIngester()
	ctx := context.Background()
	now := time.Now().UTC()
	rng := rand.New(rand.NewPCG(7, 10))
	persons := map[string]*bPerson{} // by "u<i>"
	var last uint64
	publish := func(body string, at time.Time) {
		id := uuid.NewString()
		msg := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, at.Format(time.RFC3339), strings.TrimPrefix(body, "{"))
		ack, err := stream.Publish(ctx, e.nats.JS, e.projectA.ID, id, []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	// Ages are whole days plus 6 to 18 hours, so no event is near a
	// window's edge (windows are whole days back from now).
	age := func() time.Time {
		return now.Add(-time.Duration(rng.IntN(20))*24*time.Hour - 6*time.Hour - time.Duration(rng.IntN(12*60))*time.Minute)
	}
	for i := range 40 {
		key := fmt.Sprintf("u%02d", i)
		p := &bPerson{ids: []string{key}}
		persons[key] = p
		anon := i%4 == 0 // a quarter browse anonymously first, then are identified
		if anon {
			p.ids = []string{"a" + key[1:], key}
		}
		for range 1 + rng.IntN(10) {
			ev := bEvent{name: []string{"buy", "view", "other"}[rng.IntN(3)], browser: []string{"Chrome", "Firefox"}[rng.IntN(2)], at: age()}
			did := key
			if anon && rng.IntN(2) == 0 {
				did = p.ids[0]
			}
			publish(fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":{"$browser":%q}}`, ev.name, did, ev.browser), ev.at)
			p.events = append(p.events, ev)
		}
		if anon {
			publish(fmt.Sprintf(`{"event":"$identify","distinct_id":%q,"properties":{"$anon_distinct_id":%q}}`, key, p.ids[0]), now.Add(-time.Hour))
		}
	}
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	// One person is deleted; another is changed through the API, whose
	// command event ($set with $actor) is not behaviour.
	for _, p := range []string{"u01", "u02"} {
		list, _, err := e.store.ListPersons(ctx, chstore.ListQuery{ProjectID: e.projectA.ID, DistinctID: p, Limit: 1})
		if err != nil || len(list) != 1 {
			t.Fatalf("person %s: %v %v", p, list, err)
		}
		path := fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, list[0].ID)
		if p == "u01" {
			if r := e.do("DELETE", e.keyAll, path); r.status != 204 {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			persons[p].deleted = true
		} else if r := e.send("PATCH", e.keyAll, path, `{"properties":{"x":1}}`); r.status != 200 {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
	}
	// The action: a buy, or a view from Chrome.
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/actions/", e.projectA.ID),
		`{"name":"engaged","steps":[{"event":"buy"},{"event":"view","properties":[{"type":"event","key":"$browser","value":"Chrome"}]}]}`)
	if r.status != 201 {
		t.Fatalf("create action: %d %s", r.status, r.body)
	}
	action := r.json(t)["id"]
	isAction := func(ev bEvent) bool { return ev.name == "buy" || ev.name == "view" && ev.browser == "Chrome" }
	// count is the reference: a person's matching events within days.
	count := func(p *bPerson, days int, match func(bEvent) bool) int {
		n := 0
		for _, ev := range p.events {
			if match(ev) && !ev.at.Before(now.AddDate(0, 0, -days)) {
				n++
			}
		}
		return n
	}
	isBuy := func(ev bEvent) bool { return ev.name == "buy" }
	behavioral := func(key any, value, eventType, extra string, days int) string {
		return fmt.Sprintf(`{"type":"behavioral","key":%s,"value":%q,"event_type":%q,"time_value":%d,"time_interval":"day"%s}`,
			mustJSON(key), value, eventType, days, extra)
	}
	cases := []struct {
		name, filter string
		want         func(p *bPerson) bool
	}{
		{"buy at least 3 times in 12 days", behavioral("buy", "performed_event_multiple", "events", `,"operator":"gte","operator_value":3`, 12),
			func(p *bPerson) bool { return count(p, 12, isBuy) >= 3 }},
		{"buy at most twice in 15 days", behavioral("buy", "performed_event_multiple", "events", `,"operator":"lte","operator_value":2`, 15),
			func(p *bPerson) bool { n := count(p, 15, isBuy); return n >= 1 && n <= 2 }},
		{"buy exactly twice in 30 days", behavioral("buy", "performed_event_multiple", "events", `,"operator":"eq","operator_value":2`, 30),
			func(p *bPerson) bool { return count(p, 30, isBuy) == 2 }},
		{"buy exactly once, no operator (eq)", behavioral("buy", "performed_event_multiple", "events", `,"operator_value":1`, 30),
			func(p *bPerson) bool { return count(p, 30, isBuy) == 1 }},
		{"the action in 7 days", behavioral(action, "performed_event", "actions", "", 7),
			func(p *bPerson) bool { return count(p, 7, isAction) >= 1 }},
		{"the action at least twice in 14 days", behavioral(fmt.Sprint(action), "performed_event_multiple", "actions", `,"operator":"gte","operator_value":2`, 14),
			func(p *bPerson) bool { return count(p, 14, isAction) >= 2 }},
		{"not buying 3 times in 12 days", strings.Replace(behavioral("buy", "performed_event_multiple", "events", `,"operator":"gte","operator_value":3`, 12), "{", `{"negation":true,`, 1),
			func(p *bPerson) bool { return count(p, 12, isBuy) < 3 }},
		{"buy more than once and fewer than 3 times in 20 days (gt, lt)", behavioral("buy", "performed_event_multiple", "events", `,"operator":"gt","operator_value":1`, 20) +
			"," + behavioral("buy", "performed_event_multiple", "events", `,"operator":"lt","operator_value":3`, 20),
			func(p *bPerson) bool { return count(p, 20, isBuy) == 2 }},
		{"$set from the API is not behaviour", behavioral("$set", "performed_event", "events", "", 30),
			func(p *bPerson) bool { return false }},
	}
	for _, tc := range cases {
		body := fmt.Sprintf(`{"name":%q,"filters":{"properties":{"type":"AND","values":[%s]}}}`, tc.name, tc.filter)
		r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), body)
		if r.status != 201 {
			t.Fatalf("%s: create %d %s", tc.name, r.status, r.body)
		}
		c := r.json(t)
		var want []string
		for _, p := range persons {
			if !p.deleted && tc.want(p) {
				ids := slices.Clone(p.ids)
				sort.Strings(ids)
				want = append(want, strings.Join(ids, "+"))
			}
		}
		sort.Strings(want)
		if got := cohortPersonKeys(t, e, c["id"]); !slices.Equal(got, want) {
			t.Fatalf("%s: members %v, want %v", tc.name, got, want)
		}
		if len(want) == 0 && !strings.HasPrefix(tc.name, "$set") || len(want) == len(persons) {
			t.Fatalf("%s: %d of %d persons: the history does not test it", tc.name, len(want), len(persons))
		}
		if c["count"].(float64) != float64(len(want)) || c["cohort_type"] != "behavioral" {
			t.Fatalf("%s: count %v, want %d", tc.name, c["count"], len(want))
		}
	}
	// The deprecated groups: action_id with days, count and count_operator.
	r = e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID),
		fmt.Sprintf(`{"name":"g","groups":[{"action_id":%v,"days":14,"count":2,"count_operator":"gte"}]}`, action))
	if r.status != 201 {
		t.Fatalf("groups: %d %s", r.status, r.body)
	}
	var want []string
	for _, p := range persons {
		if !p.deleted && count(p, 14, isAction) >= 2 {
			ids := slices.Clone(p.ids)
			sort.Strings(ids)
			want = append(want, strings.Join(ids, "+"))
		}
	}
	sort.Strings(want)
	if got := cohortPersonKeys(t, e, r.json(t)["id"]); !slices.Equal(got, want) || len(want) < 3 {
		t.Fatalf("groups with action_id: %v, want %v", got, want)
	}
	// Refusals: 400 attr filters naming the problem.
	for _, tc := range []struct{ filter, detail string }{
		{behavioral(99999, "performed_event", "actions", "", 7), "unknown action 99999"},
		{behavioral("buy", "performed_event", "actions", "", 7), "action id"},
		{behavioral("buy", "stopped_performing_event", "events", "", 7), "stopped_performing_event"},
		{behavioral("buy", "performed_event_multiple", "events", `,"operator":"gte"`, 7), "operator_value"},
		{behavioral("buy", "performed_event_multiple", "events", `,"operator":"gte","operator_value":0`, 7), "operator_value"},
		{behavioral("buy", "performed_event_multiple", "events", `,"operator":"ne","operator_value":1`, 7), "operator"},
		{behavioral("buy", "performed_event", "groups", "", 7), "event_type"},
	} {
		body := fmt.Sprintf(`{"name":"x","filters":{"properties":{"type":"AND","values":[%s]}}}`, tc.filter)
		m := wantError(t, e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), body), 400, "validation_error", "invalid_input")
		if m["attr"] != "filters" || !strings.Contains(m["detail"].(string), tc.detail) {
			t.Fatalf("%s: %v", tc.filter, m)
		}
	}
}
