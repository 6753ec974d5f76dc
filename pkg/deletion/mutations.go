package deletion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// errMutationTimeout says a mutation did not finish within MutationTimeout.
var errMutationTimeout = errors.New("mutation did not finish in time")

// The poll interval is a hundredth of the time waited so far, within
// pollMin and pollMax: a mutation is seen done at most ~1% (or pollMin)
// after it ends, and a long one costs a few polls a second at most (a
// cheap read of a system table). A fixed 50-200 ms back-off lost up to
// 200 ms of a run of a few seconds (docs/performance.md, the purge figure).
const (
	pollMin = 10 * time.Millisecond
	pollMax = time.Second
)

// pollDelay is the wait before the next poll, waited being the time since
// the mutations were issued.
func pollDelay(waited time.Duration) time.Duration {
	return min(max(waited/100, pollMin), pollMax)
}

// mutationIDs lists the mutations of the events tables known before a
// new one is issued (eventstore.Store.Mutations).
func (r *Runner) mutationIDs(ctx context.Context) (map[string]bool, error) {
	return eventstore.New(r.conn).Mutations(ctx)
}

// waitMutations waits until every mutation of the events table issued
// since before is done. It gives up after MutationTimeout
// (errMutationTimeout) or when ctx is cancelled; the mutation itself
// carries on in ClickHouse either way. A failed poll is retried until the
// deadline.
func (r *Runner) waitMutations(ctx context.Context, before map[string]bool) error {
	start := time.Now()
	deadline := start.Add(r.cfg.MutationTimeout)
	var last []string
	var lastErr error
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		ids, err := eventstore.New(r.conn).UnfinishedMutations(pctx, before)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			lastErr = err
			r.log.Warn("poll system.mutations", "err", err)
		case len(ids) == 0:
			r.logDone(last, nil, start)
			return nil
		default:
			r.logDone(last, ids, start)
			last = ids
		}
		if !time.Now().Before(deadline) {
			if lastErr != nil && last == nil {
				return fmt.Errorf("%w (%s): polling failed: %v", errMutationTimeout, r.cfg.MutationTimeout, lastErr)
			}
			return fmt.Errorf("%w (%s): events mutations %v are still running; see system.mutations", errMutationTimeout, r.cfg.MutationTimeout, last)
		}
		t := time.NewTimer(min(pollDelay(time.Since(start)), time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// logDone logs at debug level each mutation of was that is not in now:
// which table's rewrite a batch's wait was for (docs/performance.md, the purge figure).
func (r *Runner) logDone(was, now []string, start time.Time) {
	for _, id := range was {
		if !slices.Contains(now, id) {
			r.log.Debug("mutation done", "mutation", id, "ms", time.Since(start).Milliseconds())
		}
	}
}
