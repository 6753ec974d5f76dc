package insight

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestPrefixPagesEqualTheWholeAnswer: stickiness, the fast funnel and
// path without a key page from the persons up to an id (prefix.go). Over
// a workload with merges, splits, resets and deletions through the real
// ingester (so overrides give rows to persons of lower and higher ids
// than their stored one), every page at every offset equals the same
// slice of the whole answer, and the pages came from bounded reads.
func TestPrefixPagesEqualTheWholeAnswer(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	testenv.PublishWorkload(t, n.JS, 0, workloadWithResets(23, 3000, 150))
	// A second day of page views, so persons are active on one day or two.
	var more []testenv.Message
	for i := range 900 {
		more = append(more, testenv.Message{Body: fmt.Sprintf(`{"event":"$pageview","distinct_id":"u%d"}`, (i*37)%150)})
	}
	last := testenv.PublishWorkload(t, n.JS, 86400, more)
	ingestAll(t, n, store, last)
	ctx := context.Background()
	conn := &textCounter{Querier: store.Conn(), text: "person_id <= ?"} // reads persons up to an id
	whole := New(store.Conn(), nil)
	paged := New(conn, nil)
	paged.prefixPersons = 1 // bounds of a few persons: many bounds per page, and growth

	pv := `[{"id":"$pageview","type":"events","order":0}]`
	routes := []struct {
		name string
		q    url.Values
		run  func(st *Store, ctx context.Context, project uint64, f *Filter, q url.Values, p Page) ([]Actor, error)
	}{
		{"stickiness 1", url.Values{"events": {pv}, "entity_id": {"$pageview"}, "entity_type": {"events"}, "stickiness_days": {"1"}}, (*Store).Stickiness},
		{"stickiness 2", url.Values{"events": {pv}, "entity_id": {"$pageview"}, "entity_type": {"events"}, "stickiness_days": {"2"}}, (*Store).Stickiness},
		{"path", url.Values{"include_event_types": {`["$pageview"]`}}, (*Store).Paths},
		{"funnel 2", url.Values{"events": {`[{"id":"$pageview","type":"events","order":0},{"id":"e","type":"events","order":1}]`},
			"funnel_step": {"2"}, "funnel_window_days": {"1"}}, (*Store).Funnel},
		{"funnel -2", url.Values{"events": {`[{"id":"$pageview","type":"events","order":0},{"id":"e","type":"events","order":1}]`},
			"funnel_step": {"-2"}, "funnel_window_days": {"1"}}, (*Store).Funnel},
	}
	for project := uint64(1); project <= 3; project++ {
		// The bounded scan keeps exactly the rows of the persons up to
		// the bound, also those an override moved across it.
		ref := referenceAttribution(t, store, project)
		var pids []uint64
		for _, pid := range ref {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		pids = slices.Compact(pids)
		moved := 0
		for _, upTo := range pids[:len(pids)-1] {
			want := map[uuid.UUID]uint64{}
			for id, pid := range ref {
				if pid <= upTo {
					want[id] = pid
				}
			}
			sql, args := scan{project: project, to: endOfTime, f: newFilters(), upTo: upTo}.sql()
			got := attribution(t, store, "SELECT uuid, pid FROM ("+sql+")", args...)
			if d := diff(got, want); d != "" {
				t.Fatalf("project %d, persons up to %d:\n%s", project, upTo, d)
			}
			stored := attribution(t, store, "SELECT uuid, person_id FROM events WHERE project_id = ?", project)
			for id, pid := range want {
				if stored[id] > upTo && pid <= upTo {
					moved++
				}
			}
		}
		if moved == 0 {
			t.Fatalf("project %d: no override moves a row below a bound: the test proves nothing", project)
		}
		for _, r := range routes {
			q := url.Values{"date_from": {"2026-04-01"}, "date_to": {"2026-04-02"}}
			for k, v := range r.q {
				q[k] = v
			}
			f, err := ParseFilter(q, time.UTC, time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			all, err := r.run(whole, ctx, project, f, q, Page{})
			if err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			if len(all) < 10 {
				t.Fatalf("project %d %s: %d persons: too few to page", project, r.name, len(all))
			}
			before := conn.n.Load()
			for _, limit := range []int{3, 11} {
				for offset := 0; offset <= len(all)+1; offset += max(1, limit-1) {
					got, err := r.run(paged, ctx, project, f, q, Page{Limit: limit, Offset: offset})
					if err != nil {
						t.Fatalf("%s: %v", r.name, err)
					}
					want := all[min(offset, len(all)):min(offset+limit, len(all))]
					if !slices.Equal(ids(got), ids(want)) {
						t.Fatalf("project %d %s limit %d offset %d: %v, want %v", project, r.name, limit, offset, ids(got), ids(want))
					}
				}
			}
			if conn.n.Load() == before {
				t.Fatalf("project %d %s: no page read persons up to an id", project, r.name)
			}
		}
	}
}

func ids(as []Actor) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprint(a.PersonID)
	}
	return out
}
