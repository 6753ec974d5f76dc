package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func (e *env) pathActors(p url.Values) []string {
	e.t.Helper()
	return e.pageAll(e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/path/?%s", e.projectA.ID, p.Encode())))
}

// pageAll reads the persons of an actor answer and of every page after
// it, following next.
func (e *env) pageAll(r response) []string {
	e.t.Helper()
	ids, _, next := e.actorsOf(r)
	for pages := 0; next != ""; pages++ {
		if pages > 50 {
			e.t.Fatal("next never ends")
		}
		u, _ := url.Parse(next)
		var more []string
		more, _, next = e.actorsOf(e.get(e.keyAll, u.RequestURI()))
		ids = append(ids, more...)
	}
	return ids
}

// Reference §11.6, and its session variant.
func TestActorsWorkedPaths(t *testing.T) {
	e := newEnv(t)
	at := func(hms string) time.Time { t0, _ := time.Parse("2006-01-02 15:04:05", "2012-01-01 "+hms); return t0 }
	pv := func(id, u, hms string) ev {
		return ev{name: "$pageview", distinctID: id, at: at(hms), props: map[string]any{"$current_url": u}}
	}
	e.publishEvents(e.projectA.ID, pv("fake", "/1", "03:21:34"), pv("fake", "/2/", "03:22:34"), pv("fake", "/3", "03:24:34"), pv("fake", "/4", "03:27:34"),
		pv("split", "/1", "03:21:34"), pv("split", "/2", "03:22:34"), pv("split", "/3", "03:53:34"), pv("split", "/4", "03:54:34"))
	check := func(want []string, kv ...string) {
		t.Helper()
		p := params(append([]string{"date_from", "2012-01-01", "date_to", "2012-01-02"}, kv...)...)
		if got := e.pathActors(p); !slices.Equal(got, want) {
			t.Errorf("%v: %v, want %v", kv, got, want)
		}
	}
	check([]string{"fake", "split"}, "step_limit", "2", "path_start_key", "1_/1", "path_end_key", "2_/2")
	check(nil, "step_limit", "2", "path_start_key", "2_/2", "path_end_key", "3_/3")
	for _, edge := range [][2]string{{"1_/1", "2_/2"}, {"2_/2", "3_/3"}, {"3_/3", "4_/4"}} {
		want := []string{"fake"}
		if edge[0] == "1_/1" {
			want = []string{"fake", "split"}
		}
		check(want, "step_limit", "4", "path_start_key", edge[0], "path_end_key", edge[1])
	}
	check([]string{"fake"}, "step_limit", "4", "path_dropoff_key", "4_/4")
	check(nil, "step_limit", "4", "path_dropoff_key", "3_/3")
	check([]string{"split"}, "path_start_key", "1_/3", "path_end_key", "2_/4")
	check([]string{"fake", "split"}, "path_dropoff_key", "2_/4", "end_point", "/4", "step_limit", "2")
	check([]string{"split"}, "path_start_key", "1_/3")
	check([]string{"fake", "split"}, "path_end_key", "2_/2")
	check([]string{"fake"}, "start_point", "/1", "end_point", "/4", "path_dropoff_key", "4_/4")
	check([]string{"fake"}, "start_point", "/1", "end_point", "/4", "step_limit", "2", "path_dropoff_key", "3_/4")
	check([]string{"fake", "split"}, "path_groupings", `["/*"]`, "path_dropoff_key", "1_/*")
	check([]string{"fake"}, "exclude_events", `["/3"]`, "path_start_key", "2_/2", "path_end_key", "3_/4")

	// POST: the body's parameters over the query string's; next is a GET.
	body := `{"date_from":"2012-01-01","date_to":"2012-01-02","step_limit":4,"path_start_key":"3_/3","path_end_key":"4_/4","include_event_types":["$pageview"]}`
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/path/?step_limit=2", e.projectA.ID), body)
	if ids, _, _ := e.actorsOf(r); !slices.Equal(ids, []string{"fake"}) {
		t.Errorf("POST: %v", ids)
	}
}

// A generated history of pageviews and custom events over a few URLs,
// with session gaps, against paths computed here; paging, CSV, 400s.
func TestActorsPathsGenerated(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewSource(11))
	items := []string{"/a", "/b", "/c", "/d", "buy"}
	var evs []ev
	seqs := map[string][]ev{}
	t0 := day("2023-05-02", 8)
	for i := range 40 {
		id := fmt.Sprintf("q%02d", i)
		at := t0.Add(time.Duration(rng.Intn(600)) * time.Minute)
		for range 1 + rng.Intn(9) {
			gaps := []time.Duration{time.Minute, 5 * time.Minute, 29 * time.Minute, 30 * time.Minute, 2 * time.Hour}
			at = at.Add(gaps[rng.Intn(len(gaps))])
			it := items[rng.Intn(len(items))]
			x := ev{name: it, distinctID: id, at: at}
			if strings.HasPrefix(it, "/") {
				x = ev{name: "$pageview", distinctID: id, at: at, props: map[string]any{"$current_url": "https://x.io" + it}}
			}
			evs = append(evs, x)
			seqs[id] = append(seqs[id], x)
		}
	}
	// qx walks only items the no-key cases exclude below.
	for _, x := range []ev{{name: "buy", distinctID: "qx", at: t0}, {name: "$pageview", distinctID: "qx", at: t0.Add(time.Minute), props: map[string]any{"$current_url": "https://x.io/a/"}}} {
		evs = append(evs, x)
		seqs["qx"] = append(seqs["qx"], x)
	}
	// q01 takes over q02 after the window (attribution is by the owner
	// now): q02's events join q01's sessions. q03 is deleted.
	evs = append(evs, ev{name: "$identify", distinctID: "q01", at: day("2023-05-05", 0), props: map[string]any{"$anon_distinct_id": "q02"}})
	seqs["q01"] = append(seqs["q01"], seqs["q02"]...)
	delete(seqs, "q02")
	e.publishEvents(e.projectA.ID, evs...)
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=q03", e.projectA.ID)).json(t)["results"].([]any)
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, list[0].(map[string]any)["id"])); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	delete(seqs, "q03")
	for _, tc := range [][]string{
		{"path_start_key", "1_https://x.io/a", "path_end_key", "2_https://x.io/b"},
		{"path_start_key", "2_buy"},
		{"path_end_key", "3_https://x.io/c"},
		{"path_dropoff_key", "2_buy"},
		{"path_dropoff_key", "3_https://x.io/d", "step_limit", "3"},
		{"start_point", "https://x.io/b", "path_start_key", "1_https://x.io/b", "path_end_key", "2_buy"},
		{"end_point", "buy", "path_dropoff_key", "2_buy", "step_limit", "2"},
		{"start_point", "https://x.io/a", "end_point", "buy", "step_limit", "2", "path_start_key", "1_https://x.io/a", "path_end_key", "2_..."},
		{"start_point", "https://x.io/a", "end_point", "buy", "step_limit", "4", "path_dropoff_key", "3_buy"},
		{},
		// No key: every person with an event left (qx has only buy and /a).
		{"exclude_events", `["buy", "https://x.io/a"]`},
		{"exclude_events", `["buy"]`, "step_limit", "1"},
	} {
		p := params(append([]string{"date_from", "2023-05-02", "date_to", "2023-05-03", "limit", "7"}, tc...)...)
		got := e.pathActors(p)
		want := refPathPersons(seqs, p)
		if !slices.Equal(got, want) {
			t.Errorf("%v:\n got %v\nwant %v", tc, got, want)
		}
	}
	// POST with limit 3: next pages by GET to the same persons.
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/path/", e.projectA.ID),
		`{"date_from":"2023-05-02","date_to":"2023-05-03","limit":3,"path_end_key":"3_https://x.io/c","include_event_types":["$pageview","custom_event"]}`)
	ids := e.pageAll(r)
	if want := refPathPersons(seqs, params("path_end_key", "3_https://x.io/c")); !slices.Equal(ids, want) || len(want) < 4 {
		t.Errorf("POST paged: %v, want %v", ids, want)
	}
	bad := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/path/", e.projectA.ID), `[1]`)
	if m := wantError(t, bad, 400, "validation_error", "invalid_input"); m["attr"] != "body" {
		t.Errorf("POST [1]: attr %v", m["attr"])
	}
	csv := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/path/?format=csv&date_from=2023-05-02&date_to=2023-05-03", e.projectA.ID))
	if lines := strings.Split(strings.TrimSpace(string(csv.body)), "\n"); csv.status != 200 || len(lines) != len(seqs)+1 {
		t.Errorf("csv %d: %d lines", csv.status, len(lines))
	}
	e.wantAttrs(fmt.Sprintf("/api/projects/%d/persons/path/", e.projectA.ID), map[string]string{
		"?path_start_key=x":                    "path_start_key",
		"?path_end_key=0_/a":                   "path_end_key",
		"?step_limit=0":                        "step_limit",
		"?include_event_types=[\"hogql\"]":     "include_event_types",
		"?exclude_events={":                    "exclude_events",
		"?path_groupings=[1]":                  "path_groupings",
		"?funnel_paths=funnel_path_after_step": "funnel_paths",
		"?local_path_cleaning_filters=[{\"regex\":\"(\",\"alias\":\"x\"}]": "local_path_cleaning_filters",
		"?date_from=soon": "date_from",
	})
}

// refPathPersons is the reference of §8 over each person's events:
// sessions, collapsed runs, start/end points, step_limit, the key match.
func refPathPersons(seqs map[string][]ev, p url.Values) []string {
	limit := 5
	fmt.Sscan(p.Get("step_limit"), &limit)
	key := func(name string) (int, string, bool) {
		s := p.Get(name)
		i := strings.IndexByte(s, '_')
		if i < 0 {
			return 0, "", false
		}
		var n int
		fmt.Sscan(s[:i], &n)
		return n, s[i+1:], true
	}
	var exclude []string
	_ = json.Unmarshal([]byte(p.Get("exclude_events")), &exclude)
	itemOf := func(x ev) string {
		if x.name == "$pageview" {
			return strings.TrimSuffix(x.props["$current_url"].(string), "/")
		}
		return x.name
	}
	var out []string
	for id, all := range seqs {
		// Excluded events (by name or item) are left out before sessions.
		var evs []ev
		for _, x := range all {
			if !slices.Contains(exclude, x.name) && !slices.Contains(exclude, itemOf(x)) {
				evs = append(evs, x)
			}
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		var sessions [][]string
		for i, x := range evs {
			it := itemOf(x)
			if i == 0 || x.at.Sub(evs[i-1].at) >= 30*time.Minute {
				sessions = append(sessions, nil)
			}
			s := &sessions[len(sessions)-1]
			if n := len(*s); n > 0 && (*s)[n-1] == it {
				continue
			}
			*s = append(*s, it)
		}
		hit := false
		for _, s := range sessions {
			path := refShape(s, p.Get("start_point"), p.Get("end_point"), limit)
			if path == nil {
				continue
			}
			at := func(pos int, item string) bool { return pos >= 1 && pos <= len(path) && path[pos-1] == item }
			sp, si, hasS := key("path_start_key")
			ep, ei, hasE := key("path_end_key")
			dp, di, hasD := key("path_dropoff_key")
			switch {
			case hasD:
				hit = hit || len(path) == dp && at(dp, di)
			case hasS && hasE:
				hit = hit || ep == sp+1 && at(sp, si) && at(ep, ei)
			case hasS:
				hit = hit || at(sp, si) && len(path) > sp
			case hasE:
				hit = hit || ep >= 2 && at(ep, ei)
			default:
				hit = true
			}
		}
		if hit {
			out = append(out, id)
		}
	}
	sort.Strings(out) // distinct ids are created in person id order
	return out
}

func refShape(s []string, start, end string, limit int) []string {
	if start != "" {
		i := slices.Index(s, start)
		if i < 0 {
			return nil
		}
		s = s[i:]
	}
	if end != "" {
		j := slices.Index(s, end)
		if j < 0 {
			return nil
		}
		s = s[:j+1]
		if start == "" {
			return s[max(0, len(s)-limit):]
		}
		if len(s) > limit {
			h := limit / 2
			return append(append(slices.Clone(s[:h]), "..."), s[len(s)-h:]...)
		}
		return s
	}
	return s[:min(limit, len(s))]
}
