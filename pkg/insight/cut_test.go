package insight

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestCutToPersonsKeepsTheirRows: a scan cut to a set of persons
// (scan.among, retention's cohort) keeps every row whose current person
// is in the set, with that person, over a workload with merges, splits,
// resets and deletions through the real ingester; some of those rows are
// stored with a person outside the set (an override gave them), so the
// test fails if the cut reads person_id alone. Then retention, whose
// scan is cut to the persons of the selected interval, answers what the
// same statement without the cut answers, for every selected interval.
func TestCutToPersonsKeepsTheirRows(t *testing.T) {
	store := twoDays(t, 29, 3000, 150, 900, 41)
	ctx := context.Background()
	for project := uint64(1); project <= 3; project++ {
		ref := referenceAttribution(t, store, project)
		stored := attribution(t, store, "SELECT uuid, person_id FROM events WHERE project_id = ?", project)
		var pids []uint64
		for _, pid := range ref {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		pids = slices.Compact(pids)
		for parity := range 2 {
			var set []uint64
			for i, pid := range pids {
				if i%2 == parity {
					set = append(set, pid)
				}
			}
			want := map[uuid.UUID]uint64{}
			moved := 0
			for id, pid := range ref {
				if slices.Contains(set, pid) {
					want[id] = pid
					if !slices.Contains(set, stored[id]) {
						moved++
					}
				}
			}
			if moved == 0 {
				t.Fatalf("project %d: no override gives a row to a person of the set: the test proves nothing", project)
			}
			sql, args := scan{project: project, to: endOfTime, f: newFilters(), among: cond{"SELECT toUInt64(arrayJoin(?))", []any{set}}}.sql()
			got := attribution(t, store, "SELECT uuid, pid FROM ("+sql+") WHERE pid IN (SELECT toUInt64(arrayJoin(?)))", append(args, set)...)
			if d := diff(got, want); d != "" {
				t.Fatalf("project %d, cut to %d persons:\n%s", project, len(set), d)
			}
		}
	}

	// Retention: the cut statement against the same one without it.
	uncut := New(&uncutQuerier{Querier: store.Conn()}, nil)
	cut := &textCounter{Querier: store.Conn(), text: cutPrewhere} // cut to a set of persons
	st := New(cut, nil)
	// The scan of events (hourly_test.go compares the hourly counts' cut
	// with it).
	uncut.noHourly, st.noHourly = true, true
	// The cut through the overrides (amongCond); stored_test.go compares
	// the scans that leave them out.
	uncut.noStored, st.noStored = true, true
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for project := uint64(1); project <= 3; project++ {
		for _, typ := range []string{retentionRecurring, retentionFirstTime} {
			for sel := range 3 {
				q := url.Values{"date_to": {"2026-04-03"}, "period": {"Day"}, "total_intervals": {"3"},
					"selected_interval": {fmt.Sprint(sel)}, "retention_type": {typ}}
				f, err := ParseFilter(RetentionQuery(q), time.UTC, now)
				if err != nil {
					t.Fatal(err)
				}
				want, err := uncut.Retention(ctx, project, f, q, Page{}, now)
				if err != nil {
					t.Fatal(err)
				}
				before := cut.n.Load()
				got, err := st.Retention(ctx, project, f, q, Page{}, now)
				if err != nil {
					t.Fatal(err)
				}
				if cut.n.Load() == before {
					t.Fatalf("project %d %s %d: the statement was not cut", project, typ, sel)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("project %d %s selected %d:\n got %v\nwant %v", project, typ, sel, got, want)
				}
				if (sel == 0 || sel == 1 && typ == retentionRecurring) && len(want) == 0 {
					t.Fatalf("project %d %s selected %d: no persons: the comparison proves nothing", project, typ, sel)
				}
			}
		}
	}
}

// twoDays ingests workloadWithResets(seed, n, ids) through the real
// ingester and, a day later, views page views of the ids in steps of
// step, so persons come back.
func twoDays(t *testing.T, seed int64, n, ids, views, step int) *chstore.Store {
	nats := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	testenv.PublishWorkload(t, nats.JS, 0, workloadWithResets(seed, n, ids))
	var more []testenv.Message
	for i := range views {
		more = append(more, testenv.Message{Body: fmt.Sprintf(`{"event":"$pageview","distinct_id":"u%d"}`, (i*step)%ids)})
	}
	ingestAll(t, nats, store, testenv.PublishWorkload(t, nats.JS, 86400, more))
	return store
}

// cutPrewhere is the start of the condition scan.among adds.
const cutPrewhere = " AND (person_id IN ("

// uncutQuerier runs a statement with scan.among's condition made true
// for every row: the cut's set then keeps nothing out, and the answer is
// the one of the whole scan. The replacement keeps the set's statement
// (and so its placeholders) in the text: "1 OR person_id IN (...".
type uncutQuerier struct{ Querier }

func (u *uncutQuerier) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	if !strings.Contains(q, cutPrewhere) {
		return nil, fmt.Errorf("not a cut statement: %s", q)
	}
	return u.Querier.Query(ctx, strings.Replace(q, cutPrewhere, " AND (1 OR person_id IN (", 1), args...)
}

// TestRetentionBeyond64Intervals: up to 64 intervals, a person's returns
// are the bits of one number; beyond, an array. Recurring retention of
// 65 hours at selected interval k+1 is the one of 64 hours (the same
// last hour) at k, so the two forms must give the same persons and
// appearances (the reference tests in pkg/httpapi check the first).
func TestRetentionBeyond64Intervals(t *testing.T) {
	store := twoDays(t, 31, 600, 60, 300, 7)
	ctx := context.Background()
	st := New(store.Conn(), nil)
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	answer := func(project uint64, total, sel int) []Actor {
		q := url.Values{"date_to": {"2026-04-02T01:00:00"}, "period": {"Hour"}, "total_intervals": {fmt.Sprint(total)},
			"selected_interval": {fmt.Sprint(sel)}}
		f, err := ParseFilter(RetentionQuery(q), time.UTC, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Retention(ctx, project, f, q, Page{}, now)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	returned := 0
	for project := uint64(1); project <= 3; project++ {
		// 2026-04-01 00:00 is interval 38 of the 64 hours ending with
		// 2026-04-02 01:00: the first day's events, back 24 hours later.
		for _, sel := range []int{37, 38, 62} {
			small, big := answer(project, 64, sel), answer(project, 65, sel+1)
			if fmt.Sprint(small) != fmt.Sprint(big) {
				t.Fatalf("project %d hour %d:\n 64 intervals %v\n 65 intervals %v", project, sel, small, big)
			}
			for _, a := range small {
				if slices.Contains(a.Appearances[1:], 1) {
					returned++
				}
			}
		}
	}
	if returned == 0 {
		t.Fatal("no person came back: the comparison proves nothing")
	}
}
