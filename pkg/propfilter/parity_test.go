package propfilter

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestRelativeDates: is_date_after / is_date_before (and is_date_exact)
// take PostHog's relative dates, counted back from now: hours, days,
// weeks, months, years, with or without the leading minus.
func TestRelativeDates(t *testing.T) {
	now := time.Date(2026, 3, 31, 12, 30, 15, 500e6, time.UTC)
	opts := Options{Now: func() time.Time { return now }}
	cases := []struct{ op, value, want string }{
		{"is_date_after", "-7d", "2026-03-24 12:30:15"},
		{"is_date_after", "7d", "2026-03-24 12:30:15"},
		{"is_date_after", "2d", "2026-03-29 12:30:15"},
		{"is_date_after", "24h", "2026-03-30 12:30:15"},
		{"is_date_after", "-1w", "2026-03-24 12:30:15"},
		{"is_date_before", "3m", "2025-12-31 12:30:16"}, // before: the second rounds up
		{"is_date_before", "-1y", "2025-03-31 12:30:16"},
		{"is_date_before", " -0d ", "2026-03-31 12:30:16"},
		{"is_date_exact", "-1d", "2026-03-30"},
	}
	for _, tc := range cases {
		in := one(`{"key":"d","value":"` + tc.value + `","operator":"` + tc.op + `"}`)
		c, err := ParseWith(context.Background(), in, opts)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if want := []any{"d", "d", tc.want}; !reflect.DeepEqual(c.Args, want) {
			t.Errorf("%s: args %v, want %v", in, c.Args, want)
		}
	}
	// Without Options.Now the clock is read.
	c, err := Parse(one(`{"key":"d","value":"-1d","operator":"is_date_after"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := time.Parse(time.DateTime, c.Args[2].(string))
	if d := time.Since(got); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("-1d read as %v (%v ago)", got, d)
	}
}

// TestJSONTextValues: a string value holding the JSON text of an object or
// array (as clients send structured values, e.g. Python's json.dumps with
// its spaces and key order) also matches the stored object or array; the
// plain text stays an option, for a property that is that string.
func TestJSONTextValues(t *testing.T) {
	runSQLCases(t, []sqlCase{
		{"object text", one(`{"key":"o","value":"{\"b\": [1, 2], \"a\": \"<x>\"}"}`),
			"(" + tV + " IN (?, ?))", []any{"o", `{"b": [1, 2], "a": "<x>"}`, `{"a":"<x>","b":[1,2]}`}},
		{"array text", one(`{"key":"l","value":"[1, \"two\", null]","operator":"is_not"}`),
			"(NOT (" + tV + " IN (?, ?)))", []any{"l", `[1, "two", null]`, `[1,"two",null]`}},
		{"canonical text is one form", one(`{"key":"o","value":"{\"a\":1}"}`),
			"(" + tV + " = ?)", []any{"o", `{"a":1}`}},
		{"not JSON stays text", one(`{"key":"o","value":"{oops"}`),
			"(" + tV + " = ?)", []any{"o", `{oops`}},
		{"list of texts", one(`{"key":"o","value":["x","{\"a\": 1}"]}`),
			"(" + tV + " IN (?, ?, ?))", []any{"o", "x", `{"a": 1}`, `{"a":1}`}},
		{"object value", one(`{"key":"o","value":{"b":[1,2],"a":"<x>"}}`),
			"(" + tV + " = ?)", []any{"o", `{"a":"<x>","b":[1,2]}`}},
	})
}
