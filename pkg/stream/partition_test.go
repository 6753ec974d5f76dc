package stream_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// storedSubjects returns the subject of every message of the events
// stream, in order.
func storedSubjects(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Subject)
	}
	return out
}

// TestPartitionMappingMatchesServer: the server's partition token for a
// project is PartitionOf's, for commands and events alike, so a consumer
// can place messages stored before the transform in the same partition.
func TestPartitionMappingMatchesServer(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	const parts = 5
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for p := uint64(1); p <= 60; p++ {
		if _, err := stream.Publish(ctx, n.JS, p, "e"+strconv.FormatUint(p, 10), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.PublishCommand(ctx, n.JS, p, "c"+strconv.FormatUint(p, 10), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for i, subj := range storedSubjects(t, n.JS) {
		p := uint64(i/2 + 1)
		k := stream.PartitionOf(strconv.FormatUint(p, 10), parts)
		seen[k] = true
		kind := "events"
		if i%2 == 1 {
			kind = "commands"
		}
		if want := kind + "." + strconv.Itoa(k) + "." + strconv.FormatUint(p, 10); subj != want {
			t.Fatalf("stored %s, want %s", subj, want)
		}
		mine, project, command, err := stream.Route(subj, k, parts)
		if !mine || project != p || command != (kind == "commands") || err != nil {
			t.Fatalf("Route(%s, %d): %v %d %v %v", subj, k, mine, project, command, err)
		}
		if mine, _, _, _ := stream.Route(subj, (k+1)%parts, parts); mine {
			t.Fatalf("%s routed to partition %d too", subj, (k+1)%parts)
		}
	}
	if len(seen) != parts {
		t.Fatalf("60 projects fell in partitions %v only", seen)
	}
	if err := stream.CheckPartitions(ctx, n.JS, parts); err != nil {
		t.Fatal(err)
	}
	if err := stream.CheckPartitions(ctx, n.JS, 1); err == nil {
		t.Fatal("a binary configured for one partition accepted a partitioned stream")
	}
}

// TestPartitionUpgradeInPlace: an ingester configured for 3 partitions
// partitions an existing stream, whose stored messages keep their
// subjects (and are routed by project), while a count that differs from
// an already partitioned stream is refused.
func TestPartitionUpgradeInPlace(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Publish(ctx, n.JS, 7, "before", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Publish(ctx, n.JS, 7, "after", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	k := stream.PartitionOf("7", 3)
	got := storedSubjects(t, n.JS)
	if want := []string{"events.7", "events." + strconv.Itoa(k) + ".7"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stored %v, want %v", got, want)
	}
	for _, subj := range got {
		for part := range 3 {
			mine, project, _, err := stream.Route(subj, part, 3)
			if mine != (part == k) || mine && (project != 7 || err != nil) {
				t.Fatalf("Route(%s, %d) = %v %d %v", subj, part, mine, project, err)
			}
		}
	}
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 4}); err == nil {
		t.Fatal("a stream partitioned 3 ways accepted 4")
	}
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: 1}); err == nil {
		t.Fatal("a stream partitioned 3 ways accepted one partition")
	}
	// A publisher (no count) binds it as it is.
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
}

// TestRouteRefusesForeignPartitionToken: a message published straight on
// a partitioned subject of the wrong partition is a dead letter of the
// partition it names, never folded (its project would span two
// ingesters); a bad legacy subject goes to exactly one partition.
func TestRouteRefusesForeignPartitionToken(t *testing.T) {
	k := stream.PartitionOf("5", 3)
	wrong := strconv.Itoa((k + 1) % 3)
	mine, _, _, err := stream.Route("events."+wrong+".5", (k+1)%3, 3)
	if !mine || err == nil {
		t.Fatalf("foreign token: mine %v, err %v", mine, err)
	}
	if got := stream.DeadLetterSubject("events." + wrong + ".5"); got != "dlq.events.5" {
		t.Fatalf("dead letter subject %s", got)
	}
	owners := 0
	for part := range 3 {
		mine, _, _, err := stream.Route("events.x", part, 3)
		if mine {
			owners++
			if err == nil {
				t.Fatal("events.x parsed")
			}
		}
	}
	if owners != 1 || stream.DeadLetterSubject("events.x") != "dlq.events.invalid" {
		t.Fatalf("events.x owned by %d partitions", owners)
	}
}

// TestPartitionFilters: a partition's consumer with the one-subject filter
// gets its own events and commands, no other partition's; LegacyFrom
// says when a consumer starting at a sequence must also read the
// two-token messages stored before the transform, and the four-subject
// filter then gets those too (Route picks the partition's own).
func TestPartitionFilters(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	s, err := n.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	if legacy, err := stream.LegacyFrom(ctx, s, 1); err != nil || legacy {
		t.Fatalf("empty stream: legacy %v, %v", legacy, err)
	}
	const parts = 3
	var lastLegacy uint64
	for p := uint64(1); p <= 6; p++ {
		ack, err := stream.Publish(ctx, n.JS, p, "before-"+strconv.FormatUint(p, 10), []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		lastLegacy = ack.Sequence
	}
	if err := stream.Ensure(ctx, n.JS, stream.Config{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	for p := uint64(1); p <= 6; p++ {
		if _, err := stream.Publish(ctx, n.JS, p, "after-"+strconv.FormatUint(p, 10), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.PublishCommand(ctx, n.JS, p, "cmd-"+strconv.FormatUint(p, 10), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	for from, want := range map[uint64]bool{1: true, lastLegacy: true, lastLegacy + 1: false} {
		if legacy, err := stream.LegacyFrom(ctx, s, from); err != nil || legacy != want {
			t.Fatalf("LegacyFrom(%d) = %v, %v; want %v", from, legacy, err, want)
		}
	}
	all := storedSubjects(t, n.JS)
	for k := range parts {
		for _, legacy := range []bool{false, true} {
			cons, err := n.JS.CreateConsumer(ctx, stream.Events, jetstream.ConsumerConfig{
				AckPolicy: jetstream.AckNonePolicy, FilterSubjects: stream.PartitionFilter(k, parts, legacy)})
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, subj := range all {
				toks := strings.Split(subj, ".")
				if len(toks) == 3 && toks[1] == strconv.Itoa(k) || legacy && len(toks) == 2 {
					want = append(want, subj)
				}
			}
			batch, err := cons.FetchNoWait(len(all))
			if err != nil {
				t.Fatal(err)
			}
			for m := range batch.Messages() {
				got = append(got, m.Subject())
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("partition %d, legacy %v: got %v, want %v", k, legacy, got, want)
			}
		}
	}
	if f := stream.PartitionFilter(0, 1, true); f != nil {
		t.Fatalf("one partition filters on %v, want the whole stream", f)
	}
}
