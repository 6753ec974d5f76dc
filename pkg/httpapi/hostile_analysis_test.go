package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// hostileValues are query-parameter values no route should answer with a
// 5xx: malformed and mistyped JSON, huge and negative numbers, long
// strings, NUL bytes, unknown operators and absurd dates.
var hostileValues = []string{
	``, `{`, `[`, `[{`, `null`, `true`, `0`, `-1`, `1e308`, `-1e308`, `9223372036854775808`, `18446744073709551616`,
	`NaN`, `"x"`, `{}`, `[]`, `[[]]`, `[[[[[[]]]]]]`, `[null]`, `[1]`, `["x"]`, `[{"id":null}]`, `[{"id":1}]`,
	`[{"id":[1]}]`, `[{"id":{"a":1}}]`, `[{"id":"$pageview","type":"nope"}]`, `[{"id":"$pageview","math":"nope"}]`,
	`[{"id":"$pageview","math":"sum","math_property":null}]`, `[{"id":"$pageview","order":9223372036854775808}]`,
	`[{"id":"$pageview","properties":"{"}]`, `[{"id":"$pageview","properties":[{"key":"a","operator":"bogus","value":1}]}]`,
	`[{"id":"$pageview","properties":[{"key":null,"value":[[1]]}]}]`, `[{"key":"a","operator":"regex","value":"("}]`,
	`[{"key":"a","operator":"gt","value":"1e308"}]`, `[{"key":"a","operator":"is_date_before","value":"-99999999d"}]`,
	`[{"key":"a","type":"cohort","value":-1}]`, `[{"key":"a","type":"cohort","value":"x"}]`, `[{"key":"a","type":"element","value":"x"}]`,
	`{"type":"AND","values":[{"type":"OR","values":[{"type":"AND","values":[{"key":"a","value":1}]}]}]}`,
	"a\x00b", strings.Repeat("x", 100_000), `-99999999d`, `-9223372036854775808d`, `0000-01-01`, `9999-12-31`,
	`9999-12-31T23:59:59Z`, `-0001-01-01`, `2026-02-30`, `all`, `minute`, `second`, `hour`, `week`, `month`, `year`,
	`Hour`, `1000`, `100`, `2147483648`,
}

// hostileTypes are JSON values for body fields (POST path/funnel, cohorts,
// actions): every JSON type, nested, and huge.
var hostileTypes = []string{
	`null`, `true`, `0`, `-1`, `1e308`, `9223372036854775808`, `"x"`, `""`, `{}`, `[]`, `[[]]`, `[null]`, `[1]`, `{"a":[[[{}]]]}`,
	`"a\u0000b"`, `"` + strings.Repeat("x", 100_000) + `"`, `[{"id":null}]`, `[{"key":"a","operator":"bogus","value":[1]}]`,
}

// hostileDo makes one request and reports a 5xx, a dropped connection or
// a 4xx without the error body.
func hostileDo(t *testing.T, label, method, u, key, contentType string, body io.Reader) int {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s: connection: %v", label, err)
		return 0
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	short := func(s string) string {
		if len(s) > 300 {
			return s[:300] + "…"
		}
		return s
	}
	switch {
	case res.StatusCode >= 500:
		t.Errorf("%s: status %d: %s", short(label), res.StatusCode, short(string(raw)))
	case res.StatusCode >= 400:
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Errorf("%s: %d body %q", short(label), res.StatusCode, short(string(raw)))
			return res.StatusCode
		}
		for _, k := range []string{"type", "code", "detail", "attr"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: %d error body lacks %q: %s", short(label), res.StatusCode, k, short(string(raw)))
			}
		}
	}
	return res.StatusCode
}

func TestHostileAnalysis(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Hour)
	var evs []ev
	for i, id := range []string{"h1", "h2", "h3"} {
		evs = append(evs,
			ev{name: "signup", distinctID: id, at: now.Add(-time.Duration(72+i) * time.Hour), props: map[string]any{"plan": "pro", "n": i}, extra: fmt.Sprintf(`"$set":{"plan":"pro","n":%d}`, i)},
			ev{name: "$pageview", distinctID: id, at: now.Add(-time.Duration(48+i) * time.Hour), props: map[string]any{"$current_url": "/a"}},
			ev{name: "purchase", distinctID: id, at: now.Add(-time.Duration(24+i) * time.Hour), props: map[string]any{"amount": 1.5}})
	}
	e.publishEvents(e.projectA.ID, evs...)
	base := fmt.Sprintf("%s/api/projects/%d/", e.url, e.projectA.ID)
	statuses := map[int]int{}
	get := func(label, route string, q url.Values) int {
		t.Helper()
		s := hostileDo(t, label, "GET", base+route+"?"+q.Encode(), e.keyAll, "", nil)
		statuses[s]++
		return s
	}
	send := func(label, method, route, body string) {
		t.Helper()
		statuses[hostileDo(t, label, method, base+route, e.keyAll, "application/json", strings.NewReader(body))]++
	}
	defer func() { t.Logf("answers by status: %v", statuses) }()

	// Each analysis route from a valid query, one parameter made hostile
	// at a time.
	events := `[{"id":"signup","type":"events","order":0},{"id":"purchase","type":"events","order":1}]`
	routes := []struct {
		route string
		base  url.Values
		keys  []string
	}{
		{"persons/trends/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", "-7d", "interval", "day", "entity_id", "$pageview", "entity_type", "events", "date_to", now.Format("2006-01-02")),
			[]string{"events", "actions", "properties", "breakdown", "breakdown_type", "breakdown_value", "date_from", "date_to", "interval", "entity_id", "entity_type", "entity_math", "entity_order", "explicit_date", "limit", "offset", "search", "math", "math_property", "breakdown_histogram_bin_count", "aggregation_group_type_index"}},
		{"persons/stickiness/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", "-7d", "interval", "day", "stickiness_days", "1", "entity_id", "$pageview", "entity_type", "events"),
			[]string{"events", "actions", "properties", "date_from", "date_to", "interval", "stickiness_days", "selected_interval", "entity_id", "entity_type", "entity_math", "limit", "offset"}},
		{"persons/lifecycle/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", "-7d", "interval", "day", "target_date", now.Format("2006-01-02"), "lifecycle_type", "new", "entity_id", "$pageview", "entity_type", "events"),
			[]string{"events", "actions", "properties", "date_from", "date_to", "interval", "target_date", "lifecycle_type", "entity_id", "entity_type", "limit", "offset"}},
		{"persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "returning_entity", `{"id":"purchase","type":"events"}`, "period", "Day", "total_intervals", "7", "selected_interval", "0"),
			[]string{"target_entity", "returning_entity", "period", "total_intervals", "selected_interval", "retention_type", "date_to", "properties", "breakdown_value", "limit", "offset"}},
		{"persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "period", "Week", "breakdowns", `[{"property":"$browser","type":"event"}]`, "breakdown_values", `["Chrome"]`, "selected_interval", "1"),
			[]string{"breakdowns", "breakdown_values", "breakdown_type", "retention_type", "selected_interval"}},
		{"persons/funnel/", params("events", events, "date_from", "-7d", "funnel_step", "2", "breakdown", "$browser", "breakdown_attribution_type", "step", "breakdown_attribution_value", "1", "funnel_step_breakdown", "Chrome"),
			[]string{"breakdown", "breakdown_type", "breakdown_attribution_type", "breakdown_attribution_value", "funnel_step_breakdown", "funnel_order_type"}},
		{"persons/funnel/", params("events", events, "date_from", "-7d", "funnel_step", "2", "breakdown", `["all"]`, "breakdown_type", "cohort", "funnel_step_breakdown", "all"),
			[]string{"breakdown", "breakdown_type", "funnel_step_breakdown", "funnel_viz_type"}},
		{"persons/path/", params("date_from", "-7d", "include_event_types", `["$pageview","custom_event"]`, "step_limit", "5"),
			[]string{"date_from", "date_to", "include_event_types", "start_point", "end_point", "step_limit", "path_type", "path_start_key", "path_end_key", "path_dropoff_key", "path_replacements", "local_path_cleaning_filters", "exclude_events", "properties", "funnel_filter", "funnel_paths", "limit", "offset"}},
		{"persons/funnel/", params("events", events, "date_from", "-7d", "funnel_step", "2"),
			[]string{"events", "actions", "exclusions", "properties", "breakdown", "breakdown_type", "breakdown_attribution_type", "funnel_step", "funnel_step_breakdown", "funnel_from_step", "funnel_to_step", "funnel_custom_steps", "funnel_order_type", "funnel_viz_type", "funnel_window_days", "funnel_window_interval", "funnel_window_interval_unit", "date_from", "date_to", "interval", "entrance_period_start", "drop_off", "limit", "offset"}},
		{"persons/funnel/correlation/", params("events", events, "date_from", "-7d", "funnel_correlation_person_entity", `{"id":"$pageview","type":"events"}`, "funnel_correlation_person_converted", "true"),
			[]string{"events", "exclusions", "funnel_correlation_type", "funnel_correlation_person_entity", "funnel_correlation_person_converted", "funnel_correlation_property_values", "funnel_correlation_names", "funnel_correlation_exclude_names", "date_from", "date_to", "funnel_window_days", "limit", "offset"}},
		{"persons/values/", params("key", "plan"), []string{"key", "value"}},
		{"persons/cohorts/", params("person_id", "1"), []string{"person_id"}},
		{"cohorts/", params(), []string{"type", "search", "limit", "offset"}},
		{"actions/", params(), []string{"limit", "offset", "search"}},
	}
	for _, rt := range routes {
		if s := get("base "+rt.route, rt.route, rt.base); s != 200 {
			t.Errorf("the valid base query of %s answered %d", rt.route, s)
		}
		for _, k := range rt.keys {
			for _, v := range hostileValues {
				q := url.Values{}
				for kk, vv := range rt.base {
					q[kk] = vv
				}
				q.Set(k, v)
				get(fmt.Sprintf("GET %s %s=%q", rt.route, k, v), rt.route, q)
			}
		}
	}

	// The POST forms of path and funnel: each body field of every JSON type.
	for _, rt := range []struct {
		route string
		base  map[string]json.RawMessage
	}{
		{"persons/path/", map[string]json.RawMessage{"date_from": json.RawMessage(`"-7d"`), "include_event_types": json.RawMessage(`["$pageview"]`), "step_limit": json.RawMessage(`5`)}},
		{"persons/funnel/", map[string]json.RawMessage{"events": json.RawMessage(events), "date_from": json.RawMessage(`"-7d"`), "funnel_step": json.RawMessage(`2`)}},
		{"persons/funnel/correlation/", map[string]json.RawMessage{"events": json.RawMessage(events), "funnel_correlation_person_entity": json.RawMessage(`{"id":"$pageview","type":"events"}`), "funnel_correlation_person_converted": json.RawMessage(`true`)}},
	} {
		for _, raw := range []string{``, `{`, `[]`, `null`, `"x"`, `{"events":`, "\x00"} {
			send(fmt.Sprintf("POST %s body %q", rt.route, raw), "POST", rt.route, raw)
		}
		keys := []string{"events", "actions", "exclusions", "properties", "breakdown", "date_from", "date_to", "interval", "step_limit", "start_point", "path_type", "include_event_types", "funnel_step", "funnel_window_days", "funnel_order_type", "funnel_correlation_type", "funnel_correlation_person_entity", "funnel_correlation_person_converted", "path_replacements", "local_path_cleaning_filters", "limit", "offset"}
		for _, k := range keys {
			for _, v := range hostileTypes {
				m := map[string]json.RawMessage{}
				for kk, vv := range rt.base {
					m[kk] = vv
				}
				m[k] = json.RawMessage(v)
				b, _ := json.Marshal(m)
				send(fmt.Sprintf("POST %s %s=%s", rt.route, k, v), "POST", rt.route, string(b))
			}
		}
	}

	// The limits named in the brief.
	var steps []string
	for i := 0; i < 20; i++ {
		steps = append(steps, fmt.Sprintf(`{"id":"e%d","type":"events","order":%d}`, i, i))
	}
	twenty := "[" + strings.Join(steps, ",") + "]"
	get("funnel 20 steps", "persons/funnel/", params("events", twenty, "funnel_step", "20"))
	get("funnel 20 steps step 1", "persons/funnel/", params("events", twenty, "funnel_step", "1"))
	get("correlation 20 steps", "persons/funnel/correlation/", params("events", twenty, "funnel_correlation_person_entity", `{"id":"e1","type":"events"}`, "funnel_correlation_person_converted", "true"))
	get("retention 1000 hours", "persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "period", "Hour", "total_intervals", "1000", "selected_interval", "999"))
	for _, p := range []string{"Hour", "Day", "Week", "Month", "Year", "Minute", "hour"} {
		get("retention period "+p, "persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "period", p, "total_intervals", "1000", "selected_interval", "0", "date_to", "9999-12-31"))
		get("retention period "+p+" year 0", "persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "period", p, "total_intervals", "100", "selected_interval", "0", "date_to", "0000-01-01"))
	}
	for _, ex := range []string{
		`[{"id":"$pageview","type":"events","funnel_from_step":5,"funnel_to_step":-1}]`,
		`[{"id":"$pageview","type":"events","funnel_from_step":9223372036854775808,"funnel_to_step":1e308}]`,
		`[{"id":"$pageview","type":"events","funnel_from_step":1,"funnel_to_step":0}]`,
		`[{"id":null,"funnel_from_step":"x"}]`,
	} {
		get("funnel exclusion "+ex, "persons/funnel/", params("events", events, "exclusions", ex, "funnel_step", "2"))
		get("correlation exclusion "+ex, "persons/funnel/correlation/", params("events", events, "exclusions", ex, "funnel_correlation_person_entity", `{"id":"$pageview","type":"events"}`, "funnel_correlation_person_converted", "true"))
	}
	for _, st := range []string{"-3", "-1", "0", "3", "-9223372036854775808"} {
		get("funnel breakdown step "+st, "persons/funnel/", params("events", events, "funnel_step", st, "breakdown", "plan", "breakdown_type", "person", "funnel_step_breakdown", "pro"))
		get("funnel strict step "+st, "persons/funnel/", params("events", events, "funnel_step", st, "funnel_order_type", "strict", "funnel_window_interval", "9223372036854775807", "funnel_window_interval_unit", "second"))
		get("funnel unordered step "+st, "persons/funnel/", params("events", events, "funnel_step", st, "funnel_order_type", "unordered", "funnel_window_days", "-1"))
	}
	get("path step_limit 100", "persons/path/", params("date_from", "-7d", "step_limit", "100"))
	for _, iv := range []string{"minute", "hour", "second", "week", "month"} {
		for _, df := range []string{"-99999999d", "0000-01-01", "9999-12-31", "all", "-1h", "-9999y"} {
			get("trends "+iv+" "+df, "persons/trends/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", df, "interval", iv, "entity_id", "$pageview", "entity_type", "events"))
			get("lifecycle "+iv+" "+df, "persons/lifecycle/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", df, "interval", iv, "target_date", "9999-12-31", "lifecycle_type", "new"))
			get("stickiness "+iv+" "+df, "persons/stickiness/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", df, "interval", iv, "stickiness_days", "1000000"))
			get("funnel "+iv+" "+df, "persons/funnel/", params("events", events, "date_from", df, "interval", iv, "funnel_viz_type", "trends", "entrance_period_start", df, "funnel_step", "1"))
			get("path "+df, "persons/path/", params("date_from", df, "date_to", "9999-12-31"))
		}
	}

	// Actions: each step and field of every JSON type.
	for _, raw := range []string{``, `{`, `[]`, `null`, "\x00", `{"name":"a","steps":[` + strings.Repeat(`{"event":"e"},`, 10000) + `{"event":"e"}]}`} {
		send(fmt.Sprintf("POST actions body %.40q", raw), "POST", "actions/", raw)
	}
	for _, field := range []string{"name", "steps", "description", "deleted", "tags"} {
		for _, v := range hostileTypes {
			send("POST actions "+field+"="+v, "POST", "actions/", fmt.Sprintf(`{"name":"a","steps":[{"event":"e"}],%q:%s}`, field, v))
		}
	}
	for _, field := range []string{"event", "properties", "url", "url_matching", "selector", "text", "href", "tag_name"} {
		for _, v := range hostileTypes {
			send("POST actions step "+field+"="+v, "POST", "actions/", fmt.Sprintf(`{"name":"a","steps":[{"event":"e",%q:%s}]}`, field, v))
		}
	}
	for _, id := range []string{"0", "-1", "9223372036854775808", "18446744073709551616", "x", "1e3"} {
		send("GET action "+id, "GET", "actions/"+id+"/", "")
		send("PATCH action "+id, "PATCH", "actions/"+id+"/", `{"name":"x"}`)
		send("GET cohort "+id, "GET", "cohorts/"+id+"/", "")
		send("PATCH cohort add "+id, "PATCH", "cohorts/"+id+"/add_persons_to_static_cohort/", `{"distinct_ids":["h1"]}`)
		send("PATCH cohort remove "+id, "PATCH", "cohorts/"+id+"/remove_person_from_static_cohort/", `{"person_id":1}`)
		send("GET cohort persons "+id, "GET", "cohorts/"+id+"/persons/", "")
	}

	// Cohorts: filters of every JSON type, deep nesting, unknown operators.
	for _, field := range []string{"name", "description", "filters", "groups", "is_static", "person_ids", "distinct_ids", "deleted"} {
		for _, v := range hostileTypes {
			send("POST cohorts "+field+"="+v, "POST", "cohorts/", fmt.Sprintf(`{"name":"c",%q:%s}`, field, v))
		}
	}
	deep := func(n int) string {
		s := `{"type":"person","key":"plan","operator":"exact","value":"pro"}`
		for i := 0; i < n; i++ {
			s = `{"type":"AND","values":[` + s + `]}`
		}
		return s
	}
	for _, n := range []int{10, 100, 1000, 10000} {
		send(fmt.Sprintf("POST cohort nested %d", n), "POST", "cohorts/", `{"name":"deep","filters":{"properties":`+deep(n)+`}}`)
	}
	for _, v := range []string{
		`{"type":"AND","values":[{"type":"person","key":"plan","operator":"bogus","value":"pro"}]}`,
		`{"type":"XOR","values":[]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event","time_value":9223372036854775807,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event","time_value":-1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event","time_value":1e308,"time_interval":"century"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event_multiple","operator_value":-1,"time_value":1,"time_interval":"minute"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"bogus"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event_multiple","operator":{"a":1},"operator_value":[1],"time_value":1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":"$pageview","value":"performed_event_multiple","operator":"gte","operator_value":1e308,"time_value":1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":1e308,"value":"performed_event","event_type":"actions","time_value":1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":-1,"value":"performed_event_multiple","event_type":"actions","operator":"lte","operator_value":2,"time_value":1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":{"id":1},"value":"performed_event","event_type":["actions"],"time_value":1,"time_interval":"day"}]}`,
		`{"type":"AND","values":[{"type":"behavioral","key":null,"value":"performed_event","time_value":"x"}]}`,
		`{"type":"AND","values":[{"type":"cohort","key":"id","value":9223372036854775808}]}`,
		`{"type":"AND","values":[{"type":"cohort","key":"id","value":-1}]}`,
		`{"type":"AND","values":[{"type":"cohort","key":"id","value":"x"}]}`,
		`{"type":"AND","values":[{"type":"person","key":"n","operator":"gt","value":"1e400"}]}`,
		`{"type":"AND","values":[{"type":"person","key":"n","operator":"regex","value":"("}]}`,
		`{"type":"AND","values":[{"type":"person","key":"` + strings.Repeat("k", 100_000) + `","operator":"exact","value":"` + strings.Repeat("v", 100_000) + `"}]}`,
		`{"type":"AND","values":[{"type":"person","key":"a\u0000b","operator":"exact","value":"a\u0000b"}]}`,
		`{"type":"AND","values":[{"type":"person","key":"n","operator":"is_date_before","value":"-99999999d"}]}`,
		`{"type":"AND","values":[[[]]]}`, `{"type":"AND","values":null}`, `{"type":"AND","values":[null]}`, `{"type":"AND","values":[1]}`,
	} {
		send("POST cohort filter "+v, "POST", "cohorts/", `{"name":"f","filters":{"properties":`+v+`}}`)
	}
	// A cohort to PATCH and add to.
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), `{"name":"s","is_static":true,"distinct_ids":["h1"]}`)
	if r.status != 201 {
		t.Fatalf("static cohort: %d %s", r.status, r.body)
	}
	sid := r.json(t)["id"]
	for _, field := range []string{"person_ids", "distinct_ids"} {
		for _, v := range append(hostileTypes, `[9223372036854775808]`, `[-1]`, `[1e308]`, `["`+strings.Repeat("x", 100_000)+`"]`, `[[1]]`, `[{"a":1}]`, `["a\u0000b"]`) {
			send(fmt.Sprintf("PATCH add %s=%.60s", field, v), "PATCH", fmt.Sprintf("cohorts/%v/add_persons_to_static_cohort/", sid), fmt.Sprintf(`{%q:%s}`, field, v))
		}
	}
	for _, v := range append(hostileTypes, `9223372036854775808`, `-1`, `1e308`, `"`+strings.Repeat("x", 100_000)+`"`, `"a\u0000b"`) {
		send(fmt.Sprintf("PATCH remove person_id=%.60s", v), "PATCH", fmt.Sprintf("cohorts/%v/remove_person_from_static_cohort/", sid), fmt.Sprintf(`{"person_id":%s}`, v))
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=99999999999999999999", "offset=-5", "offset=1e3", "format=xml", "format=csv&limit=1"} {
		send("GET cohort persons "+q, "GET", fmt.Sprintf("cohorts/%v/persons/?%s", sid, q), "")
	}
	for _, raw := range []string{``, `{`, `[]`, `null`, "\x00"} {
		send(fmt.Sprintf("PATCH remove body %q", raw), "PATCH", fmt.Sprintf("cohorts/%v/remove_person_from_static_cohort/", sid), raw)
		send(fmt.Sprintf("PATCH add body %q", raw), "PATCH", fmt.Sprintf("cohorts/%v/add_persons_to_static_cohort/", sid), raw)
		send(fmt.Sprintf("PATCH cohort body %q", raw), "PATCH", fmt.Sprintf("cohorts/%v/", sid), raw)
		send(fmt.Sprintf("POST cohort body %q", raw), "POST", "cohorts/", raw)
	}
	for _, v := range hostileTypes {
		send("PATCH cohort filters="+v, "PATCH", fmt.Sprintf("cohorts/%v/", sid), `{"filters":`+v+`}`)
	}

	// CSV uploads: long rows, binary, bad headers, many columns.
	upload := func(label, field, filename, content string) {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("name", "csv")
		fw, _ := mw.CreateFormFile(field, filename)
		_, _ = io.WriteString(fw, content)
		_ = mw.Close()
		hostileDo(t, "CSV "+label, "POST", base+"cohorts/", e.keyAll, mw.FormDataContentType(), &buf)
		buf.Reset()
		mw = multipart.NewWriter(&buf)
		fw, _ = mw.CreateFormFile(field, filename)
		_, _ = io.WriteString(fw, content)
		_ = mw.Close()
		hostileDo(t, "CSV PATCH "+label, "PATCH", fmt.Sprintf("%scohorts/%v/", base, sid), e.keyAll, mw.FormDataContentType(), &buf)
	}
	mb := strings.Repeat("x", 1<<20)
	for _, tc := range []struct{ label, content string }{
		{"1MB row", mb + "\n"},
		{"1MB rows", mb + "\n" + mb + "\n" + mb + "\n"},
		{"1MB quoted", `"` + mb + "\n"},
		{"person_id 1MB", "person_id\n" + mb + "\n"},
		{"person_id huge", "person_id\n9223372036854775808\n-1\n1e308\n18446744073709551616\n"},
		{"many columns", strings.Repeat("a,", 100_000) + "\n"},
		{"NUL", "a\x00b\n\x00\n"},
		{"bare quote", "a\"b\n\"\n"},
		{"empty", ""},
		{"only header", "person_id\n"},
		{"distinct_id header", "distinct_id\nh1\n"},
		{"binary", "\xff\xfe\x00\x01"},
		{"many rows", strings.Repeat("h1\n", 200_000)},
	} {
		upload(tc.label, "csv", "m.csv", tc.content)
	}
	upload("wrong field", "file", "m.csv", "h1\n")
	hostileDo(t, "CSV bad multipart", "POST", base+"cohorts/", e.keyAll, "multipart/form-data; boundary=zzz", strings.NewReader("--zzz\r\nbroken"))
	hostileDo(t, "CSV no boundary", "POST", base+"cohorts/", e.keyAll, "multipart/form-data", strings.NewReader("x"))

	// Project time zone (last: a hostile value must not stick).
	for _, v := range []string{`"../../etc/passwd"`, `"/etc/passwd"`, `"Local"`, `""`, `"UTC\u0000"`, `"` + strings.Repeat("A", 100_000) + `"`, `null`, `1`, `[]`, `{}`, `"Europe/../../../etc/passwd"`, `"../zoneinfo/UTC"`, `"Etc/GMT+99"`, `"+99:00"`} {
		send("PATCH timezone "+fmt.Sprintf("%.60s", v), "PATCH", "", `{"timezone":`+v+`}`)
		// A later analysis under whatever zone stuck still answers.
		get("trends after timezone "+fmt.Sprintf("%.60s", v), "persons/trends/", params("events", `[{"id":"$pageview","type":"events"}]`, "date_from", "-7d", "interval", "hour", "entity_id", "$pageview", "entity_type", "events"))
		get("retention after timezone "+fmt.Sprintf("%.60s", v), "persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "period", "Week", "total_intervals", "3", "selected_interval", "0"))
		send("reset timezone", "PATCH", "", `{"timezone":"UTC"}`)
	}
	for _, raw := range []string{``, `{`, `[]`, `null`, "\x00"} {
		send(fmt.Sprintf("PATCH project body %q", raw), "PATCH", "", raw)
	}
	if p := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID)).json(t); p["timezone"] != "UTC" {
		t.Errorf("timezone after hostile PATCHes: %v", p["timezone"])
	}
}
