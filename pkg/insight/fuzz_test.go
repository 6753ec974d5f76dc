package insight

import (
	"errors"
	"net/url"
	"testing"
	"time"
)

// FuzzParseFilter feeds arbitrary query strings to every parser of the
// actor routes' parameters (outside input: the query string and, for POST
// routes, a body merged into it). None may panic, and every refusal is a
// typed *Error naming its parameter, which the API answers as a 400.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"events=%5B%7B%22id%22%3A%22%24pageview%22%7D%5D&date_from=-7d&interval=day",
		"actions=%5B%7B%22id%22%3A3%7D%5D&date_from=2026-01-01&date_to=2026-02-01&interval=week&entity_id=3&entity_type=actions",
		"events=[{\"id\":\"a\",\"order\":0},{\"id\":\"b\",\"order\":1}]&funnel_step=-2&funnel_window_interval=3&funnel_window_interval_unit=hour&funnel_order_type=strict",
		"target_entity={\"id\":\"x\"}&period=Week&total_intervals=4&selected_interval=1&retention_type=retention_first_time",
		"path_type=$pageview&start_point=/a&step_limit=3&path_start_key=1_/a&exclude_events=[\"b\"]",
		"properties=[{\"key\":\"email\",\"value\":\"a\",\"operator\":\"icontains\",\"type\":\"person\"}]&breakdown=plan&breakdown_type=person&search=x",
		"events=[{\"id\":\"a\"},{\"id\":\"b\"}]&funnel_step=1&breakdown=$browser&breakdown_attribution_type=step&breakdown_attribution_value=1&funnel_step_breakdown=Chrome",
		"events=[{\"id\":\"a\"},{\"id\":\"b\"}]&funnel_step=2&breakdown=[1,\"all\"]&breakdown_type=cohort&funnel_step_breakdown=all&funnel_viz_type=time_to_convert",
		"target_entity={\"id\":\"x\"}&breakdowns=[{\"property\":\"$browser\",\"type\":\"event\"}]&breakdown_values=[\"Chrome\"]&selected_interval=2",
		"date_from=all&explicit_date=true&interval=month&properties={\"type\":\"OR\",\"values\":[{\"type\":\"cohort\",\"key\":\"id\",\"value\":1}]}",
	} {
		f.Add(s)
	}
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 10, 25, 1, 30, 0, 0, loc)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		typed := func(what string, err error) {
			var e *Error
			if err != nil && (!errors.As(err, &e) || e.Attr == "") {
				t.Fatalf("%s: %v is not a typed error naming its parameter", what, err)
			}
		}
		filter, err := ParseFilter(q, loc, now)
		typed("ParseFilter", err)
		if err != nil {
			return
		}
		_, err = filter.Target(q)
		typed("Target", err)
		_, err = ParseFunnel(q, filter, false)
		typed("ParseFunnel", err)
		_, err = parseRetention(RetentionQuery(q), filter, now)
		typed("parseRetention", err)
		_, err = parsePaths(q)
		typed("parsePaths", err)
	})
}
