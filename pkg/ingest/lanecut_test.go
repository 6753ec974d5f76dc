package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/testenv"
)

// gateHook passes every event through, but holds the first call with at
// least min inputs until the write lane has read the command at cmd
// (sent once the call is entered): the command arrives while that batch
// is in hand, before its fold. It runs on the batch loop's goroutine,
// which is the one that owns ing.lane.
type gateHook struct {
	ing     *Ingester
	min     int
	pass    int         // calls of min inputs or more let through first
	entered chan uint64 // the held batch's last sequence
	cmd     chan uint64
	held    bool
}

func (h *gateHook) Transform(ctx context.Context, in []HookInput) ([]fold.Input, error) {
	if !h.held && len(in) >= h.min && h.pass > 0 {
		h.pass--
	} else if !h.held && len(in) >= h.min {
		h.held = true
		h.entered <- in[len(in)-1].Seq
		seq := <-h.cmd
		for h.ing.lane.newest.Load() < seq {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			time.Sleep(time.Millisecond)
		}
	}
	out := make([]fold.Input, len(in))
	for k := range in {
		out[k] = in[k].Input
	}
	return out, nil
}

// TestWriteLaneCutsTheFold: a command that arrives while a full batch is
// about to fold does not wait for the whole batch: the fold stops at the
// next look at the lane, the part folded is committed with the command
// after it, and the rest of the batch goes on with the next one. The
// record says so (its after is inside the held batch, not at its end),
// and a rebuild with the lane off gives the same tables.
func TestWriteLaneCutsTheFold(t *testing.T) {
	laneCutCase(t, "cut", 4000, 0, 0)
}

// TestWriteLaneCutsAGrownBatch: the same inside a batch grown with the
// backlog (grow.go): the command arrives as the grown batch's third chunk
// is about to fold, and waits neither for that chunk's whole fold nor for
// the batch's end; the chunk's rest goes on as a batch of its own.
func TestWriteLaneCutsAGrownBatch(t *testing.T) {
	laneCutCase(t, "growncut", 1000, 20*time.Second, 2)
}

// laneCutCase publishes a backlog of 4,000 messages, holds the fold of a
// batch (or chunk) of at least 1,000 (the pass+1-th) until a command has
// reached the lane, and checks that the command was folded inside it, and
// that a rebuild with the lane off gives the same tables.
func laneCutCase(t *testing.T, consumer string, batchSize int, growFor time.Duration, pass int) {
	n := testenv.StartNATS(t, "")
	first := testenv.PublishWorkload(t, n.JS, 0, []testenv.Message{{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}})
	store := testenv.ClickHouse(t)
	cfg := laneConfig(consumer, true)
	// A first run commits, so the lane is live at the next start; with
	// small batches, as the lane takes nothing where the intents say an
	// uncommitted write may reach (BatchSize beyond the last batch).
	runUntil(t, cfg, n.JS, store, first)
	// Batches (chunks) end full, not when BatchWait runs out: on a loaded
	// machine 20 ms filled none to the hook's minimum.
	cfg.BatchSize, cfg.BatchWait, cfg.GrowFor = batchSize, time.Minute, growFor

	backlog := make([]testenv.Message, 4000)
	for k := range backlog {
		backlog[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"b%d","$set":{"n":%d}}`, k%1000, k)}
	}
	last := publishBacklog(t, n.JS, 1, 3, backlog)

	hook := &gateHook{min: min(batchSize, 2000), pass: pass, entered: make(chan uint64, 1), cmd: make(chan uint64, 1)}
	ing, done, cancel, heldLast, ack := runHeld(t, cfg, n, store, hook)
	defer cancel()

	watch := watchProgress(t, n.JS, cfg.Consumer)
	if err := watch.Wait(context.Background(), 1, ack.Sequence, time.Minute); err != nil {
		t.Fatal(err)
	}
	s, err := n.JS.Stream(context.Background(), LaneStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(context.Background(), ing.laneSubject())
	if err != nil {
		t.Fatal(err)
	}
	var rec laneRecord
	if err := json.Unmarshal(raw.Data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Seq != ack.Sequence || rec.After >= heldLast {
		t.Fatalf("record %+v; want the command %d folded inside the held batch (before its last seq %d)", rec, ack.Sequence, heldLast)
	}
	t.Logf("command %d folded after seq %d; the held batch ran to %d", rec.Seq, rec.After, heldLast)

	testenv.WaitCommitted(t, store, cfg.Consumer, ack.Sequence, 3*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if committed, err := store.LastCommitted(context.Background(), cfg.Consumer); err != nil || committed < last {
		t.Fatalf("committed %d, %v; want the whole backlog (%d)", committed, err, last)
	}
	rebuilt := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, rebuilt, ack.Sequence)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store); got != want {
		t.Fatalf("a rebuild differs from the run that cut the fold:\n%s", testenv.FirstDiff(got, want))
	}
}

// runHeld starts an ingester whose hook holds a batch (or chunk), sends
// the command x=2 for person "a" of project 1 once it is held, and
// returns the running ingester, its end, the held batch's last sequence
// and the command's ack.
func runHeld(t *testing.T, cfg Config, n *testenv.NATS, store Store, hook *gateHook) (*Ingester, chan error, context.CancelFunc, uint64, *jetstream.PubAck) {
	t.Helper()
	cfg.Hook = hook
	ing, err := New(cfg, n.JS, store, quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	hook.ing = ing
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	var heldLast uint64
	select {
	case heldLast = <-hook.entered:
	case err := <-done:
		cancel()
		t.Fatalf("ingester stopped: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("no batch long enough reached the hook")
	}
	ack, err := testenv.Publish(context.Background(), n.JS, 1, testenv.Message{
		Body:    `{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		Command: true}, uuid.NewString(), time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	hook.cmd <- ack.Sequence
	return ing, done, cancel, heldLast, ack
}

// watchProgress follows the consumer's watermarks (its own and its
// lane's) as the API does, until the test ends.
func watchProgress(t *testing.T, js jetstream.JetStream, consumer string) *progress.Partitions {
	t.Helper()
	kv, err := progress.Open(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := progress.WatchPartitions(context.Background(), kv, consumer, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Stop)
	return watch
}

// leadStore holds a batch's write once its lead (the write lane's
// persons, chstore.BatchMarker.Lead) has landed and the lane's watermark
// moved: it reports the batch's last sequence on landed, then ends the
// write with whatever release sends (an error: the process dies there).
// Only the first lead is held.
type leadStore struct {
	*chstore.Store
	landed  chan uint64
	release chan error
}

func (s *leadStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	if done := m.LeadDone; done != nil {
		m.LeadDone = func() error {
			if err := done(); err != nil {
				return err
			}
			select {
			case s.landed <- m.LastSeq:
				return <-s.release
			default:
				return nil
			}
		}
	}
	return s.Store.WriteBatch(ctx, events, b, m)
}

// TestWriteLaneLeadsTheCommit: a command cut into a grown batch is visible
// (the lane's watermark, the person read back) once its person's rows
// landed, before the rest of the batch's persons and its marker. The
// write then dies there: the refold from the commit point finds the
// person written at the command's place, and the tables equal a rebuild
// with the lane off.
func TestWriteLaneLeadsTheCommit(t *testing.T) {
	old := leadMinPersons
	leadMinPersons = 10
	defer func() { leadMinPersons = old }()
	n := testenv.StartNATS(t, "")
	first := testenv.PublishWorkload(t, n.JS, 0, []testenv.Message{{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}})
	store := &leadStore{Store: testenv.ClickHouse(t), landed: make(chan uint64, 1), release: make(chan error, 1)}
	cfg := laneConfig("lead", true)
	runUntil(t, cfg, n.JS, store, first)
	cfg.BatchSize, cfg.BatchWait, cfg.GrowFor = 1000, time.Minute, 20*time.Second

	backlog := make([]testenv.Message, 4000)
	for k := range backlog {
		backlog[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"b%d","$set":{"n":%d}}`, k%1000, k)}
	}
	last := publishBacklog(t, n.JS, 1, 3, backlog)
	hook := &gateHook{min: 1000, pass: 2, entered: make(chan uint64, 1), cmd: make(chan uint64, 1)}
	_, done, cancel, _, ack := runHeld(t, cfg, n, store, hook)
	defer cancel()

	var batchEnd uint64
	select {
	case batchEnd = <-store.landed:
	case err := <-done:
		t.Fatalf("ingester stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no batch wrote a lead")
	}
	watch := watchProgress(t, n.JS, cfg.Consumer)
	if err := watch.Wait(context.Background(), 1, ack.Sequence, 10*time.Second); err != nil {
		t.Fatalf("the lane's watermark did not reach the command once its person landed: %v", err)
	}
	committed, err := store.LastCommitted(context.Background(), cfg.Consumer)
	if err != nil || committed >= batchEnd {
		t.Fatalf("committed %d, %v: want the batch ending at %d not committed yet", committed, err, batchEnd)
	}
	p, err := store.GetPerson(context.Background(), 1, first)
	if err != nil || fmt.Sprint(p.Properties["x"]) != "2" {
		t.Fatalf("person once the lead landed: %v, %v; want x = 2", p, err)
	}
	store.release <- errors.New("killed after the lead")

	testenv.WaitCommitted(t, store.Store, cfg.Consumer, last, 3*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rebuilt := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, rebuilt, ack.Sequence)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store.Store); got != want {
		t.Fatalf("a rebuild differs from the run whose write died after the lead:\n%s", testenv.FirstDiff(got, want))
	}
}
