package insight

import (
	"context"
	"testing"
	"time"
)

// Which funnels take windowFunnel (funnel_fast.go): only those whose
// level alone is asked, over steps no event can match twice, with a window
// of seconds and a range whose ranked timestamps fit 18.16's Int32.
func TestFastLevelApplies(t *testing.T) {
	id := func(s string) *string { return &s }
	events := func(names ...string) []Entity {
		var out []Entity
		for _, n := range names {
			out = append(out, Entity{Type: "events", ID: id(n)})
		}
		return out
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	month := from.AddDate(0, 1, 0)
	corr := cond{sql: "1"}
	cases := []struct {
		name     string
		fn       Funnel
		from, to time.Time
		corr     *cond
		want     bool
	}{
		{"ordered, distinct events", Funnel{Steps: events("a", "b", "c"), Order: Ordered, Window: Window{Seconds: 86400}}, from, month, nil, true},
		{"a step repeated", Funnel{Steps: events("a", "b", "a"), Order: Ordered, Window: Window{Seconds: 86400}}, from, month, nil, false},
		{"a step of any event", Funnel{Steps: append(events("a"), Entity{Type: "events"}), Order: Ordered, Window: Window{Seconds: 86400}}, from, month, nil, false},
		{"strict", Funnel{Steps: events("a", "b"), Order: Strict, Window: Window{Seconds: 86400}}, from, month, nil, false},
		{"unordered", Funnel{Steps: events("a", "b"), Order: Unordered, Window: Window{Seconds: 86400}}, from, month, nil, false},
		{"exclusion", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Seconds: 86400}, Exclusions: []Exclusion{{Entity: events("x")[0], From: 0, To: 1}}}, from, month, nil, false},
		{"months", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Months: 1}}, from, month, nil, false},
		{"trends view", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Seconds: 86400}, Trends: &FunnelTrends{}}, from, month, nil, false},
		{"breakdown", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Seconds: 86400}, Breakdown: []string{"x"}, BreakdownValue: []string{"1"}}, from, month, nil, false},
		{"correlation", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Seconds: 86400}}, from, month, &corr, false},
		{"all time", Funnel{Steps: events("a", "b"), Order: Ordered, Window: Window{Seconds: 86400}}, time.Time{}, month, nil, false},
		{"20 steps over 3 years", Funnel{Steps: events("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"), Order: Ordered, Window: Window{Seconds: 86400}}, from, from.AddDate(3, 0, 0), nil, true},
		{"20 steps over 4 years", Funnel{Steps: events("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"), Order: Ordered, Window: Window{Seconds: 86400}}, from, from.AddDate(4, 0, 0), nil, false},
	}
	st := New(nil, nil)
	for _, c := range cases {
		fq := &funnelQuery{fn: &c.fn, scan: scan{from: c.from, to: c.to}, corr: c.corr, disjoint: st.disjointSteps(context.Background(), 1, c.fn.Steps)}
		if got := fq.fastLevel(); got != c.want {
			t.Errorf("%s: fast %v, want %v", c.name, got, c.want)
		}
	}
}
