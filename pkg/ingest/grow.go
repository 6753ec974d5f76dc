package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/shutdown"
)

// Batches that grow with the backlog (docs/architecture.md, "Batches that
// grow with the backlog"). A person is written once per batch that changes
// it, so with BatchSize batches a person touched over the whole stream is
// written about once per touch (G3). While the consumer reports messages
// behind the batch, a full batch does not end: it is folded in chunks of
// BatchSize, each chunk's events rows are written as it is folded (events
// rows may precede their commit marker: that is the crash protocol's stage
// one, covered by the intents and the lookup of dedupe.go), and the
// persons, distinct ids, marker and ack wait for the batch's end: at the
// stream's tail, after GrowFor, at GrowPersons dirty persons or
// MaxCachedPersons cached ones (memory, and the length of the commit), or
// when the write lane has a command waiting (G6).
//
// The messages of a folded chunk are not kept (a million of them would
// not fit the memory bound), so a failure inside a grown batch is not
// retried from messages in hand: the fold starts over from the commit
// point and the consumer is recreated from it (regrowError), as after a
// gap; JetStream delivers the range again, in order.

// regrowError: a grown batch failed; nothing of it is committed, the fold
// was reset to the commit point, and the consumer must deliver again from
// there.
type regrowError struct{ err error }

func (e *regrowError) Error() string {
	return "grown batch failed; folding again from the commit point: " + e.err.Error()
}

func (e *regrowError) Unwrap() error { return e.err }

// growing reports whether a batch just collected is to grow: growth is
// on and the stream holds more behind it. Full or not: a batch that
// BatchWait ended with a backlog behind it (the client's pull buffer
// filling at a start) grows as well.
func (i *Ingester) growing(batch []*pending) bool {
	return i.cfg.GrowFor > 0 && len(batch) > 0 && !batch[len(batch)-1].last
}

// grownEnds reports why a grown batch folded up to end must end now ("":
// it grows on).
func (i *Ingester) grownEnds(end *pending, started time.Time) string {
	persons, _ := i.folder.Cached()
	switch {
	case end.last:
		return "tail"
	case time.Since(started) >= i.cfg.GrowFor:
		return "time"
	case i.cfg.GrowPersons > 0 && i.folder.Dirty() >= i.cfg.GrowPersons:
		return "dirty"
	case i.cfg.MaxCachedPersons > 0 && persons >= i.cfg.MaxCachedPersons:
		return "cached"
	case i.laneWaiting(end.seq):
		return "lane"
	}
	return ""
}

// grow folds a full batch with a backlog behind it chunk by chunk until it
// ends (grownEnds), then commits it. It returns the collection's error
// (a gap, a stop) as run handles collect's, and a regrowError when the
// batch failed.
func (i *Ingester) grow(ctx context.Context, iter jetstream.MessagesContext, batch []*pending) (collected, err error) {
	gctx, stop := shutdown.Grace(ctx, i.cfg.ShutdownGrace)
	defer stop()
	started := time.Now()
	var c chunk
	messages := 0
	for {
		next, err := i.foldChunk(gctx, batch)
		if err != nil {
			return collected, i.regrow(ctx, err, batch[len(batch)-1].seq)
		}
		c.add(next)
		messages += len(batch)
		end := batch[len(batch)-1]
		if err := i.deadLetter(gctx, batch); err != nil {
			return collected, i.regrow(ctx, err, batch[len(batch)-1].seq)
		}
		why := i.grownEnds(end, started)
		if collected != nil {
			why = "collection ended"
		}
		if through := i.folder.CommitThrough(); through > end.seq {
			// Rows of a crashed batch reach beyond: the batch must too
			// (refold.go), whatever else says.
			if collected != nil {
				return collected, i.regrow(ctx, fmt.Errorf("collection ended at seq %d, inside a crashed batch's range (through %d)", end.seq, through), end.seq)
			}
			why = ""
		}
		if why != "" {
			if err := i.commit(gctx, c, end, messages, started); err != nil {
				return collected, i.regrow(ctx, err, batch[len(batch)-1].seq)
			}
			i.metrics.grownEnds.WithLabelValues(why).Inc()
			i.regrows = 0
			return collected, nil
		}
		if err := i.writeAhead(gctx, &c); err != nil {
			return collected, i.regrow(ctx, err, batch[len(batch)-1].seq)
		}
		// The chunk's messages are dropped here; only the last is
		// kept, to acknowledge the batch (AckAll).
		batch, collected = i.collect(ctx, iter, nil, 0)
		if len(batch) == 0 {
			// Nothing more came (a stop, a gap at once, a timeout):
			// commit what is folded.
			if err := i.commit(gctx, c, end, messages, started); err != nil {
				return collected, i.regrow(ctx, err, end.seq)
			}
			i.metrics.grownEnds.WithLabelValues("idle").Inc()
			i.regrows = 0
			return collected, nil
		}
	}
}

// writeAhead writes a grown batch's events rows folded so far, before its
// commit marker.
func (i *Ingester) writeAhead(ctx context.Context, c *chunk) error {
	if len(c.events) == 0 {
		return nil
	}
	wctx, release, err := i.lease.fence(ctx)
	if err != nil {
		return err
	}
	defer release()
	write, err := i.unwritten(wctx, c.events)
	if err != nil {
		return err
	}
	if err := i.store.WriteRows(wctx, write, fold.Batch{}); err != nil {
		return err
	}
	c.written += len(c.events)
	c.events = c.events[:0:0]
	return nil
}

// regrow undoes a failed grown batch: the fold starts over from the commit
// point (and learns how far the failed writes may reach), after a backoff.
func (i *Ingester) regrow(ctx context.Context, err error, through uint64) error {
	if errors.Is(err, errLeaseLost) {
		return err
	}
	i.refoldThrough = max(i.refoldThrough, through)
	i.metrics.failures.Inc()
	i.log.Error("grown batch failed; folding again from the commit point", "err", err, "committed_seq", i.folder.Committed)
	select {
	case <-ctx.Done():
	case <-time.After(backoff(i.regrows)):
	}
	i.regrows++
	if rerr := i.recover(ctx); rerr != nil {
		return rerr
	}
	if rerr := i.reloadLane(ctx); rerr != nil {
		return rerr
	}
	return &regrowError{err: err}
}
