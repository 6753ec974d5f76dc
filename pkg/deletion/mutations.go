package deletion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
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

// mutationTables are the tables the deleter mutates: events, its copy
// and its hourly counts.
const mutationTables = "table IN ('events', '" + copyTable + "', '" + hourlyTable + "')"

// mutationIDs lists the mutations (table/id) of the events tables known before a new
// one is issued. system.mutations has, on 18.16 and 24.x alike, database,
// table, mutation_id, command, create_time and is_done; a mutation not in
// this list is the one issued after it (or a concurrent one, which is
// waited for too).
func (r *Runner) mutationIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := r.conn.Query(ctx, "SELECT concat(table, '/', mutation_id) FROM system.mutations WHERE database = currentDatabase() AND "+mutationTables)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// unfinished lists the unfinished mutations of the events table that are
// not in before.
func (r *Runner) unfinished(ctx context.Context, before map[string]bool) ([]string, error) {
	rows, err := r.conn.Query(ctx, "SELECT concat(table, '/', mutation_id) FROM system.mutations WHERE database = currentDatabase() AND "+mutationTables+" AND is_done = 0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		if !before[id] {
			out = append(out, id)
		}
	}
	return out, rows.Err()
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
		ids, err := r.unfinished(pctx, before)
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
