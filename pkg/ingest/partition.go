package ingest

import (
	"context"
	"errors"
)

// Partitions (docs/operations.md, "More than one ingester"): each
// ingester folds one partition of the events stream through its own
// durable consumer, named stream.ConsumerName(Consumer, Partition, n),
// with its own commit markers, intents, lease and watermark under that
// name. Every message of a project is in one partition, so the fold of a
// partition only ever reads and writes its own projects' rows, and the
// crash repair of one partition (rows above its commit, fold.Folder)
// never sees another's.

// inherited is the commit a partition starts from when it has none of
// its own: the single consumer's it was split from (an upgrade in place
// from one partition, docs/operations.md). That consumer folded every
// project through its commit, so every partition may start after it. Its
// intents extend this one's: rows of a batch it left uncommitted may be
// in events, and the first batches look them up (dedupe.go). Its own
// intents stay its own, so a partition writes its own from its first
// batch.
func (i *Ingester) inherited(ctx context.Context) (uint64, error) {
	if i.inherit == "" {
		return 0, nil
	}
	seq, err := i.store.LastCommitted(ctx, i.inherit)
	if err != nil || seq == 0 {
		return 0, err
	}
	intent, err := i.store.LastIntent(ctx, i.inherit)
	if err != nil {
		return 0, err
	}
	i.intents.overlap = max(i.intents.overlap, intent)
	i.log.Info("partition starts from the commit of the consumer it was split from", "consumer", i.cfg.Consumer, "from", i.inherit, "committed_seq", seq)
	return seq, nil
}

// stopped is Run's result once consuming ended with err: nil for a stop
// asked for (ctx cancelled), the lease's loss when that ended it.
func stopped(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errLeaseLost) {
		return cause
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Consumer is the durable consumer this ingester runs: its commit
// markers' and watermark's key.
func (i *Ingester) Consumer() string { return i.cfg.Consumer }
