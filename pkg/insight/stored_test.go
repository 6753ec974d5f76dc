package insight

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"
)

// TestStoredPersonsAnswerAsJoin: stickiness, the funnel, path and
// lifecycle scan events without the overrides (scan.stored) exactly when
// no owner changed after the range's first event, and give the answers
// of the scan that joins the overrides, for every project of a history
// with merged, split and deleted persons, whole answers and pages (the
// pages read from the persons up to an id, prefix.go).
func TestStoredPersonsAnswerAsJoin(t *testing.T) {
	store, _, _ := hourlyHistory(t)
	ctx := context.Background()
	// A scan with the join names the overrides right after "FROM events".
	joined := &textCounter{Querier: store.Conn(), text: "FROM events ANY LEFT JOIN"}
	scans := &textCounter{Querier: joined, text: "FROM events"}
	fast := New(scans, nil)
	fast.prefixPersons = 2 // small projects page from bounds too
	fast.noHourly = true   // retention scans events here
	raw := New(store.Conn(), nil)
	raw.noStored, raw.noHourly = true, true
	now := time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)
	pv := `[{"id":"$pageview","type":"events","order":0}]`
	funnel := `[{"id":"$pageview","type":"events","order":0},{"id":"$pageview","type":"events","order":1}]`
	after := url.Values{"date_from": {"2026-04-05"}, "date_to": {"2026-04-08"}}
	across := url.Values{"date_from": {"2026-03-30"}, "date_to": {"2026-04-08"}}
	with := func(base url.Values, kv ...string) url.Values {
		q := url.Values{}
		for k, v := range base {
			q[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	type route struct {
		name   string
		q      url.Values
		stored bool // no scan joins the overrides
		run    func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error)
	}
	stickiness := func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
		return st.Stickiness(ctx, project, f, q, page)
	}
	funnelRun := func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
		return st.Funnel(ctx, project, f, q, page)
	}
	path := func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
		return st.Paths(ctx, project, f, q, page)
	}
	lifecycle := func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
		return st.Lifecycle(ctx, project, f, q, page, now)
	}
	retention := func(st *Store, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
		return st.Retention(ctx, project, f, q, page, now)
	}
	var routes []route
	for _, r := range []struct {
		range_ url.Values
		stored bool
		label  string
		target string // lifecycle's: its scan is the target's and the previous day
		days   string // retention's intervals, ending with date_to
	}{{after, true, "after every change", "2026-04-06", "3"}, {across, false, "across changes", "2026-04-01", "9"}} {
		routes = append(routes,
			route{"stickiness 1 " + r.label, with(r.range_, "events", pv, "entity_id", "$pageview", "entity_type", "events", "stickiness_days", "1"), r.stored, stickiness},
			route{"stickiness 2 " + r.label, with(r.range_, "events", pv, "entity_id", "$pageview", "entity_type", "events", "stickiness_days", "2"), r.stored, stickiness},
			route{"funnel " + r.label, with(r.range_, "events", funnel, "funnel_step", "2", "funnel_window_days", "14"), r.stored, funnelRun},
			route{"path " + r.label, with(r.range_, "include_event_types", `["$pageview"]`), r.stored, path},
			route{"lifecycle " + r.label, with(r.range_, "events", pv, "target_date", r.target, "lifecycle_type", "returning"), r.stored, lifecycle},
			route{"retention " + r.label, RetentionQuery(with(url.Values{"date_to": r.range_["date_to"]}, "period", "Day", "total_intervals", r.days,
				"selected_interval", "0", "target_entity", `{"id":"$pageview","type":"events"}`)), r.stored, retention},
		)
	}
	nonEmpty := 0
	for _, r := range routes {
		for project := uint64(1); project <= 3; project++ {
			for _, page := range []Page{{}, {Limit: 3}, {Limit: 7, Offset: 3}} {
				answer := func(st *Store) []Actor {
					f, err := ParseFilter(r.q, time.UTC, now)
					if err != nil {
						t.Fatalf("%s: %v", r.name, err)
					}
					got, err := r.run(st, project, f, r.q, page)
					if err != nil {
						t.Fatalf("%s: %v", r.name, err)
					}
					return got
				}
				before, joins := scans.n.Load(), joined.n.Load()
				got := answer(fast)
				if scans.n.Load() == before {
					t.Fatalf("%s: no scan of events", r.name)
				}
				if j := joined.n.Load() > joins; j == r.stored {
					t.Fatalf("%s, project %d: joined the overrides %v, want %v", r.name, project, j, !r.stored)
				}
				want := answer(raw)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s, project %d, page %v:\n stored %v\n joined %v", r.name, project, page, got, want)
				}
				if len(want) > 0 {
					nonEmpty++
				}
			}
		}
	}
	if nonEmpty < len(routes)*3 {
		t.Fatalf("only %d of %d answers hold persons: the comparison proves little", nonEmpty, 9*len(routes))
	}
}
