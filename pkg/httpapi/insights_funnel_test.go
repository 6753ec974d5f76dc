package httpapi

import (
	"context"
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

// Edges: two steps in the same second convert in either order of arrival;
// a month window is calendar months (Jan 31 + 1 month = Feb 28); a step
// repeated (a, a) needs two events; last_touch and person breakdowns; the
// properties and event_with_properties correlation rows, a merged person
// once.
func TestFunnelEdges(t *testing.T) {
	e := newEnv(t)
	e.publishEvents(e.projectA.ID,
		ev{name: "b", distinctID: "tie1", at: day("2021-01-10", 5)}, ev{name: "a", distinctID: "tie1", at: day("2021-01-10", 5)},
		ev{name: "a", distinctID: "tie2", at: day("2021-01-10", 5)}, ev{name: "b", distinctID: "tie2", at: day("2021-01-10", 5)},
		ev{name: "a", distinctID: "month1", at: day("2021-01-31", 10), props: map[string]any{"src": "ad"}},
		ev{name: "b", distinctID: "month1", at: day("2021-02-28", 10), props: map[string]any{"src": "mail"}},
		ev{name: "a", distinctID: "month2", at: day("2021-01-31", 10)},
		ev{name: "b", distinctID: "month2", at: day("2021-02-28", 10).Add(time.Second)},
		ev{name: "v", distinctID: "month2", at: day("2021-02-01", 10), props: map[string]any{"q": "hd"}},
		ev{name: "a", distinctID: "twice", at: day("2021-01-12", 1), extra: `"$set":{"plan":"pro"}`},
		ev{name: "a", distinctID: "twice", at: day("2021-01-12", 2)},
		ev{name: "v", distinctID: "twice", at: day("2021-01-12", 3), props: map[string]any{"q": "sd"}},
		ev{name: "a", distinctID: "mergeX", at: day("2021-01-13", 1)},
		ev{name: "$identify", distinctID: "mergeY", at: day("2021-01-13", 2), props: map[string]any{"$anon_distinct_id": "mergeX"}, extra: `"$set":{"plan":"pro"}`},
		ev{name: "v", distinctID: "mergeX", at: day("2021-01-13", 3), props: map[string]any{"q": "hd"}},
		ev{name: "b", distinctID: "mergeY", at: day("2021-01-13", 4)},
		ev{name: "a", distinctID: "tz", at: day("2021-01-20", 20)}, ev{name: "b", distinctID: "tz", at: day("2021-01-20", 21)},
	)
	ab := `[{"id":"a","order":0},{"id":"b","order":1}]`
	get := func(route, steps string, kv ...string) []string {
		p := params(append([]string{"events", steps, "date_from", "2021-01-01", "date_to", "2021-03-31"}, kv...)...)
		return e.funnelPersons(route, p)
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("ties, 1-day window", get("funnel", ab, "funnel_step", "2", "funnel_window_days", "1"), "mergeX", "tie1", "tie2", "tz")
	check("one month", get("funnel", ab, "funnel_step", "2", "funnel_window_interval", "1", "funnel_window_interval_unit", "month"),
		"mergeX", "month1", "tie1", "tie2", "tz")
	check("a then a", get("funnel", `[{"id":"a","order":0},{"id":"a","order":1}]`, "funnel_step", "2"), "twice")
	check("strict ties", get("funnel", ab, "funnel_step", "2", "funnel_order_type", "strict"), "tie1", "tie2", "tz")
	bd := []string{"funnel_step", "1", "funnel_window_interval", "2", "funnel_window_interval_unit", "month", "breakdown", "src"}
	check("first touch", get("funnel", ab, append(bd, "funnel_step_breakdown", "ad")...), "month1")
	check("last touch", get("funnel", ab, append(bd, "funnel_step_breakdown", "mail", "breakdown_attribution_type", "last_touch")...), "month1")
	check("person breakdown", get("funnel", ab, "funnel_step", "1", "breakdown", "plan", "breakdown_type", "person", "funnel_step_breakdown", "pro"),
		"mergeX", "twice")

	corr := []string{"funnel_window_interval", "2", "funnel_window_interval_unit", "month"}
	check("properties row", get("funnel/correlation", ab, append(corr, "funnel_correlation_type", "properties",
		"funnel_correlation_property_values", `[{"key":"plan","value":"pro","type":"person"}]`)...), "mergeX", "twice")
	check("properties row, converted", get("funnel/correlation", ab, append(corr, "funnel_correlation_type", "properties",
		"funnel_correlation_property_values", `[{"key":"plan","value":"pro"}]`, "funnel_correlation_person_converted", "true")...), "mergeX")
	check("event row", get("funnel/correlation", ab, append(corr, "funnel_correlation_person_entity", `{"id":"v","type":"events"}`)...),
		"mergeX", "month2", "twice")
	check("event_with_properties row", get("funnel/correlation", ab, append(corr, "funnel_correlation_type", "event_with_properties",
		"funnel_correlation_person_entity", `{"id":"v","type":"events","properties":[{"key":"q","value":"hd"}]}`)...), "mergeX", "month2")
	// The trends view's entrance periods follow the project's zone: tz's
	// attempt starts 01-20 20:00 UTC, 01-21 05:00 in Tokyo.
	trends := func(d string) []string {
		return get("funnel", ab, "funnel_window_days", "1", "funnel_viz_type", "trends", "entrance_period_start", d, "drop_off", "false")
	}
	check("trends view, UTC 01-20", trends("2021-01-20"), "tz")
	if r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID), `{"timezone":"Asia/Tokyo"}`); r.status != 200 {
		t.Fatalf("PATCH timezone: %d %s", r.status, r.body)
	}
	check("trends view, Tokyo 01-20", trends("2021-01-20"))
	check("trends view, Tokyo 01-21", trends("2021-01-21"), "tz")
	check("a step's event never correlates", get("funnel/correlation", ab, append(corr, "funnel_correlation_person_entity", `{"id":"b","type":"events"}`)...))
}

// Why funnels do not take windowFunnel as it is (docs/analysis.md): on
// 18.16 its answer for two steps in one second depends on the order rows
// arrive in (the ordered case's fast path ranks the timestamps to fix it:
// TestFunnelSameSecondTies), and its 'strict' mode does not exist.
func TestFunnelWindowFunnelLimits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var version string
	if err := e.store.Conn().QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "18.") {
		t.Skipf("ClickHouse %s", version)
	}
	levels := map[string]uint8{}
	for _, order := range []string{"['a', 'b']", "['b', 'a']"} {
		var level uint8
		q := "SELECT windowFunnel(3600)(toDateTime(0), e = 'a', e = 'b') FROM (SELECT arrayJoin(" + order + ") AS e)"
		if err := e.store.Conn().QueryRow(ctx, q).Scan(&level); err != nil {
			t.Fatal(err)
		}
		levels[order] = level
	}
	if levels["['a', 'b']"] == levels["['b', 'a']"] {
		t.Errorf("windowFunnel no longer depends on arrival order: %v", levels)
	}
	var level uint8
	err := e.store.Conn().QueryRow(ctx, "SELECT windowFunnel(3600, 'strict')(toDateTime(0), e = 'a', e = 'b') FROM (SELECT 'a' AS e)").Scan(&level)
	if err == nil {
		t.Errorf("ClickHouse %s has windowFunnel's strict mode", version)
	}
}
