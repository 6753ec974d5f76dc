package progress

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
)

// Partitions follows the watermark of every partition of the stream. A
// write is visible once the ingester of its project's partition has
// committed its sequence; the other partitions' watermarks say nothing
// about it (their ingesters never see it).
type Partitions struct {
	n        int
	watchers []*Watcher
	// lanes follow the partitions' write lane watermarks (LaneKey).
	lanes []*Watcher
}

// LaneKey is the key of a consumer's write lane watermark: the last
// command its lane folded ahead of the capture backlog and committed.
// Commands are taken in sequence order, so every command up to it is
// visible unless the lane left it to the main consumer (folded in place,
// visible once the consumer's own watermark passes it).
func LaneKey(consumer string) string { return consumer + ".lane" }

// WatchPartitions follows the watermarks of the n partitions' consumers
// named from base (stream.ConsumerName).
func WatchPartitions(ctx context.Context, kv jetstream.KeyValue, base string, n int) (*Partitions, error) {
	p := &Partitions{n: max(n, 1)}
	for k := range p.n {
		w, err := Watch(ctx, kv, stream.ConsumerName(base, k, p.n))
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.watchers = append(p.watchers, w)
		l, err := Watch(ctx, kv, LaneKey(stream.ConsumerName(base, k, p.n)))
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.lanes = append(p.lanes, l)
	}
	return p, nil
}

// Of is the watcher of a project's partition.
func (p *Partitions) Of(projectID uint64) *Watcher {
	return p.watchers[stream.PartitionOf(strconv.FormatUint(projectID, 10), p.n)]
}

// Marks are the project's partition's watermark and its write lane's as
// seen now. Both only grow; a read keyed by them (the persons list's
// kept pages) holds every command a Wait returned for before they were
// read.
func (p *Partitions) Marks(projectID uint64) (committed, lane uint64) {
	k := stream.PartitionOf(strconv.FormatUint(projectID, 10), p.n)
	return p.watchers[k].Seq(), p.lanes[k].Seq()
}

// Wait returns when the project's partition has committed seq, or
// ErrTimeout after limit.
//
// A command seq is visible once the partition's watermark or its write
// lane's has reached it. The lane's alone is not enough for every
// command: one it left to the main consumer is below the lane watermark
// only if a later command went by the lane, which the lane never does
// (it takes a prefix of the commands: ingest.takeLane).
func (p *Partitions) Wait(ctx context.Context, projectID, seq uint64, limit time.Duration) error {
	k := stream.PartitionOf(strconv.FormatUint(projectID, 10), p.n)
	return waitEither(ctx, p.watchers[k], p.lanes[k], seq, limit)
}

// waitEither returns when a or b reaches seq, or ErrTimeout after limit.
func waitEither(ctx context.Context, a, b *Watcher, seq uint64, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		da, ca := a.reached(seq)
		db, cb := b.reached(seq)
		if da || db {
			return nil
		}
		select {
		case <-ca:
		case <-cb:
		case <-timer.C:
			return ErrTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop ends the watches.
func (p *Partitions) Stop() {
	for _, w := range append(p.watchers, p.lanes...) {
		w.Stop()
	}
}
