// Package deletion executes the queued deletions of deleted persons'
// events, and the filtered deletions of events (filtered.go). The ingester queues a request in person_deletion_requests when it
// folds a person deletion with delete_events; a run takes every request not
// verified yet, deletes the person's events up to the request's sequence
// with ClickHouse mutations (a batch of persons at a time), waits for the
// mutations, counts again, and only then marks the request verified.
//
// Every step can be cut short (crash, ClickHouse error, shutdown) without
// losing a request: a request is only ever marked verified after a count
// found none of its events, and the next run takes everything else again.
// A mutation deletes nothing it should not: it is bounded by the project,
// the persons of the batch and, per person, the sequence of the deletion.
package deletion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/shutdown"
)

// ErrBusy is returned by RunOnce while another run of the same Runner is
// in progress.
var ErrBusy = errors.New("a deletion run is already in progress")

// stepTimeout bounds one statement. A statement in hand when the run's
// context is cancelled may finish within shutdownGrace (shutdown lets the
// current step finish, but a dead ClickHouse cannot hold it).
const (
	stepTimeout   = 10 * time.Minute
	shutdownGrace = 10 * time.Second
)

// Runner executes deletion requests against one ClickHouse database.
type Runner struct {
	conn driver.Conn
	cfg  Config
	log  *slog.Logger
	m    *metrics
	busy sync.Mutex // one run at a time
}

// New validates cfg and registers the deleter's metrics on reg.
func New(conn driver.Conn, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Runner{conn: conn, cfg: cfg, log: logger, m: m}, nil
}

// Summary tells what one run did: the persons' requests and the
// filtered ones (filtered.go) together.
type Summary struct {
	Taken         int    // requests the run took (pending or running)
	Verified      int    // requests whose events are verified gone
	Failed        int    // requests that failed; they are pending again
	Left          int    // requests not finished: the run stopped early (shutdown, mutation timeout)
	Waiting       int    // requests from a batch the ingester has not committed
	EventsDeleted uint64 // events of the verified requests, counted before deleting
	Mutations     int    // mutations issued
	Recounted     int    // persons whose hourly counts were rebuilt from events left to them (normally none)
	LastSeen      int    // distinct ids whose last seen times were rewritten from the events kept (batches that did not fail)
	Interrupted   bool   // the run stopped because its context was cancelled
}

// RunOnce performs one run. It returns an error when the run could not
// start or take its requests; failures of single batches are counted in
// Summary.Failed (and logged) instead. When ctx is cancelled the run
// finishes the statement in hand and returns with Interrupted set,
// leaving its unfinished requests as they are for the next run.
func (r *Runner) RunOnce(ctx context.Context) (Summary, error) {
	if !r.busy.TryLock() {
		return Summary{}, ErrBusy
	}
	defer r.busy.Unlock()
	start := time.Now()
	sum, err := r.run(ctx)
	if err == nil && !sum.Interrupted && ctx.Err() == nil {
		err = r.runFiltered(ctx, &sum)
	}
	elapsed := time.Since(start)
	r.m.lastRun.Set(float64(time.Now().UnixNano()) / 1e9)
	r.m.lastDuration.Set(elapsed.Seconds())
	gctx, stop := shutdown.Grace(ctx, shutdownGrace)
	lap := laps(r.log)
	r.refreshPending(gctx)
	lap("refresh pending")
	stop()
	if err != nil && ctx.Err() != nil {
		// Cancelled while reading or marking the requests: nothing was
		// deleted, and the next run takes them all again.
		sum.Interrupted, err = true, nil
	}
	if err != nil {
		r.m.runErrors.Inc()
		r.log.Error("deletion run failed", "err", err, "elapsed", elapsed)
		return sum, err
	}
	r.log.Info("deletion run done", "taken", sum.Taken, "verified", sum.Verified, "failed", sum.Failed,
		"left", sum.Left, "waiting", sum.Waiting, "events_deleted", sum.EventsDeleted,
		"mutations", sum.Mutations, "recounted", sum.Recounted, "last_seen", sum.LastSeen, "interrupted", sum.Interrupted, "elapsed", elapsed)
	return sum, nil
}

func (r *Runner) run(ctx context.Context) (Summary, error) {
	var sum Summary
	lap := laps(r.log)
	open, err := r.loadOpen(ctx)
	if err != nil {
		return sum, fmt.Errorf("read deletion requests: %w", err)
	}
	r.m.pending.Set(float64(len(open)))
	if len(open) == 0 {
		return sum, nil
	}
	committed, err := r.committed(ctx)
	if err != nil {
		return sum, fmt.Errorf("read the ingester's last commit: %w", err)
	}
	var take []Request
	for _, q := range open {
		if q.RequestSeq <= committed(q.ProjectID) {
			take = append(take, q)
		} else {
			sum.Waiting++
		}
	}
	sum.Taken = len(take)
	if len(take) == 0 {
		return sum, nil
	}
	r.log.Info("deletion run starting", "requests", len(take), "waiting", sum.Waiting)

	now := time.Now().UTC()
	for i := range take {
		take[i].Status, take[i].StartedAt = StatusRunning, now
		bump(&take[i])
	}
	st, cancel := step(ctx)
	err = r.write(st, take)
	cancel()
	if err != nil {
		return sum, fmt.Errorf("mark requests running: %w", err)
	}
	lap("take requests")

	batches := plan(take, r.cfg.BatchSize, maxListBytes)
	for i, b := range batches {
		if ctx.Err() != nil {
			sum.Interrupted = true
			sum.Left += countAll(batches[i:])
			break
		}
		res := r.runBatch(ctx, b)
		sum.Verified += res.verified
		sum.Failed += res.failed
		sum.EventsDeleted += res.deleted
		sum.Mutations += res.mutations
		sum.Recounted += res.recounted
		sum.LastSeen += res.lastSeen
		if res.interrupted {
			sum.Interrupted = true
			sum.Left += countAll(batches[i:])
			break
		}
		if res.timedOut {
			// Mutations run one after another: later ones would queue
			// behind the stuck one. Hand the rest back to the next run.
			rest := batches[i+1:]
			sum.Left += countAll(rest)
			r.release(ctx, rest)
			break
		}
	}
	return sum, nil
}

func countAll(batches [][]Request) int {
	n := 0
	for _, b := range batches {
		n += len(b)
	}
	return n
}

// step gives a statement a context that outlives the run's cancellation
// by shutdownGrace, so shutdown lets the statement in hand finish.
func step(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, stop := shutdown.Grace(ctx, shutdownGrace)
	ctx, cancelStep := context.WithTimeout(gctx, stepTimeout)
	cancel := func() { cancelStep(); stop() }
	// A batch's id lists are spliced into its statements (client-side
	// binding): allow long statements, so that one mutation can cover a
	// whole run's persons (each mutation rewrites every part it touches,
	// so fewer is much cheaper).
	return Statements(ctx), cancel
}

type batchResult struct {
	verified, failed, mutations int
	recounted                   int
	lastSeen                    int // distinct ids whose last seen times were rewritten
	deleted                     uint64
	interrupted, timedOut       bool
}

// runBatch deletes the events of one batch (one project) and verifies it:
// count, record the counts, rewrite the last seen times of the ids whose
// events go (lastseen.go), mutate, wait, count again, recount the hourly
// rows of persons with events left, mark verified (or failed, per person).
func (r *Runner) runBatch(ctx context.Context, b []Request) batchResult {
	var res batchResult
	log := r.log.With("project_id", b[0].ProjectID, "persons", len(b))
	lap := laps(log)
	// Each phase gets its own statement deadline: the wait in between can
	// take up to MutationTimeout.
	st, cancel := step(ctx)
	defer func() { cancel() }()

	first, err := r.countBatch(st, b, nil)
	if err != nil {
		return r.fail(ctx, b, fmt.Errorf("count events: %w", err), true)
	}
	found := first.events
	lap("count")
	// Keep the counts in the running rows, so that a crash after the
	// mutation does not lose how many events it deleted.
	var counted []Request
	var targets []Request
	for i := range b {
		id := b[i].PersonID
		n := found[id]
		if n > b[i].EventsDeleted {
			b[i].EventsDeleted = n
			bump(&b[i])
			counted = append(counted, b[i])
		}
		if n > 0 || first.copies[id] > 0 || first.drift(id) {
			targets = append(targets, b[i])
		}
	}
	// The persons every row of which above its request lies outside the
	// batch's hours (or who have none) are bounded by the batch's largest
	// sequence alone (purgeTargets).
	sp := first.spanOf(targets)
	clean := map[uint64]bool{}
	for _, q := range targets {
		id := q.PersonID
		clean[id] = found[id] == first.eventsAll[id] && first.copies[id] == first.copiesAll[id] || first.keepsApart(id, sp)
	}
	if err := r.write(st, counted); err != nil {
		return r.fail(ctx, b, fmt.Errorf("record event counts: %w", err), true)
	}
	lap("record counts")
	if ctx.Err() != nil {
		res.interrupted = true
		return res
	}

	left := found // with nothing to delete, the first count is the verification
	if len(targets) > 0 {
		ts := purgeTargets(targets, clean)
		rewritten, err := r.rebuildLastSeen(st, ts, b[0].ProjectID, sp)
		if err != nil {
			if ctx.Err() != nil {
				res.interrupted = true
				return res
			}
			fr := r.fail(ctx, b, fmt.Errorf("rebuild person_last_seen: %w", err), true)
			fr.timedOut = errors.Is(err, errMutationTimeout)
			return fr
		}
		res.lastSeen = rewritten
		lap("rebuild last seen")
		before, err := r.mutationIDs(st)
		if err != nil {
			return r.fail(ctx, b, fmt.Errorf("list mutations: %w", err), true)
		}
		if err := eventstore.New(r.conn).Purge(st, b[0].ProjectID, ts, sp.hours()); err != nil {
			return r.fail(ctx, b, err, true)
		}
		// One deletion, counted once (the metric and Summary count batches
		// mutated, as before the copy existed).
		res.mutations++
		r.m.mutations.Inc()
		lap("issue mutations")
		if err := r.waitMutations(ctx, before); err != nil {
			if ctx.Err() != nil {
				log.Info("stopped waiting for the mutation: shutting down; the next run verifies it")
				res.interrupted = true
				return res
			}
			fr := r.fail(ctx, b, err, true)
			fr.mutations, fr.timedOut = res.mutations, errors.Is(err, errMutationTimeout)
			return fr
		}
		lap("wait mutations")
		cancel()
		st, cancel = step(ctx)
		after, err := r.countBatch(st, b, &sp)
		if err != nil {
			fr := r.fail(ctx, b, fmt.Errorf("verify: %w", err), true)
			fr.mutations = res.mutations
			return fr
		}
		left = after.events
		for id, n := range after.copies {
			left[id] += n
		}
		// The hourly rows of every target in the span are gone; only
		// persons with events left there (of any sequence: above their
		// request's, or not deleted) need theirs counted again. Normally
		// there are none, and the statement, a scan of events, is skipped.
		var recount []Request
		for _, q := range targets {
			if after.inSpan[q.PersonID] > 0 {
				recount = append(recount, q)
			}
		}
		if len(recount) > 0 {
			if err := r.rebuildHourly(st, recount, sp); err != nil {
				fr := r.fail(ctx, b, fmt.Errorf("rebuild events_hourly: %w", err), true)
				fr.mutations = res.mutations
				return fr
			}
		}
		res.recounted = len(recount)
		lap("verify and recount hourly")
	}

	now := time.Now().UTC()
	var done, short []Request
	for _, q := range b {
		if left[q.PersonID] > 0 {
			short = append(short, q)
			continue
		}
		q.Status, q.VerifiedAt = StatusVerified, now
		bump(&q)
		done = append(done, q)
	}
	if err := r.write(st, done); err != nil {
		fr := r.fail(ctx, b, fmt.Errorf("mark verified: %w", err), true)
		fr.mutations = res.mutations
		return fr
	}
	lap("mark verified")
	for _, q := range done {
		res.deleted += found[q.PersonID]
	}
	res.verified = len(done)
	r.m.verified.Add(float64(len(done)))
	r.m.eventsDeleted.Add(float64(res.deleted))
	if len(short) > 0 {
		// Events written after the mutation was created (a mutation only
		// rewrites the parts that existed then); the next run takes them.
		fr := r.fail(ctx, short, fmt.Errorf("%d events remain after the mutation", total(left)), false)
		res.failed = fr.failed
	}
	log.Info("batch done", "verified", res.verified, "failed", res.failed, "events_deleted", res.deleted)
	return res
}

// purgeTargets are a batch's targets as its purge (eventstore.Purge) takes
// them. The purge's three mutations may run in any order: a request is
// verified only when events and its copy hold none of its rows, and a
// person whose hourly sums differ from its copy is mutated again
// (counts.drift), so a run cut short with only some of them issued leaves
// nothing the next run does not find.
//
// clean holds the persons the batch's first count found with no row above
// their own sequence (every row theirs to delete), or with every such row
// outside the batch's span (keepsApart), which the mutation's span bound
// keeps. For them the batch's largest sequence is their own bound already:
// the run read the ingester's commit before counting and took only
// requests at or below it, every row at or below that commit was written
// before the count, and a row written since has a sequence above it.
func purgeTargets(targets []Request, clean map[uint64]bool) []eventstore.PurgeTarget {
	ts := make([]eventstore.PurgeTarget, len(targets))
	for i, q := range targets {
		ts[i] = eventstore.PurgeTarget{PersonID: q.PersonID, Seq: q.RequestSeq, Clean: clean[q.PersonID]}
	}
	return ts
}

// laps returns a function that logs, at debug level, the time since its
// previous call (or since laps) under a step's name: where a run's time
// goes beside the mutation itself (docs/performance.md, the purge figure).
func laps(log *slog.Logger) func(step string) {
	last := time.Now()
	return func(step string) {
		now := time.Now()
		log.Debug("deletion step", "step", step, "ms", now.Sub(last).Milliseconds())
		last = now
	}
}

func total(m map[uint64]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// fail hands requests back as pending (keeping started_at and the event
// count) and counts them failed. isErr says the cause was an error (a
// ClickHouse error or timeout) rather than a verification that fell short.
func (r *Runner) fail(ctx context.Context, reqs []Request, cause error, isErr bool) batchResult {
	if isErr {
		r.m.runErrors.Inc()
	}
	r.m.failed.Add(float64(len(reqs)))
	ids := make([]uint64, 0, min(len(reqs), 20))
	for _, q := range reqs[:min(len(reqs), 20)] {
		ids = append(ids, q.PersonID)
	}
	r.log.Error("deletion requests failed; they stay pending for the next run", "project_id", reqs[0].ProjectID,
		"persons", len(reqs), "first_person_ids", ids, "err", cause)
	r.setPending(ctx, reqs)
	return batchResult{failed: len(reqs)}
}

// release hands requests the run did not attempt back as pending.
func (r *Runner) release(ctx context.Context, batches [][]Request) {
	for _, b := range batches {
		r.setPending(ctx, b)
	}
}

func (r *Runner) setPending(ctx context.Context, reqs []Request) {
	out := make([]Request, len(reqs))
	for i, q := range reqs {
		q.Status = StatusPending
		bump(&q)
		out[i] = q
	}
	st, cancel := step(ctx)
	defer cancel()
	if err := r.write(st, out); err != nil {
		// They stay running, which the next run reads as pending.
		r.log.Warn("could not mark requests pending again", "persons", len(reqs), "err", err)
	}
}

// refreshPending sets the pending gauge; a failure only logs.
func (r *Runner) refreshPending(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := r.countOpen(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("count pending deletion requests", "err", err)
		}
		return
	}
	r.m.pending.Set(float64(n))
}
