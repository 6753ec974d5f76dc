package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/shutdown"
)

// Batches that grow with the backlog (docs/architecture.md, "Batches that
// grow with the backlog"). A person is written once per batch that changes
// it, so with BatchSize batches a person touched over the whole stream is
// written about once per touch. While the consumer reports messages
// behind the batch, a full batch does not end: it is folded in chunks of
// BatchSize, each chunk's events rows are written as it is folded (events
// rows may precede their commit marker: that is the crash protocol's stage
// one, covered by the intents and the lookup of dedupe.go), and
// acknowledged; the persons, distinct ids and marker wait for the batch's
// end: at the stream's tail, after GrowFor, at GrowPersons dirty persons
// (dirtyBound) or MaxCachedPersons cached ones (memory, and the length of
// the commit), or at a write lane command, which cuts the chunk's fold
// where it arrives, so an API write does not wait for the whole batch.
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
	case i.dirtyBound() > 0 && i.folder.Dirty() >= i.dirtyBound():
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
// batch failed. A write lane command cuts a chunk's fold as it cuts a
// batch's (laneCut): what is folded is committed with the command after
// it, and rest, the chunk's messages after the cut (in hand, neither
// written nor acknowledged), goes on as a batch of its own.
func (i *Ingester) grow(ctx context.Context, iter jetstream.MessagesContext, batch []*pending) (rest []*pending, collected, err error) {
	gctx, stop := shutdown.Grace(ctx, i.cfg.ShutdownGrace)
	defer stop()
	started := time.Now()
	var c chunk
	messages := 0
	// One chunk's events are written while the next is collected and
	// folded (ahead); every other step waits for that write first, so
	// statements stay in the order recovery needs: nothing is committed,
	// refolded or written ahead again before it ended.
	var inFlight *ahead
	fail := func(err error, through uint64) error {
		_ = inFlight.wait()
		return i.regrow(ctx, err, through)
	}
	commit := func(end *pending) error {
		if err := inFlight.wait(); err != nil {
			return err
		}
		inFlight = nil
		return i.commit(gctx, c, end, messages, started)
	}
	for {
		next, err := i.foldUpTo(gctx, batch)
		if err != nil {
			return nil, collected, fail(err, batch[len(batch)-1].seq)
		}
		if next.cut != 0 {
			// laneCut checked that the cut is not inside a crashed
			// batch's range.
			batch, rest = splitAfter(batch, next.cut)
		}
		c.add(next)
		messages += len(batch)
		end := batch[len(batch)-1]
		if err := i.deadLetter(gctx, batch); err != nil {
			return nil, collected, fail(err, end.seq)
		}
		if next.cut != 0 {
			if err := commit(end); err != nil {
				return nil, collected, fail(err, end.seq)
			}
			i.metrics.grownEnds.WithLabelValues("lane").Inc()
			i.metrics.laneCuts.Inc()
			i.grown()
			return rest, collected, nil
		}
		why := i.grownEnds(end, started)
		if collected != nil {
			why = "collection ended"
		}
		if through := i.folder.CommitThrough(); through > end.seq {
			// Rows of a crashed batch reach beyond: the batch must too
			// (refold.go), whatever else says.
			if collected != nil {
				return nil, collected, fail(fmt.Errorf("collection ended at seq %d, inside a crashed batch's range (through %d)", end.seq, through), end.seq)
			}
			why = ""
		}
		if why != "" {
			if err := commit(end); err != nil {
				return nil, collected, fail(err, end.seq)
			}
			i.metrics.grownEnds.WithLabelValues(why).Inc()
			i.grown()
			return nil, collected, nil
		}
		if err := inFlight.wait(); err != nil {
			return nil, collected, fail(err, end.seq)
		}
		inFlight = i.writeAhead(gctx, &c)
		// The chunk's messages are dropped here; only the last is
		// kept, for the commit.
		batch, collected = i.collect(ctx, iter, nil, 0)
		if len(batch) == 0 {
			// Nothing more came (a stop, a gap at once, a timeout):
			// commit what is folded.
			if err := commit(end); err != nil {
				return nil, collected, fail(err, end.seq)
			}
			i.metrics.grownEnds.WithLabelValues("idle").Inc()
			i.grown()
			return nil, collected, nil
		}
	}
}

// ahead is a grown batch's chunk of events rows being written (writeAhead).
type ahead struct {
	done chan struct{}
	err  error
}

// wait returns once the write ended, with its error; a nil ahead is no
// write.
func (a *ahead) wait() error {
	if a == nil {
		return nil
	}
	<-a.done
	return a.err
}

// writeAhead starts writing a grown batch's events rows folded so far,
// before its commit marker, and takes them out of c. The write runs
// beside the next chunk's collection and fold (before, the fold waited for
// ClickHouse's insert of the views before, the cores half idle).
func (i *Ingester) writeAhead(ctx context.Context, c *chunk) *ahead {
	events := c.events
	c.written += len(events)
	c.events = nil
	a := &ahead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.err = i.writeEvents(ctx, events)
	}()
	return a
}

// writeEvents writes events rows above the commit point, under the
// lease's fence.
func (i *Ingester) writeEvents(ctx context.Context, events []eventstore.Row) error {
	if len(events) == 0 {
		return nil
	}
	wctx, release, err := i.lease.fence(ctx)
	if err != nil {
		return err
	}
	defer release()
	write, err := i.unwritten(wctx, events)
	if err != nil {
		return err
	}
	return i.store.WriteRows(wctx, write, fold.Batch{})
}

// regrow undoes a failed grown batch: the fold starts over from the commit
// point (and learns how far the failed writes may reach), after a backoff.
func (i *Ingester) regrow(ctx context.Context, err error, through uint64) error {
	if errors.Is(err, errLeaseLost) {
		return err
	}
	i.refoldThrough = max(i.refoldThrough, through)
	i.capGrowth(i.folder.Dirty())
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

// dirtyBound is how many changed persons a grown batch may hold before it
// ends: GrowPersons (0: no bound), or less after a grown batch failed. A
// grown batch's commit writes all its persons, and one too large for the
// server (its read timeout, its memory) would fail in the same place
// forever, each time folding again from the commit point: so a failure
// caps the next grown batches at half the failed one's changed persons,
// and the cap doubles after capKeep grown batches committed in a row
// (capped again if that was too much), until it is the configured bound.
func (i *Ingester) dirtyBound() int {
	b := i.cfg.GrowPersons
	if i.growCap > 0 && (b == 0 || i.growCap < b) {
		return i.growCap
	}
	return b
}

// capKeep is how many grown batches must commit in a row before a cap
// doubles.
const capKeep = 8

// grown records a committed grown batch.
func (i *Ingester) grown() {
	i.regrows = 0
	if i.growCap == 0 {
		return
	}
	if i.capKept++; i.capKept < capKeep {
		return
	}
	i.capKept = 0
	i.growCap *= 2
	if b := i.cfg.GrowPersons; b > 0 && i.growCap >= b || i.cfg.MaxCachedPersons > 0 && i.growCap >= i.cfg.MaxCachedPersons {
		i.growCap = 0
	}
}

// capGrowth lowers the grown batches' bound after one failed holding
// dirty changed persons (dirtyBound).
func (i *Ingester) capGrowth(dirty int) {
	switch {
	case dirty > 1:
		i.growCap = dirty / 2
	case i.growCap > 1:
		i.growCap /= 2
	default:
		i.growCap = 1
	}
	i.capKept = 0
}
