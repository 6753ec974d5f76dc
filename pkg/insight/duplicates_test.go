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

// TestRedeliveredRowsCountOnce: a batch written twice (a redelivery before
// ClickHouse merges the copies) changes no answer of the routes whose SQL
// dedupes in its own way: trends (distinct uuids per person), a strict
// funnel (whose chain a copy of step 1 would break) and path. Each answer
// is read once over single rows, then again over the doubled rows.
func TestRedeliveredRowsCountOnce(t *testing.T) {
	ctx := context.Background()
	store := testenv.ClickHouse(t)
	conn := store.Conn()
	if err := conn.Exec(ctx, "SYSTEM STOP MERGES events"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Exec(ctx, "SYSTEM START MERGES events") }()
	const project = 7
	day := time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)
	// Person p: $pageview of page p%3, then the steps a, b, c up to p%4
	// of them, 10 s apart, so the persons reach levels 0 to 3.
	const cols = "project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq"
	b, err := conn.PrepareBatch(ctx, "INSERT INTO events ("+cols+")")
	if err != nil {
		t.Fatal(err)
	}
	rows, seq := 0, uint64(1)
	for p := uint64(1); p <= 40; p++ {
		names := append([]string{"$pageview"}, []string{"a", "b", "c"}[:p%4]...)
		for i, name := range names {
			props := fmt.Sprintf(`{"$current_url":"https://x.test/%d"}`, p%3)
			if err := b.Append(uint64(project), uuid.New(), name, fmt.Sprintf("d%d", p), p, uuid.New(),
				day.Add(time.Duration(p)*time.Minute+time.Duration(i)*10*time.Second), uint16(0), props, seq); err != nil {
				t.Fatal(err)
			}
			rows, seq = rows+1, seq+1
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}

	st := New(conn, nil)
	now := day.AddDate(0, 0, 10)
	answer := func(route string) []Actor {
		q := url.Values{"date_from": {"2024-03-01"}, "date_to": {"2024-03-10"}}
		var run func(*Filter) ([]Actor, error)
		switch route {
		case "trends":
			q.Set("events", `[{"id":"$pageview"},{"id":"a","order":1}]`)
			q.Set("entity_id", "a")
			q.Set("entity_type", "events")
			run = func(f *Filter) ([]Actor, error) { return st.Trends(ctx, project, f, q, Page{}) }
		case "funnel":
			q.Set("events", `[{"id":"a","order":0},{"id":"b","order":1},{"id":"c","order":2}]`)
			q.Set("funnel_order_type", "strict")
			q.Set("funnel_step", "3") // level 3: a copy of b between b and c breaks it
			run = func(f *Filter) ([]Actor, error) { return st.Funnel(ctx, project, f, q, Page{}) }
		case "path":
			q.Set("include_event_types", `["$pageview"]`)
			q.Set("include_custom_events", `["a","b"]`)
			q.Set("path_start_key", "1_https://x.test/1")
			run = func(f *Filter) ([]Actor, error) { return st.Paths(ctx, project, f, q, Page{}) }
		}
		f, err := ParseFilter(q, time.UTC, now)
		if err != nil {
			t.Fatal(err)
		}
		out, err := run(f)
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no person: the test proves nothing", route)
		}
		return out
	}
	routes := []string{"trends", "funnel", "path"}
	before := map[string][]Actor{}
	for _, r := range routes {
		before[r] = answer(r)
	}
	// The redelivered batch: the same rows again, in a second part.
	if err := conn.Exec(ctx, "INSERT INTO events ("+cols+") SELECT "+cols+" FROM events WHERE project_id = ?", uint64(project)); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM events WHERE project_id = ?", uint64(project)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2*uint64(rows) {
		t.Fatalf("%d rows after the second write, want %d (merged already?)", n, 2*rows)
	}
	for _, r := range routes {
		after := answer(r)
		if !slices.EqualFunc(before[r], after, func(x, y Actor) bool { return x.PersonID == y.PersonID && x.Value == y.Value }) {
			t.Errorf("%s: %v over single rows, %v over doubled rows", r, before[r], after)
		}
	}
}
