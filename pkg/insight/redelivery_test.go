package insight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// brokenStore fails every every-th batch write (0: none) after its rows
// landed and before its commit marker. With dead set, the first such failure kills
// it (every later write fails), as a crashed process leaves its store.
type brokenStore struct {
	*chstore.Store
	mu    sync.Mutex
	calls int
	every int
	dead  chan struct{}
}

func (s *brokenStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil {
		select {
		case <-s.dead:
			return errors.New("dead")
		default:
		}
	}
	if s.calls++; s.every == 0 || s.calls%s.every != 0 {
		return s.Store.WriteBatch(ctx, events, b, m)
	}
	if err := s.Store.WriteRows(ctx, events, b); err != nil {
		return err
	}
	if s.dead != nil {
		close(s.dead)
	}
	return errors.New("injected failure after the rows, before the commit marker")
}

// runIngester runs an ingester over store until it committed last, or,
// with the store dying, until it died (the batch in hand abandoned).
func runIngester(t *testing.T, n *testenv.NATS, store *brokenStore, consumer string, batch int, last uint64) {
	t.Helper()
	cfg := ingest.DefaultConfig()
	cfg.Consumer, cfg.BatchSize, cfg.BatchWait = consumer, batch, 20*time.Millisecond
	// Batches of `batch` messages: the failures are counted per batch
	// write, and the in-process retry is that of a batch in hand (a
	// grown batch's failures: pkg/ingest TestGrownBatchCrashes).
	cfg.GrowFor = 0
	if store.dead != nil {
		cfg.ShutdownGrace = 50 * time.Millisecond // the dead store's batch is abandoned
	}
	ing, err := ingest.New(cfg, n.JS, store, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	if store.dead != nil {
		select {
		case <-store.dead:
		case <-time.After(time.Minute):
			t.Fatal("the store did not die")
		}
		cancel()
		<-done // an error: the batch in hand is not committed
		return
	}
	testenv.WaitCommitted(t, store.Store, consumer, last, 90*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRedeliveredMessagesCountOnce: the routes count rows of events, so
// every message must have one row, also after the ingester's failure
// paths: a crash after a batch's rows (the next start folds the range
// again) and writes that fail after their rows landed (retried in
// process), with ClickHouse's merges stopped so no second row is merged
// away by chance. Each route's answer equals the answer over an
// uninterrupted ingest, and trends and stickiness equal the numbers
// computed here. The events span a month boundary, so a batch's insert
// spans two partitions.
func TestRedeliveredMessagesCountOnce(t *testing.T) {
	const project = 7
	n := testenv.StartNATS(t, "")
	ctx := context.Background()
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 3, 29, 10, 0, 0, 0, time.UTC)
	// Person p: on each of 1+p%5 days, 1+p%3 $pageviews of page p%3;
	// on the first day, the steps a, b, c up to p%4 of them.
	wantTrends, wantSticky := map[uint64]float64{}, map[uint64]bool{}
	var last uint64
	seen := map[string]uint64{}
	for p := range 60 {
		did := fmt.Sprintf("d%d", p)
		days, views := 1+p%5, 1+p%3
		for d := range days {
			for v := range views {
				ts := start.Add(time.Duration(d)*24*time.Hour + time.Duration(p)*time.Minute + time.Duration(v)*time.Second)
				last = publishAt(t, n, project, did, "$pageview", fmt.Sprintf(`{"$current_url":"https://x.test/%d"}`, p%3), ts)
				if _, ok := seen[did]; !ok {
					seen[did] = last // the person's id: its first event's sequence
				}
			}
		}
		for i, step := range []string{"a", "b", "c"}[:p%4] {
			last = publishAt(t, n, project, did, step, "{}", start.Add(time.Duration(p)*time.Minute+time.Duration(10+10*i)*time.Second))
		}
		wantTrends[seen[did]] = float64(days * views)
		wantSticky[seen[did]] = days == 3
	}

	clean := testenv.ClickHouse(t)
	runIngester(t, n, &brokenStore{Store: clean}, "clean", 40, last)
	broken := testenv.ClickHouse(t)
	if err := broken.Conn().Exec(ctx, "SYSTEM STOP MERGES events"); err != nil {
		t.Fatal(err)
	}
	runIngester(t, n, &brokenStore{Store: broken, every: 2, dead: make(chan struct{})}, "broken", 40, last)
	runIngester(t, n, &brokenStore{Store: broken, every: 3}, "broken", 40, last)

	var rows, seqs uint64
	if err := broken.Conn().QueryRow(ctx, "SELECT count(), uniqExact(seq) FROM events").Scan(&rows, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != seqs || seqs != last {
		t.Fatalf("events: %d rows of %d seqs, want %d messages, one row each", rows, seqs, last)
	}

	now := start.AddDate(0, 0, 10)
	routes := map[string]url.Values{
		"trends":     {"events": {`[{"id":"$pageview"}]`}, "entity_id": {"$pageview"}, "entity_type": {"events"}},
		"stickiness": {"events": {`[{"id":"$pageview"}]`}, "entity_id": {"$pageview"}, "stickiness_days": {"3"}},
		"lifecycle":  {"events": {`[{"id":"$pageview"}]`}, "target_date": {"2024-03-31"}, "lifecycle_type": {"returning"}},
		"retention":  {"date_to": {"2024-04-05"}, "total_intervals": {"9"}, "selected_interval": {"1"}},
		"funnel": {"events": {`[{"id":"a","order":0},{"id":"b","order":1},{"id":"c","order":2}]`},
			"funnel_order_type": {"strict"}, "funnel_step": {"3"}},
		"path": {"include_event_types": {`["$pageview"]`}, "include_custom_events": {`["a","b"]`}, "path_start_key": {"1_https://x.test/1"}},
	}
	answer := func(store *chstore.Store, route string) []Actor {
		q := url.Values{"date_from": {"2024-03-25"}, "date_to": {"2024-04-05"}}
		for k, v := range routes[route] {
			q[k] = v
		}
		f, err := ParseFilter(q, time.UTC, now)
		if err != nil {
			t.Fatal(err)
		}
		st := New(store.Conn(), nil)
		run := map[string]func() ([]Actor, error){
			"trends":     func() ([]Actor, error) { return st.Trends(ctx, project, f, q, Page{}) },
			"stickiness": func() ([]Actor, error) { return st.Stickiness(ctx, project, f, q, Page{}) },
			"lifecycle":  func() ([]Actor, error) { return st.Lifecycle(ctx, project, f, q, Page{}, now) },
			"retention":  func() ([]Actor, error) { return st.Retention(ctx, project, f, q, Page{}, now) },
			"funnel":     func() ([]Actor, error) { return st.Funnel(ctx, project, f, q, Page{}) },
			"path":       func() ([]Actor, error) { return st.Paths(ctx, project, f, q, Page{}) },
		}[route]
		out, err := run()
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no person: the test proves nothing", route)
		}
		return out
	}
	same := func(x, y Actor) bool {
		return x.PersonID == y.PersonID && x.Value == y.Value && slices.Equal(x.Appearances, y.Appearances)
	}
	for route := range routes {
		want, got := answer(clean, route), answer(broken, route)
		if !slices.EqualFunc(got, want, same) {
			t.Errorf("%s: %v after the failures, %v uninterrupted", route, got, want)
		}
		switch route {
		case "trends":
			if len(got) != len(wantTrends) {
				t.Errorf("trends: %d persons, want %d", len(got), len(wantTrends))
			}
			for _, a := range got {
				if a.Value != wantTrends[a.PersonID] {
					t.Errorf("trends: person %d counts %v events, want %v", a.PersonID, a.Value, wantTrends[a.PersonID])
				}
			}
		case "stickiness":
			for _, a := range got {
				if !wantSticky[a.PersonID] {
					t.Errorf("stickiness: person %d is not active on exactly 3 days", a.PersonID)
				}
			}
			if want := 12; len(got) != want { // p%5 == 2
				t.Errorf("stickiness: %d persons, want %d", len(got), want)
			}
		}
	}
}

// publishAt publishes one event of distinct id did and returns its
// stream sequence.
func publishAt(t *testing.T, n *testenv.NATS, project uint64, did, name, props string, ts time.Time) uint64 {
	t.Helper()
	body := fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, did, props)
	ack, err := testenv.Publish(context.Background(), n.JS, project, testenv.Message{Body: body}, uuid.NewString(), ts)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
