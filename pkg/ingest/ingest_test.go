package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// publish sends envelopes (with uuid and timestamp filled in) to a project.
func publish(t *testing.T, js jetstream.JetStream, project uint64, events []string) {
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("%d-%d", project, i))).String()
		ts := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		body := e
		if strings.HasPrefix(e, "{") && !strings.Contains(e, `"uuid"`) {
			body = fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, ts, e[1:])
		}
		if _, err := stream.Publish(ctx, js, project, id, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

// runUntil runs an ingester until it has committed lastSeq (or fails).
func runUntil(t *testing.T, cfg Config, js jetstream.JetStream, store Store, lastSeq uint64) {
	t.Helper()
	ing, err := New(cfg, js, store, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		seq, err := store.LastCommitted(context.Background(), cfg.Consumer)
		if err == nil && seq >= lastSeq {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("ingester did not reach seq %d (at %d, %v)", lastSeq, seq, err)
		}
		select {
		case err := <-done:
			t.Fatalf("ingester stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func testConfig(consumer string) Config {
	cfg := DefaultConfig()
	cfg.Consumer = consumer
	cfg.BatchSize = 97
	cfg.BatchWait = 20 * time.Millisecond
	cfg.AckWait = 5 * time.Second
	return cfg
}

func TestFoldsIntoClickHouse(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	publish(t, n.JS, 7, []string{
		`{"event":"$pageview","distinct_id":"anon-1","$set_once":{"first":"x"},"properties":{"$set":{"plan":"free"}}}`,
		`{"event":"$identify","distinct_id":"user@x.io","properties":{"$anon_distinct_id":"anon-1"},"$set":{"email":"user@x.io"}}`,
		`{"event":"$pageview","distinct_id":"other","$set":{"n":5}}`,
		`{"event":"$pageview","distinct_id":"other","$unset":["n"]}`,
		`not json`,
		`{"event":"$pageview","distinct_id":"null","properties":{}}`,
	})
	runUntil(t, testConfig("ingester"), n.JS, store, 6)

	ctx := context.Background()
	list, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if total != 3 || len(list) != 3 {
		t.Fatalf("persons = %d (%d)", total, len(list))
	}
	byID := map[string]chstore.PersonRecord{}
	for _, p := range list {
		byID[p.DistinctIDs[0]] = p
	}
	u := byID["anon-1"]
	if got := fmt.Sprintln(u.DistinctIDs, u.Properties["email"], u.Properties["first"], u.Properties["plan"], u.IsIdentified); got != "[anon-1 user@x.io] user@x.io x free true\n" {
		t.Fatalf("identified person: %s", got)
	}
	if o := byID["other"]; len(o.Properties) != 0 {
		t.Fatalf("unset not applied: %v", o.Properties)
	}
	// The malformed message went to the dead-letter stream with a reason.
	dlq, err := n.JS.Stream(ctx, stream.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := dlq.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "not json" || !strings.Contains(msg.Header.Get(stream.HeaderReason), "not a JSON object") || msg.Header.Get(stream.HeaderSeq) != "5" {
		t.Fatalf("dead letter: %q %v", msg.Data, msg.Header)
	}
	// Every folded event is stored with its person.
	var events, unattributed uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count(), countIf(person_id = 0) FROM events FINAL WHERE project_id = 7").Scan(&events, &unattributed); err != nil {
		t.Fatal(err)
	}
	if events != 5 || unattributed != 0 {
		t.Fatalf("events = %d, without person %d", events, unattributed)
	}
}

// randomWorkload makes mixed events over few ids: creations, sets,
// set_once, unsets, identifies that merge, aliases, illegal ids.
func randomWorkload(seed int64, n, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	id := func() string {
		if r.Intn(40) == 0 {
			return []string{"null", "undefined", "0", "anonymous"}[r.Intn(4)]
		}
		return fmt.Sprintf("u%d", r.Intn(ids))
	}
	var out []string
	for i := 0; i < n; i++ {
		switch k := r.Intn(12); {
		case k < 4:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set":{"k%d":%d}}`, id(), r.Intn(6), r.Intn(4)))
		case k < 5:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set_once":{"k%d":"o%d"}}`, id(), r.Intn(6), r.Intn(4)))
		case k < 6:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$unset":["k%d"]}`, id(), r.Intn(6)))
		case k < 7:
			out = append(out, fmt.Sprintf(`{"event":"$identify","distinct_id":%q,"properties":{"$anon_distinct_id":%q}}`, id(), id()))
		case k < 8:
			out = append(out, fmt.Sprintf(`{"event":"$create_alias","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 9:
			out = append(out, fmt.Sprintf(`{"event":"$merge_dangerously","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 10:
			out = append(out, fmt.Sprintf(`{"event":"$delete_person_property","distinct_id":%q,"$unset":["k%d"]}`, id(), r.Intn(6)))
		default:
			out = append(out, fmt.Sprintf(`{"event":"$pageview","distinct_id":%q}`, id()))
		}
	}
	return out
}

// snapshot renders every table the ingester writes, newest versions, as
// text: two databases hold the same state exactly when these match.
func snapshot(t *testing.T, store *chstore.Store) string {
	t.Helper()
	queries := []string{
		"SELECT project_id, id, uuid, properties, distinct_ids, created_at, is_identified, is_deleted, version FROM persons FINAL ORDER BY project_id, id",
		"SELECT project_id, distinct_id, person_id, is_deleted, version FROM person_distinct_ids FINAL ORDER BY project_id, distinct_id",
		"SELECT project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, properties, seq FROM events FINAL ORDER BY seq",
		"SELECT count() FROM (SELECT uuid FROM events FINAL GROUP BY uuid HAVING count() > 1)",
	}
	var b strings.Builder
	for _, q := range queries {
		rows, err := store.Conn().Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		types := rows.ColumnTypes()
		for rows.Next() {
			vals := make([]any, len(types))
			for i, ct := range types {
				vals[i] = newOf(ct.ScanType())
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				fmt.Fprintf(&b, "%v\t", deref(v))
			}
			b.WriteByte('\n')
		}
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String()
}

// flakyStore fails WriteBatch at chosen points, after writing part of the
// batch for real, the way a process killed mid-write would leave it.
type flakyStore struct {
	*chstore.Store
	calls atomic.Int64
	every int64
}

func (f *flakyStore) WriteBatch(ctx context.Context, events []chstore.EventRow, b fold.Batch, m chstore.BatchMarker) error {
	n := f.calls.Add(1)
	if n%f.every != 0 {
		return f.Store.WriteBatch(ctx, events, b, m)
	}
	// Write a prefix of the batch, then fail.
	switch (n / f.every) % 4 {
	case 0:
		_ = f.Store.WriteRows(ctx, events[:len(events)/2], fold.Batch{})
	case 1:
		_ = f.Store.WriteRows(ctx, events, fold.Batch{Persons: b.Persons})
	case 2:
		_ = f.Store.WriteRows(ctx, events, fold.Batch{Persons: b.Persons, DistinctIDs: b.DistinctIDs[:len(b.DistinctIDs)/2]})
	case 3:
		_ = f.Store.WriteRows(ctx, events, b)
	}
	return errors.New("injected failure")
}

func TestCrashesAndReplayGiveTheSameState(t *testing.T) {
	n := testenv.StartNATS(t, "")
	events := randomWorkload(3, 3000, 150)
	publish(t, n.JS, 1, events[:2000])
	publish(t, n.JS, 2, events[2000:])
	last := uint64(len(events))

	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	want := snapshot(t, ref)

	// Failures at every write stage, every few batches.
	crashy := testenv.ClickHouse(t)
	runUntil(t, testConfig("crashy"), n.JS, &flakyStore{Store: crashy, every: 3}, last)
	if got := snapshot(t, crashy); got != want {
		t.Fatalf("state after injected failures differs from an uninterrupted run:\n%s", diff(got, want))
	}

	// A replay into empty tables with other batch sizes.
	replay := testenv.ClickHouse(t)
	cfg := testConfig("replay")
	cfg.BatchSize = 1000
	runUntil(t, cfg, n.JS, replay, last)
	if got := snapshot(t, replay); got != want {
		t.Fatalf("replay differs:\n%s", diff(got, want))
	}
}

func diff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(g), len(w))
}

func newOf(t reflect.Type) any { return reflect.New(t).Interface() }

func deref(v any) any { return reflect.ValueOf(v).Elem().Interface() }
