package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/stream"
)

// withCohorts sets the dependencies of the actions, cohorts and actor
// routes in the deps of a test API.
func withCohorts(t *testing.T, d *Deps, js jetstream.JetStream, store *chstore.Store) {
	t.Helper()
	actions, err := action.Open(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	insights := insight.New(store.Conn(), actions)
	cohorts, err := cohort.Open(context.Background(), js, store.Conn(), insights)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cohorts.Close) // before ClickHouse stops (cleanups run last first)
	d.Actions, d.Cohorts, d.Insights = actions, cohorts, insights
}

// refPerson is the reference model of a person: what the generated
// history says, computed apart from the SQL.
type refPerson struct {
	ids    []string
	props  map[string]any
	events map[string][]time.Time // event name -> times
}

// cohortWorld publishes a history with merges, a deletion and repeated
// property changes, and keeps the reference model of it.
type cohortWorld struct {
	e       *env
	persons map[string]*refPerson // by first distinct id
	now     time.Time
}

func (w *cohortWorld) publish(ts time.Time, ev string) uint64 {
	w.e.t.Helper()
	id := uuid.NewString()
	body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, ts.UTC().Format(time.RFC3339), strings.TrimPrefix(ev, "{"))
	ack, err := stream.Publish(context.Background(), w.e.nats.JS, w.e.projectA.ID, id, []byte(body))
	if err != nil {
		w.e.t.Fatal(err)
	}
	return ack.Sequence
}

func newCohortWorld(t *testing.T) *cohortWorld {
	e := newEnv(t)
	e.startIngester()
	now := time.Now().UTC()
	w := &cohortWorld{e: e, now: now, persons: map[string]*refPerson{}}
	day := 24 * time.Hour
	type ev struct {
		ago  time.Duration
		body string
	}
	history := []ev{
		{30 * day, `{"event":"signup","distinct_id":"u1","$set":{"plan":"pro","n":1}}`},
		{2 * day, `{"event":"$pageview","distinct_id":"u1"}`},
		{30 * day, `{"event":"signup","distinct_id":"u2","$set":{"plan":"free","n":2}}`},
		{10 * day, `{"event":"$pageview","distinct_id":"u2"}`},
		{1 * day, `{"event":"signup","distinct_id":"u3","$set":{"plan":"pro","n":3}}`},
		// u4 browses anonymously, then is identified as u5: one person.
		{1 * day, `{"event":"$pageview","distinct_id":"u4"}`},
		{20 * day, `{"event":"signup","distinct_id":"u5","$set":{"plan":"free","n":5}}`},
		{12 * time.Hour, `{"event":"$identify","distinct_id":"u5","properties":{"$anon_distinct_id":"u4"}}`},
		// u6 is deleted below.
		{3 * day, `{"event":"$pageview","distinct_id":"u6","$set":{"plan":"pro","n":6}}`},
		// u7 changes plan three times: one person, one value.
		{9 * day, `{"event":"signup","distinct_id":"u7","$set":{"plan":"free","n":7}}`},
		{8 * day, `{"event":"upgrade","distinct_id":"u7","$set":{"plan":"pro"}}`},
		{7 * day, `{"event":"upgrade","distinct_id":"u7","$set":{"plan":"enterprise"}}`},
		{40 * day, `{"event":"signup","distinct_id":"u8","$set":{"plan":"Pro ","tags":{"b":1,"a":true}}}`},
	}
	var last uint64
	for _, h := range history {
		last = w.publish(now.Add(-h.ago), h.body)
	}
	if err := e.waitSeq(last); err != nil {
		t.Fatal(err)
	}
	// The reference model of the same history.
	add := func(first string, ids []string, props map[string]any, events map[string][]time.Time) {
		w.persons[first] = &refPerson{ids: ids, props: props, events: events}
	}
	add("u1", []string{"u1"}, map[string]any{"plan": "pro", "n": 1.0}, map[string][]time.Time{"signup": {now.Add(-30 * day)}, "$pageview": {now.Add(-2 * day)}})
	add("u2", []string{"u2"}, map[string]any{"plan": "free", "n": 2.0}, map[string][]time.Time{"signup": {now.Add(-30 * day)}, "$pageview": {now.Add(-10 * day)}})
	add("u3", []string{"u3"}, map[string]any{"plan": "pro", "n": 3.0}, map[string][]time.Time{"signup": {now.Add(-1 * day)}})
	add("u5", []string{"u4", "u5"}, map[string]any{"plan": "free", "n": 5.0}, map[string][]time.Time{"signup": {now.Add(-20 * day)}, "$pageview": {now.Add(-1 * day)}})
	add("u7", []string{"u7"}, map[string]any{"plan": "enterprise", "n": 7.0}, map[string][]time.Time{"signup": {now.Add(-9 * day)}, "upgrade": {now.Add(-8 * day), now.Add(-7 * day)}})
	add("u8", []string{"u8"}, map[string]any{"plan": "Pro ", "tags": `{"a":true,"b":1}`}, map[string][]time.Time{"signup": {now.Add(-40 * day)}})
	// Delete u6 through the API (the reference never had it as live).
	u6 := w.person("u6")
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, u6.ID)); r.status != 204 {
		t.Fatalf("delete u6: %d %s", r.status, r.body)
	}
	return w
}

// person reads a live person by distinct id.
func (w *cohortWorld) person(distinctID string) chstore.PersonRecord {
	w.e.t.Helper()
	p, _, err := w.e.store.ListPersons(context.Background(), chstore.ListQuery{ProjectID: w.e.projectA.ID, DistinctID: distinctID, Limit: 1})
	if err != nil || len(p) != 1 {
		w.e.t.Fatalf("person %s: %v %v", distinctID, p, err)
	}
	return p[0]
}

// refSelect is the reference membership: the first ids of the live
// persons for which pred holds, sorted.
func (w *cohortWorld) refSelect(pred func(p *refPerson) bool) []string {
	var out []string
	for first, p := range w.persons {
		if pred(p) {
			out = append(out, first)
		}
	}
	sort.Strings(out)
	return out
}

func didWithin(p *refPerson, event string, since time.Time) bool {
	return slices.ContainsFunc(p.events[event], func(t time.Time) bool { return !t.Before(since) })
}

// listed returns the sorted first distinct ids (u-number order) of the
// persons list filtered by properties.
func (w *cohortWorld) listed(properties string) []string {
	w.e.t.Helper()
	r := w.e.get(w.e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?properties=%s", w.e.projectA.ID, url.QueryEscape(properties)))
	if r.status != 200 {
		w.e.t.Fatalf("persons list %s: %d %s", properties, r.status, r.body)
	}
	var out []string
	for _, p := range r.json(w.e.t)["results"].([]any) {
		ids := p.(map[string]any)["distinct_ids"].([]any)
		strs := make([]string, len(ids))
		for i, id := range ids {
			strs[i] = id.(string)
		}
		sort.Strings(strs)
		out = append(out, w.firstOf(strs))
	}
	sort.Strings(out)
	return out
}

// firstOf maps a person's ids to the reference key (u4+u5 is "u5").
func (w *cohortWorld) firstOf(ids []string) string {
	for first, p := range w.persons {
		if slices.Equal(p.ids, ids) {
			return first
		}
	}
	return strings.Join(ids, "+")
}

func (w *cohortWorld) createCohort(body string) map[string]any {
	w.e.t.Helper()
	r := w.e.send("POST", w.e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", w.e.projectA.ID), body)
	if r.status != 201 {
		w.e.t.Fatalf("create cohort %s: %d %s", body, r.status, r.body)
	}
	return r.json(w.e.t)
}

func cohortFilter(id any) string { return fmt.Sprintf(`[{"type":"cohort","key":"id","value":%v}]`, id) }

func TestCohortsDynamic(t *testing.T) {
	w := newCohortWorld(t)
	e := w.e
	week := w.now.AddDate(0, 0, -7)
	// (plan = pro AND n > 1) OR performed $pageview in the last 7 days.
	c := w.createCohort(`{"name":"engaged","filters":{"properties":{"type":"OR","values":[
		{"type":"AND","values":[{"type":"person","key":"plan","operator":"exact","value":"pro"},{"type":"person","key":"n","operator":"gt","value":1}]},
		{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event","event_type":"events","time_value":7,"time_interval":"day"}]}]}}}`)
	want := w.refSelect(func(p *refPerson) bool {
		n, _ := p.props["n"].(float64)
		return (p.props["plan"] == "pro" && n > 1) || didWithin(p, "$pageview", week)
	})
	if got := w.listed(cohortFilter(c["id"])); !slices.Equal(got, want) {
		t.Fatalf("dynamic cohort members %v, want %v", got, want)
	}
	if c["count"].(float64) != float64(len(want)) || c["is_static"] != false || c["cohort_type"] != "behavioral" || c["is_calculating"] != false {
		t.Fatalf("cohort %v, want count %d", c, len(want))
	}
	// A window of 1 day: u4's pageview (now u5's) 1 day ago counts, u1's 2 days ago does not.
	c1 := w.createCohort(`{"name":"today","filters":{"properties":{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event","time_value":36,"time_interval":"hour"}]}}}`)
	want1 := w.refSelect(func(p *refPerson) bool { return didWithin(p, "$pageview", w.now.Add(-36*time.Hour)) })
	if got := w.listed(cohortFilter(c1["id"])); !slices.Equal(got, want1) || !slices.Equal(want1, []string{"u5"}) {
		t.Fatalf("36h cohort %v, want %v", got, want1)
	}
	// A cohort of cohorts, with negation: members of "engaged" that are not on the free plan.
	c2 := w.createCohort(fmt.Sprintf(`{"name":"nested","filters":{"properties":{"type":"AND","values":[
		{"type":"cohort","key":"id","value":%v},{"type":"person","key":"plan","operator":"exact","value":"free","negation":true}]}}}`, c["id"]))
	want2 := w.refSelect(func(p *refPerson) bool { return slices.Contains(want, w.firstOf(p.ids)) && p.props["plan"] != "free" })
	if got := w.listed(cohortFilter(c2["id"])); !slices.Equal(got, want2) {
		t.Fatalf("nested cohort %v, want %v", got, want2)
	}
	// A loop is refused.
	r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c["id"]),
		fmt.Sprintf(`{"filters":{"properties":{"type":"AND","values":[{"type":"cohort","key":"id","value":%v}]}}}`, c2["id"]))
	if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "filters" {
		t.Fatalf("loop: %v", m)
	}
	// persons/cohorts/ for the merged person, by id and by uuid.
	u5 := w.person("u5")
	for _, ref := range []string{fmt.Sprint(u5.ID), u5.UUID.String()} {
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%s", e.projectA.ID, ref))
		if r.status != 200 {
			t.Fatalf("persons/cohorts: %d %s", r.status, r.body)
		}
		var got []float64
		for _, x := range r.json(t)["results"].([]any) {
			got = append(got, x.(map[string]any)["id"].(float64))
		}
		// u5 (pageview 1 day ago, plan free): engaged and today, not nested.
		if wantIDs := []float64{c["id"].(float64), c1["id"].(float64)}; !slices.Equal(got, wantIDs) {
			t.Fatalf("persons/cohorts of u5 = %v, want %v", got, wantIDs)
		}
	}
	m := wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/", e.projectA.ID)), 400, "validation_error", "required")
	if m["attr"] != "person_id" {
		t.Fatalf("missing person_id: %v", m)
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=abc", e.projectA.ID)), 400, "validation_error", "invalid_input")
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=999999", e.projectA.ID)), 404, "invalid_request", "not_found")
	// The deleted person is unknown.
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%s", e.projectA.ID, uuid.NewSHA1(uuid.Nil, []byte("x")))), 404, "invalid_request", "not_found")
	// person:read alone is not enough for persons/cohorts/.
	wantError(t, e.get(e.keyRead, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%d", e.projectA.ID, u5.ID)), 403, "authentication_error", "permission_denied")

	// Unknown cohort in the persons list: 400 attr properties.
	m = wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?properties=%s", e.projectA.ID, url.QueryEscape(cohortFilter(99999)))), 400, "validation_error", "invalid_input")
	if m["attr"] != "properties" {
		t.Fatalf("unknown cohort: %v", m)
	}
	// Soft delete hides the cohort from the list and from filters; retrieve still shows it.
	path := fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c1["id"])
	if r := e.do("DELETE", e.keyAll, path); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, e.do("DELETE", e.keyAll, path), 404, "invalid_request", "not_found")
	if got := e.get(e.keyAll, path).json(t); got["deleted"] != true {
		t.Fatalf("retrieve deleted: %v", got)
	}
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID)).json(t)
	for _, x := range list["results"].([]any) {
		if x.(map[string]any)["id"] == c1["id"] {
			t.Fatalf("deleted cohort listed: %v", list)
		}
	}
	if list["count"].(float64) != 2 {
		t.Fatalf("list count %v", list["count"])
	}
	wantError(t, e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?properties=%s", e.projectA.ID, url.QueryEscape(cohortFilter(c1["id"])))), 400, "validation_error", "invalid_input")
	// Another project cannot see it.
	wantError(t, e.get(e.keyB, fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectB.ID, c["id"])), 404, "invalid_request", "not_found")
	// Bad definitions: 400 attr filters.
	for _, body := range []string{
		`{"name":"x","filters":{}}`,
		`{"name":"x","filters":{"properties":{"type":"AND","values":[{"type":"person","key":"a","operator":"nope","value":1}]}}}`,
		`{"name":"x","filters":{"properties":{"type":"AND","values":[{"type":"behavioral","key":"e","value":"performed_event","time_value":0,"time_interval":"day"}]}}}`,
		`{"name":"x","filters":{"properties":{"type":"AND","values":[{"type":"cohort","key":"id","value":99999}]}}}`,
	} {
		r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), body)
		if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "filters" {
			t.Fatalf("%s: %v", body, m)
		}
	}
}

func TestCohortsStatic(t *testing.T) {
	w := newCohortWorld(t)
	e := w.e
	u1, u2 := w.person("u1"), w.person("u2")
	// By integer id and uuid; an unknown id is ignored.
	c := w.createCohort(fmt.Sprintf(`{"name":"s","is_static":true,"person_ids":[%d,%q,"%s"]}`, u1.ID, u2.UUID, uuid.New()))
	if got := w.listed(cohortFilter(c["id"])); !slices.Equal(got, []string{"u1", "u2"}) || c["count"].(float64) != 2 || c["cohort_type"] != "static" {
		t.Fatalf("static by id/uuid: %v %v", got, c)
	}
	// By distinct id: u4 was merged into u5, so u5 is the member.
	c2 := w.createCohort(`{"name":"d","is_static":true,"distinct_ids":["u4","u6","nobody"]}`)
	if got := w.listed(cohortFilter(c2["id"])); !slices.Equal(got, []string{"u5"}) {
		t.Fatalf("static by distinct id: %v", got)
	}
	// add_persons_to_static_cohort.
	r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/add_persons_to_static_cohort/", e.projectA.ID, c2["id"]), `{"person_ids":["u3"],"distinct_ids":["u3"]}`)
	wantError(t, r, 400, "validation_error", "invalid_input") // "u3" is not a person id
	r = e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/add_persons_to_static_cohort/", e.projectA.ID, c2["id"]), `{"distinct_ids":["u3"]}`)
	if r.status != 200 || r.json(t)["count"].(float64) != 2 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	r = e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/add_persons_to_static_cohort/", e.projectA.ID, c2["id"]), `{"distinct_ids":["nobody"]}`)
	if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "distinct_ids" {
		t.Fatalf("none known: %v", m)
	}
	// CSV uploads: a bare column of distinct ids, and a person_id header.
	for _, tc := range []struct {
		csv  string
		want []string
	}{
		{"u7\r\nu8\r\n\r\nnobody\r\n", []string{"u7", "u8"}},
		{fmt.Sprintf("person_id\n%d\n%s\n", u1.ID, u2.UUID), []string{"u1", "u2"}},
	} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("name", "from csv")
		fw, _ := mw.CreateFormFile("csv", "members.csv")
		_, _ = io.WriteString(fw, tc.csv)
		_ = mw.Close()
		req, _ := http.NewRequest("POST", e.url+fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+e.keyAll)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		_ = json.NewDecoder(res.Body).Decode(&got)
		res.Body.Close()
		if res.StatusCode != 201 || got["is_static"] != true || got["name"] != "from csv" {
			t.Fatalf("csv create: %d %v", res.StatusCode, got)
		}
		if members := w.listed(cohortFilter(got["id"])); !slices.Equal(members, tc.want) {
			t.Fatalf("csv %q: %v, want %v", tc.csv, members, tc.want)
		}
	}
	// A dynamic cohort takes no members; a static one cannot become dynamic.
	r = e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), `{"name":"x","person_ids":[1]}`)
	wantError(t, r, 400, "validation_error", "invalid_input")
	r = e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c["id"]), `{"is_static":false}`)
	wantError(t, r, 400, "validation_error", "invalid_input")
	// PATCH renames; list filters by type and search.
	r = e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/%v/", e.projectA.ID, c["id"]), `{"name":"Renamed","description":"d"}`)
	if got := r.json(t); r.status != 200 || got["name"] != "Renamed" || got["description"] != "d" || got["count"].(float64) != 2 {
		t.Fatalf("patch: %d %v", r.status, got)
	}
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/?type=static&search=renam", e.projectA.ID)).json(t)
	if list["count"].(float64) != 1 || list["results"].([]any)[0].(map[string]any)["id"] != c["id"] {
		t.Fatalf("search: %v", list)
	}
	// A key with cohort:read only can read cohorts but not write them.
	secret, _, err := e.cp.CreateKey(context.Background(), e.projectA.OrganizationID, "cr", []string{"cohort:read"})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.get(secret, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID)); r.status != 200 {
		t.Fatalf("cohort:read list: %d", r.status)
	}
	wantError(t, e.send("POST", secret, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), `{"name":"x","is_static":true}`), 403, "authentication_error", "permission_denied")
}

func TestPersonValues(t *testing.T) {
	w := newCohortWorld(t)
	e := w.e
	values := func(q string) []chstore.PropertyValue {
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/values/?%s", e.projectA.ID, q))
		if r.status != 200 {
			t.Fatalf("values %s: %d %s", q, r.status, r.body)
		}
		var out []chstore.PropertyValue
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("values %s: %s", q, r.body)
		}
		return out
	}
	// The reference: distinct live persons per value, ties by value.
	ref := func(key, contains string) []chstore.PropertyValue {
		counts := map[string]uint64{}
		for _, p := range w.persons {
			v, ok := p.props[key]
			if !ok {
				continue
			}
			s := fmt.Sprint(v)
			if contains != "" && !strings.Contains(strings.ToLower(s), strings.ToLower(contains)) {
				continue
			}
			counts[s]++
		}
		out := []chstore.PropertyValue{}
		for k, n := range counts {
			out = append(out, chstore.PropertyValue{Name: k, Count: n})
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Count != out[j].Count {
				return out[i].Count > out[j].Count
			}
			return out[i].Name < out[j].Name
		})
		return out
	}
	for _, q := range []struct{ key, value string }{{"plan", ""}, {"plan", "PR"}, {"n", ""}, {"tags", ""}, {"missing", ""}} {
		got := values("key=" + url.QueryEscape(q.key) + "&value=" + url.QueryEscape(q.value))
		if want := ref(q.key, q.value); !slices.Equal(got, want) {
			t.Fatalf("values %v = %v, want %v", q, got, want)
		}
	}
	// u7's old plans and deleted u6's "pro" are not counted.
	if got := values("key=plan"); got[0] != (chstore.PropertyValue{Name: "free", Count: 2}) || got[1] != (chstore.PropertyValue{Name: "pro", Count: 2}) {
		t.Fatalf("plan values %v", got)
	}
	if got := values("key="); len(got) != 0 {
		t.Fatalf("no key: %v", got)
	}
	// The counts are kept between requests (pkg/chstore/values_counts.go)
	// and follow writes: once a write is answered, values/ shows it.
	for _, change := range []struct {
		person, method, body string
		edit                 func()
	}{
		{"u3", "PATCH", `{"properties":{"plan":"team"}}`, func() { w.persons["u3"].props["plan"] = "team" }},
		{"u1", "DELETE", "", func() { delete(w.persons, "u1") }},
		{"u2", "POST", `{"$unset":"plan"}`, func() { delete(w.persons["u2"].props, "plan") }},
	} {
		path := fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, w.person(change.person).ID)
		var r response
		switch change.method {
		case "PATCH":
			r = e.send("PATCH", e.keyAll, path, change.body)
		case "DELETE":
			r = e.do("DELETE", e.keyAll, path)
		default:
			r = e.send("POST", e.keyAll, path+"delete_property/", change.body)
		}
		if r.status >= 300 {
			t.Fatalf("%s %s: %d %s", change.method, change.person, r.status, r.body)
		}
		change.edit()
		if got, want := values("key=plan"), ref("plan", ""); !slices.Equal(got, want) {
			t.Fatalf("after %s %s: %v, want %v", change.method, change.person, got, want)
		}
	}
}

func TestActions(t *testing.T) {
	e := newEnv(t)
	base := fmt.Sprintf("/api/projects/%d/actions/", e.projectA.ID)
	r := e.send("POST", e.keyAll, base, `{"name":"signed up","steps":[{"event":"signup","properties":[{"key":"plan","value":"pro","type":"person"}]},{"event":null}]}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	a := r.json(t)
	id := a["id"]
	for _, tc := range []struct{ body, attr string }{
		{`{"name":"x","steps":[]}`, "steps"},
		{`{"name":"x"}`, "steps"},
		{`{"name":"x","steps":[{"event":"e","properties":"{nope"}]}`, "steps"},
		{`{"name":"x","steps":[{"event":"e","properties":[{"key":"a","operator":"bogus"}]}]}`, "steps"},
		{`{"steps":[{"event":"e"}]}`, "name"},
		{`{"name":"","steps":[{"event":"e"}]}`, "name"},
	} {
		if m := wantError(t, e.send("POST", e.keyAll, base, tc.body), 400, "validation_error", "invalid_input"); m["attr"] != tc.attr {
			t.Fatalf("%s: attr %v, want %s", tc.body, m["attr"], tc.attr)
		}
	}
	r2 := e.send("POST", e.keyAll, base, `{"name":"second","steps":[{"event":"$pageview"}]}`)
	list := e.get(e.keyAll, base+"?limit=1").json(t)
	if list["count"].(float64) != 2 || list["next"] == nil || list["results"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("list: %v", list)
	}
	item := fmt.Sprintf("%s%v/", base, id)
	r = e.send("PATCH", e.keyAll, item, `{"name":"renamed"}`)
	if got := r.json(t); got["name"] != "renamed" || len(got["steps"].([]any)) != 2 {
		t.Fatalf("patch: %v", got)
	}
	if r := e.do("DELETE", e.keyAll, item); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	wantError(t, e.do("DELETE", e.keyAll, item), 404, "invalid_request", "not_found")
	if got := e.get(e.keyAll, item).json(t); got["deleted"] != true {
		t.Fatalf("retrieve deleted: %v", got)
	}
	if list := e.get(e.keyAll, base).json(t); list["count"].(float64) != 1 {
		t.Fatalf("list after delete: %v", list)
	}
	wantError(t, e.get(e.keyB, fmt.Sprintf("/api/projects/%d/actions/%v/", e.projectB.ID, r2.json(t)["id"])), 404, "invalid_request", "not_found")
	wantError(t, e.get(e.keyRead, base), 403, "authentication_error", "permission_denied")
	// The Getter hides deleted actions.
	store, err := action.Open(context.Background(), e.nats.JS)
	if err != nil {
		t.Fatal(err)
	}
	var getter action.Getter = store
	if _, err := getter.Get(context.Background(), e.projectA.ID, uint64(id.(float64))); err != action.ErrNotFound {
		t.Fatalf("getter on deleted: %v", err)
	}
	got, err := getter.Get(context.Background(), e.projectA.ID, uint64(r2.json(t)["id"].(float64)))
	if err != nil || got.Name != "second" || got.ProjectID != e.projectA.ID {
		t.Fatalf("getter: %v %v", got, err)
	}
}
