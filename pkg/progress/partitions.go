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
}

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
	}
	return p, nil
}

// Of is the watcher of a project's partition.
func (p *Partitions) Of(projectID uint64) *Watcher {
	return p.watchers[stream.PartitionOf(strconv.FormatUint(projectID, 10), p.n)]
}

// Wait returns when the project's partition has committed seq, or
// ErrTimeout after limit.
func (p *Partitions) Wait(ctx context.Context, projectID, seq uint64, limit time.Duration) error {
	return p.Of(projectID).Wait(ctx, seq, limit)
}

// Stop ends the watches.
func (p *Partitions) Stop() {
	for _, w := range p.watchers {
		w.Stop()
	}
}
