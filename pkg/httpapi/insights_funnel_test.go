package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

const funnel3 = `[{"id":"step one","type":"events","order":0},{"id":"step two","type":"events","order":1},{"id":"step three","type":"events","order":2}]`

// funnelPersons pages a funnel route through next to the end, checks the
// answer is in person id order without repeats, and returns every
// person's first distinct id, sorted.
func (e *env) funnelPersons(route string, p url.Values) []string {
	e.t.Helper()
	var all []string
	var pids []uint64
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%s/?%s", e.projectA.ID, route, p.Encode()))
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.t.Fatalf("%s: next never ends", route)
		}
		ids, _, next := e.actorsOf(r)
		all = append(all, ids...)
		var body struct {
			Results []struct {
				People []struct{ ID uint64 } `json:"people"`
			} `json:"results"`
		}
		_ = json.Unmarshal(r.body, &body)
		for _, x := range body.Results[0].People {
			pids = append(pids, x.ID)
		}
		if next == "" {
			break
		}
		u, err := url.Parse(next)
		if err != nil {
			e.t.Fatal(err)
		}
		r = e.get(e.keyAll, u.RequestURI())
	}
	for i := 1; i < len(pids); i++ {
		if pids[i] <= pids[i-1] {
			e.t.Fatalf("%s: person ids not ascending: %v", route, pids)
		}
	}
	sort.Strings(all)
	return all
}

// Reference §11.4: 5 persons complete the funnel, 10 stop at step two,
// 20 at step one; 110 more complete it for paging.
func TestFunnelWorked(t *testing.T) {
	e := newEnv(t)
	var evs []ev
	add := func(id string, steps int) {
		for s, name := range []string{"step one", "step two", "step three"}[:steps] {
			evs = append(evs, ev{name: name, distinctID: id, at: day("2021-05-01", 0).AddDate(0, 0, 2*s)})
		}
	}
	for i := range 35 {
		add(fmt.Sprintf("user_%d", i), map[bool]int{true: 3, false: map[bool]int{true: 2, false: 1}[i < 15]}[i < 5])
	}
	e.publishEvents(e.projectA.ID, evs...)
	count := func(kv ...string) int {
		p := params(append([]string{"events", funnel3, "date_from", "2021-05-01", "date_to", "2021-05-07", "funnel_window_days", "7"}, kv...)...)
		return len(e.funnelPersons("funnel", p))
	}
	for step, want := range map[string]int{"1": 35, "2": 15, "3": 5, "-2": 20, "-3": 10} {
		if got := count("funnel_step", step); got != want {
			t.Errorf("funnel_step=%s: %d persons, want %d", step, got, want)
		}
	}
	for steps, want := range map[string]int{"[1,2]": 30, "[1,3]": 25, "[3]": 5} {
		if got := count("funnel_custom_steps", steps); got != want {
			t.Errorf("funnel_custom_steps=%s: %d persons, want %d", steps, got, want)
		}
	}

	// Paging: 110 more complete every step; limit 100 then 10.
	evs = nil
	for i := range 110 {
		add(fmt.Sprintf("page_%03d", i), 3)
	}
	e.publishEvents(e.projectA.ID, evs...)
	p := params("events", funnel3, "date_from", "2021-05-01", "date_to", "2021-05-07", "funnel_step", "3")
	ids, _, next := e.actors("funnel", p)
	if len(ids) != 100 || next == "" {
		t.Fatalf("first page: %d persons, next %q", len(ids), next)
	}
	u, _ := url.Parse(next)
	rest, _, next2 := e.actorsOf(e.get(e.keyAll, u.RequestURI()))
	if len(rest) != 15 || next2 != "" || u.Query().Get("offset") != "100" {
		t.Errorf("second page: %d persons, next %q (from %s)", len(rest), next2, next)
	}
}

// Reference §11.4, breakdown: person1 (Chrome 95) and person2 (Safari).
func TestFunnelBreakdown(t *testing.T) {
	e := newEnv(t)
	chrome := map[string]any{"$browser": "Chrome", "$browser_version": 95}
	safari := map[string]any{"$browser": "Safari", "$browser_version": 15}
	e.publishEvents(e.projectA.ID,
		ev{name: "sign up", distinctID: "person1", at: day("2020-01-01", 12), props: chrome},
		ev{name: "play movie", distinctID: "person1", at: day("2020-01-01", 13), props: chrome},
		ev{name: "buy", distinctID: "person1", at: day("2020-01-01", 15), props: chrome},
		ev{name: "sign up", distinctID: "person2", at: day("2020-01-02", 14), props: safari},
		ev{name: "play movie", distinctID: "person2", at: day("2020-01-02", 16), props: safari},
	)
	steps := `[{"id":"sign up","order":0,"type":"events"},{"id":"play movie","order":1,"type":"events"},{"id":"buy","order":2,"type":"events"}]`
	get := func(kv ...string) []string {
		p := params(append([]string{"events", steps, "date_from", "2020-01-01", "date_to", "2020-01-08", "funnel_step", "1", "breakdown", "$browser"}, kv...)...)
		return e.funnelPersons("funnel", p)
	}
	for name, c := range map[string]struct {
		kv   []string
		want []string
	}{
		"all":    {nil, []string{"person1", "person2"}},
		"Chrome": {[]string{"funnel_step_breakdown", "Chrome"}, []string{"person1"}},
		"Safari": {[]string{"funnel_step_breakdown", "Safari"}, []string{"person2"}},
		"multi": {[]string{"breakdown", `["$browser","$browser_version"]`, "funnel_step_breakdown", `["Chrome","95"]`},
			[]string{"person1"}},
		"multi number": {[]string{"breakdown", `["$browser","$browser_version"]`, "funnel_step_breakdown", `["Chrome",95]`},
			[]string{"person1"}},
	} {
		if got := get(c.kv...); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// Reference §11.7: funnel [signup, buy], 14-day window, entity video.
func TestFunnelCorrelationWorked(t *testing.T) {
	e := newEnv(t)
	t0 := day("2021-06-10", 12)
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	e.publishEvents(e.projectA.ID,
		ev{name: "signup", distinctID: "P1", at: at(0)}, ev{name: "video", distinctID: "P1", at: at(1)}, ev{name: "buy", distinctID: "P1", at: at(2)},
		ev{name: "signup", distinctID: "P2", at: at(0)}, ev{name: "video", distinctID: "P2", at: at(1)},
		ev{name: "signup", distinctID: "P3", at: at(0)}, ev{name: "buy", distinctID: "P3", at: at(1)},
		ev{name: "video", distinctID: "P4", at: at(-1)}, ev{name: "signup", distinctID: "P4", at: at(0)},
	)
	steps := `[{"id":"signup","type":"events","order":0},{"id":"buy","type":"events","order":1}]`
	corr := func(kv ...string) []string {
		p := params(append([]string{"events", steps, "date_from", "2021-06-01", "date_to", "2021-06-20", "funnel_window_days", "14",
			"funnel_correlation_person_entity", `{"id":"video","type":"events"}`}, kv...)...)
		return e.funnelPersons("funnel/correlation", p)
	}
	if got := corr("funnel_correlation_person_converted", "true"); !slices.Equal(got, []string{"P1"}) {
		t.Errorf("converted: %v", got)
	}
	if got := corr("funnel_correlation_person_converted", "false"); !slices.Equal(got, []string{"P2"}) {
		t.Errorf("not converted: %v", got)
	}
	if got := corr(); !slices.Equal(got, []string{"P1", "P2"}) {
		t.Errorf("both: %v", got)
	}
	// The funnel route answers a correlation request too.
	p := params("events", steps, "date_from", "2021-06-01", "date_to", "2021-06-20", "funnel_correlation_person_entity", `{"id":"video","type":"events"}`)
	if got := e.funnelPersons("funnel", p); !slices.Equal(got, []string{"P1", "P2"}) {
		t.Errorf("funnel/ with the correlation entity: %v", got)
	}
	// Paging by the correlation names.
	p.Set("funnel_correlation_person_limit", "1")
	ids, _, next := e.actors("funnel/correlation", p)
	if len(ids) != 1 || !strings.Contains(next, "funnel_correlation_person_offset=1") {
		t.Errorf("correlation page: %v next %q", ids, next)
	}
	if got := e.funnelPersons("funnel/correlation", p); !slices.Equal(got, []string{"P1", "P2"}) {
		t.Errorf("correlation paged: %v", got)
	}
}
