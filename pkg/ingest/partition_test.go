package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// spreadProjects: projects 1..8 fall in all three of 3 partitions.
const spreadProjects = 8

// publishSpread publishes workload messages first..first+len-1 over
// projects 1..8 and returns the last stream sequence of each of parts
// partitions (index parts: of the whole stream).
func publishSpread(t *testing.T, js jetstream.JetStream, first int, msgs []testenv.Message, parts int) []uint64 {
	t.Helper()
	return publishSpreadRetrying(t, js, first, msgs, parts, 0)
}

// publishSpreadRetrying is publishSpread retrying each message for up to
// retry (testenv.PublishRetrying), through a cluster electing leaders.
func publishSpreadRetrying(t *testing.T, js jetstream.JetStream, first int, msgs []testenv.Message, parts int, retry time.Duration) []uint64 {
	t.Helper()
	last := make([]uint64, parts+1)
	for j, m := range msgs {
		i := first + j
		project := uint64(1 + i%spreadProjects)
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte("spread-"+strconv.Itoa(i))).String()
		ts := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		ack, err := testenv.PublishRetrying(context.Background(), retry, func(ctx context.Context) (*jetstream.PubAck, error) {
			return testenv.Publish(ctx, js, project, m, id, ts)
		})
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		last[stream.PartitionOf(strconv.FormatUint(project, 10), parts)] = ack.Sequence
		last[parts] = ack.Sequence
	}
	return last
}

// partitioned returns the configuration of partition k of n.
func partitioned(base string, k, n int) Config {
	cfg := testConfig(base)
	cfg.Partition, cfg.Streams.Partitions = k, n
	cfg.LeaseTTL = 2 * time.Second
	return cfg
}

// runPartitions runs one ingester per partition until each committed its
// partition's last message (of last), then stops them.
func runPartitions(t *testing.T, js jetstream.JetStream, store Store, base string, n int, last []uint64) {
	t.Helper()
	runPartitionsLane(t, js, store, base, n, last, true)
}

// runPartitionsLane is runPartitions with the write lane on or off.
func runPartitionsLane(t *testing.T, js jetstream.JetStream, store Store, base string, n int, last []uint64, lane bool) {
	t.Helper()
	var stops []func()
	for k := range n {
		cfg := partitioned(base, k, n)
		cfg.WriteLane = lane
		cancel, done := startIngester(t, cfg, js, store)
		stops = append(stops, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("partition %d: %v", k, err)
			}
		})
	}
	for k := range n {
		testenv.WaitCommitted(t, store.(*chstore.Store), stream.ConsumerName(base, k, n), last[k], 3*time.Minute)
	}
	for _, stop := range stops {
		stop()
	}
}

// reference folds msgs with one ingester on a stream of their own.
func reference(t *testing.T, msgs []testenv.Message) string {
	t.Helper()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	last := publishSpread(t, n.JS, 0, msgs, 1)
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("single"), n.JS, store, last[1])
	return testenv.Snapshot(t, store)
}

// TestPartitionsEqualOneIngester: three partitions, one ingester each, on
// one JetStream server and one ClickHouse, end with the same persons,
// distinct ids, events (every table the ingester writes) as one ingester
// folding the same messages; each partition publishes its own watermark.
func TestPartitionsEqualOneIngester(t *testing.T) {
	msgs := testenv.Workload(31, 6000, 250)
	want := reference(t, msgs)

	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	last := publishSpread(t, n.JS, 0, msgs, 3)
	store := testenv.ClickHouse(t)
	runPartitions(t, n.JS, store, "part", 3, last)
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("3 partitions differ from one ingester:\n%s", testenv.FirstDiff(got, want))
	}
	kv, err := progress.Open(context.Background(), n.JS)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		w, err := progress.Watch(context.Background(), kv, stream.ConsumerName("part", k, 3))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Wait(context.Background(), last[k], 5*time.Second); err != nil {
			t.Errorf("watermark of partition %d: %v (at %d, want %d)", k, err, w.Seq(), last[k])
		}
		w.Stop()
	}
}

// TestPartitionUpgradeInPlace: one ingester folds the first part of the
// log and stops; more messages arrive before the stream is partitioned
// (two-token subjects no ingester has seen); three partition ingesters
// then partition the stream, start from the single ingester's commit and
// fold the rest. The state equals one ingester's over the whole log, and
// a replay of the upgraded log into empty tables by three partitions
// (messages of both subject forms) too.
//
// The write lane is off in its runs: the reference folds the log in its
// order on a stream of its own, and restarted partition ingesters with
// the lane would fold commands of their backlog ahead (recorded, so the
// replay follows them; TestWriteLanePartitions checks that).
func TestPartitionUpgradeInPlace(t *testing.T) {
	msgs := testenv.Workload(37, 4500, 200)
	want := reference(t, msgs)

	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	first := publishSpread(t, n.JS, 0, msgs[:1500], 3)
	single := testConfig("ing")
	single.WriteLane = false
	runUntil(t, single, n.JS, store, first[3])
	middle := publishSpread(t, n.JS, 1500, msgs[1500:3000], 3)
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	last := publishSpread(t, n.JS, 3000, msgs[3000:], 3)
	for k := range 3 {
		last[k] = max(last[k], middle[k], first[k])
	}
	runPartitionsLane(t, n.JS, store, "ing", 3, last, false)
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("after the upgrade in place:\n%s", testenv.FirstDiff(got, want))
	}

	replay := testenv.ClickHouse(t)
	runPartitions(t, n.JS, replay, "replay", 3, last)
	if got := testenv.Snapshot(t, replay); got != want {
		t.Fatalf("replay of the upgraded log by 3 partitions:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestSecondIngesterOnAPartitionWaits: a second ingester started on a
// partition that runs leaves its consumer and ClickHouse alone (it waits
// for the lease), takes over when the first stops, and the end state is
// that of one uninterrupted ingester. The lane is off, as in
// TestPartitionUpgradeInPlace: the reference is the log's order.
func TestSecondIngesterOnAPartitionWaits(t *testing.T) {
	msgs := testenv.Workload(41, 3000, 150)
	want := reference(t, msgs)
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	last := publishSpread(t, n.JS, 0, msgs[:1000], 3)
	runPartitionsLane(t, n.JS, store, "lease", 3, last, false)

	// Partition 2 runs; a second one of it starts by mistake.
	const k = 2
	name := stream.ConsumerName("lease", k, 3)
	// The consumer of the run above stays; only the new one counts.
	if err := n.JS.DeleteConsumer(ctx, stream.Events, name); err != nil {
		t.Fatal(err)
	}
	cfg := partitioned("lease", k, 3)
	cfg.WriteLane = false
	cancel1, done1 := startIngester(t, cfg, n.JS, store)
	testenv.WaitFor(t, 10*time.Second, "first ingester's consumer", func() (bool, error) {
		_, err := n.JS.Consumer(ctx, stream.Events, name)
		return err == nil, err
	})
	c, err := n.JS.Consumer(ctx, stream.Events, name)
	if err != nil {
		t.Fatal(err)
	}
	created := c.CachedInfo().Created
	cancel2, done2 := startIngester(t, cfg, n.JS, store)
	defer cancel2()
	more := publishSpread(t, n.JS, 1000, msgs[1000:2000], 3)
	testenv.WaitCommitted(t, store, name, more[k], time.Minute)
	time.Sleep(500 * time.Millisecond)
	if c, err = n.JS.Consumer(ctx, stream.Events, name); err != nil || !c.CachedInfo().Created.Equal(created) {
		t.Fatalf("the second ingester touched the running one's consumer: %v", err)
	}
	select {
	case err := <-done2:
		t.Fatalf("second ingester ended: %v", err)
	default:
	}

	// The first stops: the second takes over and folds the rest, with
	// the other partitions.
	cancel1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	rest := publishSpread(t, n.JS, 2000, msgs[2000:], 3)
	testenv.WaitCommitted(t, store, name, rest[k], time.Minute)
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	runPartitionsLane(t, n.JS, store, "lease", 3, rest, false)
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("after the takeover:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestLostLeaseStandsBy: an ingester whose lease another took stops
// writing at once, leaves its successor's key alone, and takes the lease
// again once it is free (a NATS restart longer than the TTL loses the
// lease with nobody else around), folding on from the last commit.
func TestLostLeaseStandsBy(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	msgs := testenv.Workload(43, 400, 50)
	last := publishSpread(t, n.JS, 0, msgs, 3)
	const k = 1
	name := stream.ConsumerName("stolen", k, 3)
	_, done := startIngester(t, partitioned("stolen", k, 3), n.JS, store)
	testenv.WaitCommitted(t, store, name, last[k], time.Minute)
	kv, err := n.JS.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	// The usurper holds the key (renewing it, as a live holder does).
	// Within half the TTL of its last renewal before that, the first
	// ingester writes nothing more (the fence), whether or not it has
	// noticed yet.
	if _, err := kv.Put(ctx, name, []byte(`{"host":"usurper"}`)); err != nil {
		t.Fatal(err)
	}
	stopUsurper := make(chan struct{})
	usurped := make(chan struct{})
	go func() {
		defer close(usurped)
		for {
			select {
			case <-stopUsurper:
				return
			case <-time.After(300 * time.Millisecond):
				_, _ = kv.Put(ctx, name, []byte(`{"host":"usurper"}`))
			}
		}
	}()
	time.Sleep(time.Second)
	committed, err := store.LastCommitted(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	more := publishSpread(t, n.JS, 400, testenv.Workload(44, 200, 50), 3)
	time.Sleep(2 * time.Second)
	if after, err := store.LastCommitted(ctx, name); err != nil || after != committed || more[k] <= committed {
		t.Fatalf("commit moved from %d to %d after the lease was lost (%v)", committed, after, err)
	}
	if e, err := kv.Get(ctx, name); err != nil || string(e.Value()) != `{"host":"usurper"}` {
		t.Fatalf("the holder that lost its lease removed its successor's: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended with %v; want it to wait for the lease", err)
	default:
	}
	close(stopUsurper)
	<-usurped
	// The usurper stops: its key goes, and the first ingester folds on.
	if err := kv.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	testenv.WaitCommitted(t, store, name, more[k], time.Minute)
}

// TestLeaseFence: writes are allowed only within half the TTL of the last
// renewal, and end by then.
func TestLeaseFence(t *testing.T) {
	l := &lease{ttl: 10 * time.Second, renewed: time.Now().Add(-6 * time.Second)}
	if _, _, err := l.fence(context.Background()); err != errLeaseLapsed {
		t.Fatalf("6s after a renewal with a 10s TTL: %v", err)
	}
	l.renewed = time.Now().Add(-2 * time.Second)
	ctx, cancel, err := l.fence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(l.renewed.Add(5*time.Second)) {
		t.Fatalf("write deadline %v, want %v", d, l.renewed.Add(5*time.Second))
	}
	l.lost = true
	if _, _, err := l.fence(context.Background()); err != errLeaseLost {
		t.Fatal(fmt.Sprint("lost lease: ", err))
	}
}

// TestRetakenLeaseAfterAnotherFoldedExits: an ingester that takes its lost
// lease again after another ingester committed batches of its consumer
// exits (errTakenOver) rather than fold on with what it remembers of the
// log (the transform hook's records), for a restart to read it again.
func TestRetakenLeaseAfterAnotherFoldedExits(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	last := publishSpread(t, n.JS, 0, testenv.Workload(45, 300, 40), 3)
	const k = 2
	name := stream.ConsumerName("taken", k, 3)
	_, done := startIngester(t, partitioned("taken", k, 3), n.JS, store)
	testenv.WaitCommitted(t, store, name, last[k], time.Minute)
	kv, err := n.JS.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, name, []byte(`{"host":"successor"}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // past the fence: the first one writes no more
	committed, err := store.LastCommitted(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The successor commits a batch of the consumer, then stops.
	if err := store.WriteBatch(ctx, nil, fold.Batch{}, chstore.BatchMarker{Consumer: name, FirstSeq: committed + 1, LastSeq: committed + 9}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errTakenOver) {
			t.Fatalf("Run ended with %v, want errTakenOver", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ingester folded on after another one had committed its consumer's batches")
	}
}

// TestLeaseFenceSlides: renewals made while a batch is written move its
// fence on, so writes longer than half a TTL finish while the lease
// holds; once renewals stop, the writes are cancelled half a TTL after
// the last one, and by then too when the lease is lost (the run's own
// context, the fence's parent, ends at once then: lease.keep).
func TestLeaseFenceSlides(t *testing.T) {
	// Renewals every ttl/5 against a fence at ttl/2: the margin (3/10 of
	// the TTL) must outlast a sleep's overshoot on a loaded CI machine,
	// which 120 ms at a TTL of 400 ms did not.
	const ttl = 2 * time.Second
	l := &lease{ttl: ttl, renewed: time.Now()}
	ctx, cancel, err := l.fence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	first, _ := ctx.Deadline()
	renew := func() {
		l.mu.Lock()
		l.renewed = time.Now()
		l.mu.Unlock()
	}
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); {
		time.Sleep(ttl / 5)
		renew()
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("writes cancelled while the lease was renewed: %v", context.Cause(ctx))
	}
	if d, _ := ctx.Deadline(); !d.After(first.Add(ttl)) {
		t.Fatalf("deadline %v did not move on from %v with the renewals", d, first)
	}
	last := time.Now()
	renew()
	select {
	case <-ctx.Done():
	case <-time.After(5 * ttl):
		t.Fatal("writes not cancelled after the renewals stopped")
	}
	if waited := time.Since(last); waited < ttl/2 {
		t.Fatalf("cancelled %v after the last renewal, before half the TTL", waited)
	}
	if !errors.Is(context.Cause(ctx), errLeaseLapsed) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}

	l.renewed = time.Now()
	ctx, cancel2, err := l.fence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(5 * ttl):
		t.Fatal("writes not cancelled when the lease was lost")
	}
	if !errors.Is(context.Cause(ctx), errLeaseLost) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

// TestLeaseRenewalThatLanded: a renewal that timed out on the client but
// reached the server leaves the key at a revision the holder did not
// see. The next renewal is refused for its revision, finds its own value
// and holds on; a key holding anyone else's value is still a lost lease.
func TestLeaseRenewalThatLanded(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	const ttl = 2 * time.Second
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l, err := acquireLease(ctx, n.JS, "landed", ttl, 1, testenv.FailureLog(t), cancel)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	// The renewal the client gave up on, as the server stored it.
	rev, err := l.kv.Put(ctx, "landed", l.val)
	if err != nil {
		t.Fatal(err)
	}
	landed := time.Now()
	time.Sleep(3 * ttl / 5)
	if err := context.Cause(runCtx); err != nil {
		t.Fatalf("lease given up after its own renewal landed: %v", err)
	}
	// Renewed since, from the revision it adopted.
	lost, until := l.bound()
	l.mu.Lock()
	held := l.rev
	l.mu.Unlock()
	if lost || held <= rev || !until.After(landed.Add(ttl/2)) {
		t.Fatalf("lost %v; holding revision %d (landed %d); writes allowed until %v, landed at %v",
			lost, held, rev, until, landed)
	}
	// Another value at the key: lost, as before.
	if _, err := l.kv.Put(ctx, "landed", []byte(`{"host":"usurper"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-runCtx.Done():
	case <-time.After(ttl):
		t.Fatal("lease kept after another value took the key")
	}
	if !errors.Is(context.Cause(runCtx), errLeaseLost) {
		t.Fatalf("cause %v, want errLeaseLost", context.Cause(runCtx))
	}
}
