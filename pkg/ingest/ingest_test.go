package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// quietLogger discards the ingesters' logs, or writes them to stderr
// when INGEST_TEST_LOG is set (to read what a failing test's ingesters did).
func quietLogger() *slog.Logger {
	if os.Getenv("INGEST_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// publish sends envelopes (with uuid and timestamp filled in) to a
// project's event subject.
func publish(t *testing.T, js jetstream.JetStream, project uint64, events []string) {
	t.Helper()
	msgs := make([]testenv.Message, len(events))
	for i, e := range events {
		msgs[i] = testenv.Message{Body: e}
	}
	publishMessages(t, js, project, msgs)
}

// publishMessages sends workload messages, commands on the command subject.
func publishMessages(t *testing.T, js jetstream.JetStream, project uint64, msgs []testenv.Message) {
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("%d-%d", project, i))).String()
		ts := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		if _, err := testenv.Publish(ctx, js, project, m, id, ts); err != nil {
			t.Fatal(err)
		}
	}
}

// startIngester runs an ingester until cancel; done has Run's result.
func startIngester(t *testing.T, cfg Config, js jetstream.JetStream, store Store) (context.CancelFunc, <-chan error) {
	t.Helper()
	ing, err := New(cfg, js, store, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	return cancel, done
}

// runUntil runs an ingester until it has committed lastSeq (or fails).
func runUntil(t *testing.T, cfg Config, js jetstream.JetStream, store Store, lastSeq uint64) {
	t.Helper()
	cancel, done := startIngester(t, cfg, js, store)
	// A hang detector, not a speed bound: CI machines under load are slow.
	deadline := time.Now().Add(3 * time.Minute)
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
	// Batches of BatchSize: what most tests say of batches. Growth
	// (on by default) is tested on its own (grow_test.go, lanecut_test.go)
	// and by cmd/ingester's tests, which run the defaults.
	cfg.GrowFor = 0
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

// flakyStore fails WriteBatch at chosen points, after writing a prefix of
// the batch (in WriteRows' order) for real, the way a process killed
// mid-write would leave it.
type flakyStore struct {
	*chstore.Store
	calls atomic.Int64
	every int64
	// wholeReads counts the projects the fold read whole.
	wholeReads atomic.Int64
}

func (f *flakyStore) LoadProject(ctx context.Context, project uint64, limit int, did func(fold.DistinctIDRow), person func(fold.PersonRow)) (bool, error) {
	f.wholeReads.Add(1)
	return f.Store.LoadProject(ctx, project, limit, did, person)
}

func (f *flakyStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	n := f.calls.Add(1)
	if n%f.every != 0 {
		return f.Store.WriteBatch(ctx, events, b, m)
	}
	// Write a prefix of the batch, then fail.
	switch (n / f.every) % 4 {
	case 0:
		_ = f.Store.WriteRows(ctx, events[:len(events)/2], fold.Batch{})
	case 1: // stopped after the person rows
		_ = f.Store.WriteRows(ctx, events, fold.Batch{Activity: b.Activity, DeletionRequests: b.DeletionRequests, CohortMembers: b.CohortMembers, Persons: b.Persons, Rekeyed: b.Rekeyed})
	case 2: // stopped half way through the distinct id rows
		_ = f.Store.WriteRows(ctx, events, fold.Batch{Activity: b.Activity, DeletionRequests: b.DeletionRequests, CohortMembers: b.CohortMembers,
			Persons: b.Persons, Rekeyed: b.Rekeyed, DistinctIDs: b.DistinctIDs[:len(b.DistinctIDs)/2]})
	case 3:
		_ = f.Store.WriteRows(ctx, events, b)
	}
	return errors.New("injected failure")
}

func TestCrashesAndReplayGiveTheSameState(t *testing.T) {
	n := testenv.StartNATS(t, "")
	events := testenv.Workload(3, 3000, 150)
	publishMessages(t, n.JS, 1, events[:2000])
	publishMessages(t, n.JS, 2, events[2000:])
	last := uint64(len(events))

	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	wantSameAfterFailuresAndReplay(t, n.JS, ref, last)
}

// wantSameAfterFailuresAndReplay folds the stream up to last twice more,
// with failures injected at every write stage every few batches and as a
// replay into empty tables with other batch sizes; both must end in the
// state of ref, an uninterrupted run, and the first with one events row
// per message, unmerged.
func wantSameAfterFailuresAndReplay(t *testing.T, js jetstream.JetStream, ref *chstore.Store, last uint64) {
	t.Helper()
	want := testenv.Snapshot(t, ref)
	crashy := testenv.ClickHouse(t)
	stopMerges(t, crashy)
	// The crashed runs read each project whole at every cold step (one
	// miss is enough), so refolds start from whole reads of the rows the
	// failures left (pkg/fold/whole.go); the replay reads row by row.
	cfg := testConfig("crashy")
	cfg.DenseMisses = 1
	flaky := &flakyStore{Store: crashy, every: 3}
	runUntil(t, cfg, js, flaky, last)
	if flaky.wholeReads.Load() == 0 {
		t.Fatal("the crashed runs read no project whole")
	}
	if got := testenv.Snapshot(t, crashy); got != want {
		t.Fatalf("state after injected failures differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
	wantOneRowPerMessage(t, crashy, ref)
	replay := testenv.ClickHouse(t)
	cfg = testConfig("replay")
	cfg.BatchSize = 1000
	runUntil(t, cfg, js, replay, last)
	if got := testenv.Snapshot(t, replay); got != want {
		t.Fatalf("replay differs:\n%s", testenv.FirstDiff(got, want))
	}
}
