package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// publishBacklog publishes msgs without waiting for each ack (a capture
// burst), over projects 1..projects (3: as PublishWorkload does), and
// returns the last stream sequence.
func publishBacklog(t *testing.T, js jetstream.JetStream, first, projects int, msgs []testenv.Message) uint64 {
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	acks := make([]jetstream.PubAckFuture, 0, 1000)
	var last uint64
	for j, m := range msgs {
		i := first + j
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(i))).String()
		ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		subject := stream.Subject(uint64(1 + i%projects))
		if m.Command {
			subject = stream.CommandSubject(uint64(1 + i%projects))
		}
		msg := nats.NewMsg(subject)
		msg.Data = []byte(fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, ts.Format(time.RFC3339), m.Body[1:]))
		msg.Header.Set(jetstream.MsgIDHeader, id)
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, f)
		if len(acks) == 1000 || j == len(msgs)-1 {
			// The client holds at most 4,000 unacknowledged.
			for _, f := range acks {
				select {
				case ack := <-f.Ok():
					last = max(last, ack.Sequence)
				case err := <-f.Err():
					t.Fatal(err)
				}
			}
			acks = acks[:0]
		}
	}
	return last
}

func laneConfig(consumer string, on bool) Config {
	cfg := testConfig(consumer)
	cfg.WriteLane = on
	cfg.BatchSize = 200
	return cfg
}

// TestWriteLanePassesTheBacklog: a property write made while the
// ingester works through a capture backlog is visible (the lane's
// watermark, and the person read back) before the backlog is folded; it
// takes effect after the events folded then and before the rest, and a
// rebuild of the log into empty tables (another consumer, the lane off)
// gives the same tables, following the record.
func TestWriteLanePassesTheBacklog(t *testing.T) {
	n := testenv.StartNATS(t, "")
	// Project 1 is every third message (PublishWorkload's projects).
	first := testenv.PublishWorkload(t, n.JS, 0, []testenv.Message{{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}})
	store := testenv.ClickHouse(t)
	cfg := laneConfig("laned", true)
	cancel, done := startIngester(t, cfg, n.JS, store)
	defer cancel()
	testenv.WaitCommitted(t, store, cfg.Consumer, first, time.Minute)

	backlog := make([]testenv.Message, 15_000)
	for k := range backlog {
		backlog[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"b%d","$set":{"n":%d}}`, k%5000, k)}
	}
	backlog[2999] = testenv.Message{Body: `{"event":"e","distinct_id":"a","$set":{"x":3}}`} // project 1, queued before the write
	last := publishBacklog(t, n.JS, 1, 3, backlog)
	ack, err := testenv.Publish(context.Background(), n.JS, 1, testenv.Message{
		Body:    `{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		Command: true}, uuid.NewString(), time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	watch := watchProgress(t, n.JS, cfg.Consumer)
	start := time.Now()
	if err := watch.Wait(context.Background(), 1, ack.Sequence, time.Minute); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	committed, err := store.LastCommitted(context.Background(), cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	if committed >= last {
		t.Fatalf("the write was visible only after the backlog (committed %d of %d, after %v)", committed, last, took)
	}
	p, err := store.GetPerson(context.Background(), 1, first)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(p.Properties["x"]) != "2" {
		t.Fatalf("person after the lane's write: x = %v, want 2", p.Properties["x"])
	}
	t.Logf("visible after %v with %d of %d backlog sequences committed", took, committed, last)
	testenv.WaitCommitted(t, store, cfg.Consumer, ack.Sequence, 3*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p, err = store.GetPerson(context.Background(), 1, first); err != nil || fmt.Sprint(p.Properties["x"]) != "3" {
		t.Fatalf("person after the backlog: %v, %v; want x = 3 (the event queued before the write folded after it)", p, err)
	}
	rebuilt := testenv.ClickHouse(t)
	runUntil(t, laneConfig("rebuild", false), n.JS, rebuilt, ack.Sequence)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store); got != want {
		t.Fatalf("a rebuild differs from the run that took the write ahead:\n%s", testenv.FirstDiff(got, want))
	}
}

// TestWriteLaneOffKeepsTheLogOrder: with the lane off the write waits for
// the backlog before it and no record is made.
func TestWriteLaneOffKeepsTheLogOrder(t *testing.T) {
	n := testenv.StartNATS(t, "")
	first := testenv.PublishWorkload(t, n.JS, 0, []testenv.Message{{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}})
	backlog := make([]testenv.Message, 3000)
	for k := range backlog {
		backlog[k] = testenv.Message{Body: fmt.Sprintf(`{"event":"e","distinct_id":"b%d"}`, k)}
	}
	publishBacklog(t, n.JS, 1, 3, backlog)
	ack, err := testenv.Publish(context.Background(), n.JS, 1, testenv.Message{
		Body:    `{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		Command: true}, uuid.NewString(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	runUntil(t, laneConfig("plain", false), n.JS, store, ack.Sequence)
	if _, err := n.JS.Stream(context.Background(), LaneStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("lane off: the record stream exists (%v)", err)
	}
	p, err := store.GetPerson(context.Background(), 1, first)
	if err != nil || fmt.Sprint(p.Properties["x"]) != "2" {
		t.Fatalf("lane off: %v %v, want x = 2", p, err)
	}
}

// TestWriteLaneCrashesAndRebuilds: a workload with the API's commands
// published as a burst while a lane ingester runs, which dies after the
// lane recorded commands, before (or after) a batch's rows, and starts
// again; its tables equal a rebuild's (lane off, another consumer) that
// follows the records, and events hold one row per message.
func TestWriteLaneCrashesAndRebuilds(t *testing.T) {
	for _, c := range []struct {
		seed int64
		rows bool
	}{{1, false}, {2, true}, {3, true}} {
		n := testenv.StartNATS(t, "")
		store := testenv.ClickHouse(t)
		cfg := laneConfig("laned", true)
		cfg.BatchSize = 16
		last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(c.seed, 60, 15))
		runUntil(t, cfg, n.JS, store, last)
		dying := newDyingStore(store, 3, c.rows)
		cancel, done := startIngester(t, cfg, n.JS, dying)
		last = publishBacklog(t, n.JS, 60, 3, testenv.Workload(c.seed+100, 400, 15))
		select {
		case <-dying.dead:
		case <-time.After(time.Minute):
			t.Fatal("store did not die")
		}
		cancel()
		<-done
		runUntil(t, cfg, n.JS, store, last)
		records := laneRecords(t, n.JS)
		if records == 0 {
			t.Fatalf("seed %d: the lane took no command", c.seed)
		}
		ref := testenv.ClickHouse(t)
		runUntil(t, laneConfig("rebuild", false), n.JS, ref, last)
		if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
			t.Fatalf("seed %d (rows landed %v, %d records): the crashed lane run differs from a rebuild:\n%s", c.seed, c.rows, records, testenv.FirstDiff(got, want))
		}
		wantOneRowPerMessage(t, store, ref)
		t.Logf("seed %d: %d commands went by the lane", c.seed, records)
	}
}

func laneRecords(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), LaneStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestWriteLanePartitions: three partitions, each with its lane, record
// on their own subjects, each only commands of its own projects, and a
// rebuild by three ingesters with the lane off equals the run.
func TestWriteLanePartitions(t *testing.T) {
	const parts = 3
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	first := publishSpread(t, n.JS, 0, testenv.Workload(5, 80, 12), parts)
	var stops []func()
	for k := range parts {
		cfg := partitioned("laned", k, parts)
		cfg.WriteLane, cfg.BatchSize = true, 16
		cancel, done := startIngester(t, cfg, n.JS, store)
		stops = append(stops, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("partition %d: %v", k, err)
			}
		})
	}
	for k := range parts {
		testenv.WaitCommitted(t, store, stream.ConsumerName("laned", k, parts), first[k], 3*time.Minute)
	}
	last := publishBacklog(t, n.JS, 80, spreadProjects, testenv.Workload(6, 600, 12))
	for k := range parts {
		testenv.WaitCommitted(t, store, stream.ConsumerName("laned", k, parts), lastOfPartition(t, n.JS, k, parts, last), 3*time.Minute)
	}
	for _, stop := range stops {
		stop()
	}
	s, err := n.JS.Stream(context.Background(), LaneStream)
	if err != nil {
		t.Fatal(err)
	}
	events, err := n.JS.Stream(context.Background(), stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(LanePrefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) < 2 {
		t.Fatalf("records on %v; want a subject per partition that took commands (at least two)", info.State.Subjects)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		rec, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		var r laneRecord
		if err := json.Unmarshal(rec.Data, &r); err != nil {
			t.Fatal(err)
		}
		cmd, err := events.GetMsg(context.Background(), r.Seq)
		if err != nil {
			t.Fatal(err)
		}
		k, err := strconv.Atoi(rec.Subject[len(LanePrefix):])
		if err != nil {
			t.Fatal(err)
		}
		if mine, _, command, _ := stream.Route(cmd.Subject, k, parts); !mine || !command {
			t.Fatalf("record of %d (%s) on %s: not a command of that partition", r.Seq, cmd.Subject, rec.Subject)
		}
	}
	rebuilt := testenv.ClickHouse(t)
	ends := make([]uint64, parts)
	for k := range parts {
		ends[k] = lastOfPartition(t, n.JS, k, parts, last)
	}
	runPartitions(t, n.JS, rebuilt, "rebuild", parts, ends)
	if got, want := testenv.Snapshot(t, rebuilt), testenv.Snapshot(t, store); got != want {
		t.Fatalf("a rebuild of 3 partitions differs from the laned run (%v records):\n%s", info.State.Subjects, testenv.FirstDiff(got, want))
	}
}

// lastOfPartition is the last stream sequence at or below last of a
// project in partition k of n.
func lastOfPartition(t *testing.T, js jetstream.JetStream, k, n int, last uint64) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	for seq := last; seq > 0; seq-- {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if mine, _, _, _ := stream.Route(m.Subject, k, n); mine {
			return seq
		}
	}
	return 0
}
