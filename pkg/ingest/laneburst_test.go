package ingest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// lookupCounter counts the fold's reads of persons.
type lookupCounter struct {
	Store
	persons atomic.Int64
}

func (c *lookupCounter) LoadPersons(ctx context.Context, project uint64, ids []uint64) (map[uint64]fold.PersonRow, error) {
	c.persons.Add(1)
	return c.Store.LoadPersons(ctx, project, ids)
}

// publishPersons publishes n events to project 1, each creating the
// person of distinct id d<k> (person id k+1), and returns the last
// sequence.
func publishPersons(t *testing.T, js jetstream.JetStream, n int) uint64 {
	t.Helper()
	msgs := make([]testenv.Message, n)
	for k := range msgs {
		msgs[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"d%d","$set":{"n":%d}}`, k, k)}
	}
	return publishBacklog(t, js, 0, 1, msgs)
}

// TestWriteLaneTakesABurstWithFewLookups: a burst of API commands (300
// deletions and property writes, as a client deleting persons in a loop
// of concurrent requests makes) is taken by the lane with a few reads of
// persons, not one per command (which made 10,000 API deletions take ten
// minutes at 1M persons); the result equals a rebuild with the lane off.
func TestWriteLaneTakesABurstWithFewLookups(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	const persons = 300
	created := publishPersons(t, n.JS, persons)
	cfg := laneConfig("laned", true)
	counter := &lookupCounter{Store: store}
	cancel, done := startIngester(t, cfg, n.JS, counter)
	defer cancel()
	testenv.WaitCommitted(t, store, cfg.Consumer, created, time.Minute)
	ids := map[string]uint64{}
	rows, err := store.Conn().Query(context.Background(), "SELECT distinct_id, person_id FROM person_distinct_ids FINAL WHERE project_id = 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		var id uint64
		if err := rows.Scan(&d, &id); err != nil {
			t.Fatal(err)
		}
		ids[d] = id
	}
	rows.Close()
	if len(ids) != persons {
		t.Fatalf("%d persons, want %d", len(ids), persons)
	}

	// The fold's cache holds every person now: a fresh ingester does not.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	counter = &lookupCounter{Store: store}
	cancel, done = startIngester(t, cfg, n.JS, counter)
	defer cancel()
	// Its lane runs once it folds: the lane starts before the consumer.
	ping := publishBacklog(t, n.JS, persons, 1, []testenv.Message{{Body: `{"event":"e","distinct_id":"d0"}`}})
	testenv.WaitCommitted(t, store, cfg.Consumer, ping, time.Minute)
	counter.persons.Store(0)
	burst := make([]testenv.Message, 0, persons)
	for k := range persons {
		d := fmt.Sprintf("d%d", k)
		if k%2 == 0 {
			burst = append(burst, testenv.DeletePerson(ids[d]))
		} else {
			burst = append(burst, testenv.Message{Command: true,
				Body: fmt.Sprintf(`{"event":"$set","distinct_id":%q,"$set":{"api":%d},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`, d, k)})
		}
	}
	// Behind a capture backlog, so that the lane, not the main consumer,
	// takes the commands. Its events name new distinct ids: no person
	// to read.
	backlog := make([]testenv.Message, 6000)
	for k := range backlog {
		backlog[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"b%d"}`, k)}
	}
	publishBacklog(t, n.JS, persons+1, 1, backlog)
	last := publishBacklog(t, n.JS, persons+1+len(backlog), 1, burst)
	testenv.WaitCommitted(t, store, cfg.Consumer, last, 2*time.Minute)
	if got := counter.persons.Load(); got > persons/10 {
		t.Fatalf("%d reads of persons for a burst of %d commands: the lane looks them up one by one", got, persons)
	}
	if records := laneRecords(t, n.JS); records < persons*9/10 {
		t.Fatalf("the lane took %d of %d commands: the burst was folded in place, not tested", records, persons)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads of persons for %d commands", counter.persons.Load(), persons)
	ref := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, ref, last)
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("the lane's run differs from a rebuild:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestWriteLaneTakesAnIdleBurstInFewBatches: 2,000 API deletions published
// at once to an idle ingester are folded in a few batches. The lane took
// a window of commands per batch that counted the ones it had taken
// already (queued until the main consumer passes them), so after the
// first batch each took one new command and ended one message later:
// 1,001 batches here, 10,000 API deletions in ~10 minutes at 1M persons
// (the purge's queueing). The result equals a rebuild with the lane off.
func TestWriteLaneTakesAnIdleBurstInFewBatches(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	const persons = 2000
	created := publishPersons(t, n.JS, persons)
	cfg := laneConfig("laned", true)
	cfg.BatchSize = 5000
	cancel, done := startIngester(t, cfg, n.JS, store)
	defer cancel()
	testenv.WaitCommitted(t, store, cfg.Consumer, created, time.Minute)
	batches := func() uint64 {
		var n uint64
		if err := store.Conn().QueryRow(context.Background(), "SELECT count() FROM ingest_batches WHERE consumer = ?", cfg.Consumer).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := batches()
	burst := make([]testenv.Message, 0, persons)
	for k := range persons {
		// Person ids are their creating sequences: 1..persons.
		burst = append(burst, testenv.DeletePerson(uint64(k+1)))
	}
	last := publishBacklog(t, n.JS, persons, 1, burst)
	testenv.WaitCommitted(t, store, cfg.Consumer, last, 3*time.Minute)
	took := batches() - before
	records := laneRecords(t, n.JS)
	t.Logf("%d batches, %d commands by the lane", took, records)
	if took > 50 {
		t.Fatalf("%d batches for a burst of %d commands", took, persons)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if live, _, err := store.ListPersons(context.Background(), chstore.ListQuery{ProjectID: 1, Limit: 10}); err != nil || len(live) != 0 {
		t.Fatalf("after deleting every person: %d listed (%v)", len(live), err)
	}
	ref := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, ref, last)
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("the lane's run differs from a rebuild:\n%s", testenv.FirstDiff(got, want))
	}
}
