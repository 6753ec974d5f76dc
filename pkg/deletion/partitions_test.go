package deletion

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/stream"
)

// commitAs writes a commit marker of one consumer up to seq.
func commitAs(t *testing.T, f *fixture, consumer string, seq uint64) {
	t.Helper()
	ctx := context.Background()
	b, err := f.conn.PrepareBatch(ctx, "INSERT INTO ingest_batches (consumer, first_seq, last_seq, events, persons, distinct_ids, flushed_at)")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(consumer, uint64(1), seq, uint32(0), uint32(0), uint32(0), time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// TestWaitsForItsPartitionsCommit: with 3 partitions a request waits for
// the commit of its own project's partition only: another partition's
// later commit does not release it, an idle partition does not hold back
// the others, and the single consumer's commit (before the stream was
// partitioned) covers every partition.
func TestWaitsForItsPartitionsCommit(t *testing.T) {
	f := newFixture(t, nil, func(c *Config) { c.Partitions = 3 })
	// Projects 1 and 3 are in partitions 1 and 2 of 3.
	if stream.PartitionOf("1", 3) != 1 || stream.PartitionOf("3", 3) != 2 {
		t.Fatal("partition mapping changed; pick other projects")
	}
	insertEvents(t, f.conn, ev{1, 30, 5}, ev{3, 31, 6})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 30, RequestSeq: 40})
	request(t, f.runner, Request{ProjectID: 3, PersonID: 31, RequestSeq: 41})
	commitAs(t, f, "ingester", 20)
	commitAs(t, f, stream.ConsumerName("ingester", 2, 3), 100)
	if sum := f.runOnce(t); sum.Verified != 1 || sum.Waiting != 1 {
		t.Fatalf("partition 2 committed past its request, partition 1 not: %+v", sum)
	}
	if got := eventsOf(t, f.conn, 1, 30); len(got) != 1 {
		t.Fatalf("project 1's events deleted before its partition committed: %v", got)
	}
	commitAs(t, f, "ingester", 40)
	if sum := f.runOnce(t); sum.Verified != 1 {
		t.Fatalf("the single consumer's commit covers partition 1: %+v", sum)
	}
}
