package deletion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// Filtered deletions (event_deletion_requests, schema 0021): the events
// of a project, or of one person, up to the request's sequence that its
// Filter matches. Rare and each with its own condition, they run one
// request at a time after the persons' batches:
//
//  1. count the matching events and their copies, and record the count
//     and the hours that hold them (span_from, span_to: widened, never
//     narrowed) in the request's row before anything is deleted;
//  2. when events match, rewrite the last seen times (person_last_seen)
//     of their distinct ids from the events kept (lastseen.go), while
//     the events are still there to read;
//  3. delete the copies (events_by_distinct_id; their condition reads
//     the events, so they go first) and wait; count: none may be left;
//  4. delete the events and wait; count: none may be left;
//  5. rebuild events_hourly over the recorded hours (of the person, of
//     the events named): delete its rows there, wait, and count the
//     events left in events into it (eventstore.ReconcileHourly: each
//     key gets the difference between its events and its sum, which
//     rows inserted since the deletion started already hold), month by
//     month, checked again;
//  6. mark the request verified with the events counted.
//
// A run cut short anywhere leaves the request unverified, and the next
// run does every step again: the counts find what is left, and step 5
// covers every hour recorded by any run, so hourly rows of events a
// previous run deleted are corrected too.

// FilteredRequest is one row of event_deletion_requests (its newest
// version).
type FilteredRequest struct {
	ProjectID     uint64
	RequestID     uuid.UUID
	PersonID      uint64 // 0: the project's events
	PersonUUID    uuid.UUID
	Filter        string // JSON of Filter
	RequestSeq    uint64
	Status        string
	RequestedAt   time.Time
	StartedAt     time.Time
	VerifiedAt    time.Time
	EventsDeleted uint64
	SpanFrom      time.Time // the hours holding the events found; Unix 0: none
	SpanTo        time.Time
	Version       uint64
}

const filteredColumns = "project_id, request_id, person_id, person_uuid, filter, request_seq, status, requested_at, " +
	"started_at, verified_at, events_deleted, span_from, span_to, version"

func scanFiltered(scan func(...any) error) (FilteredRequest, error) {
	var q FilteredRequest
	err := scan(&q.ProjectID, &q.RequestID, &q.PersonID, &q.PersonUUID, &q.Filter, &q.RequestSeq, &q.Status,
		&q.RequestedAt, &q.StartedAt, &q.VerifiedAt, &q.EventsDeleted, &q.SpanFrom, &q.SpanTo, &q.Version)
	return q, err
}

// loadOpenFiltered returns the filtered requests not verified yet, oldest
// first.
func (r *Runner) loadOpenFiltered(ctx context.Context) ([]FilteredRequest, error) {
	rows, err := r.conn.Query(readCtx(ctx), "SELECT "+filteredColumns+
		" FROM event_deletion_requests FINAL WHERE status != ? ORDER BY request_seq", StatusVerified)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []FilteredRequest
	for rows.Next() {
		q, err := scanFiltered(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// writeFiltered inserts a new version of a request, above its current.
func (r *Runner) writeFiltered(ctx context.Context, q *FilteredRequest) error {
	v := uint64(time.Now().UnixNano())
	if v <= q.Version {
		v = q.Version + 1
	}
	q.Version = v
	batch, err := r.conn.PrepareBatch(ctx, "INSERT INTO event_deletion_requests ("+filteredColumns+")")
	if err != nil {
		return err
	}
	if err := batch.Append(q.ProjectID, q.RequestID, q.PersonID, q.PersonUUID, q.Filter, q.RequestSeq, q.Status, q.RequestedAt.UTC(),
		q.StartedAt.UTC(), q.VerifiedAt.UTC(), q.EventsDeleted, q.SpanFrom.UTC(), q.SpanTo.UTC(), q.Version); err != nil {
		batch.Abort()
		return err
	}
	return batch.Send()
}

// runFiltered executes the filtered requests the ingester has committed,
// adding what it did to sum.
func (r *Runner) runFiltered(ctx context.Context, sum *Summary) error {
	open, err := r.loadOpenFiltered(ctx)
	if err != nil {
		return fmt.Errorf("read filtered deletion requests: %w", err)
	}
	if len(open) == 0 {
		return nil
	}
	committed, err := r.committed(ctx)
	if err != nil {
		return fmt.Errorf("read the ingester's last commit: %w", err)
	}
	for i, q := range open {
		if q.RequestSeq > committed(q.ProjectID) {
			sum.Waiting++
			continue
		}
		if ctx.Err() != nil {
			sum.Interrupted = true
			sum.Left += len(open) - i
			break
		}
		sum.Taken++
		log := r.log.With("project_id", q.ProjectID, "request_id", q.RequestID, "person_id", q.PersonID)
		deleted, mutations, err := r.runFilteredOne(ctx, &open[i])
		sum.Mutations += mutations
		switch {
		case err == nil:
			sum.Verified++
			sum.EventsDeleted += deleted
			r.m.verified.Inc()
			r.m.eventsDeleted.Add(float64(deleted))
			log.Info("filtered deletion verified", "events_deleted", deleted)
		case ctx.Err() != nil:
			sum.Interrupted = true
			sum.Left += len(open) - i
			log.Info("filtered deletion stopped: shutting down; the next run resumes it", "err", err)
			return nil
		default:
			sum.Failed++
			r.m.failed.Inc()
			r.m.runErrors.Inc()
			log.Error("filtered deletion failed; it stays pending for the next run", "err", err)
			q := open[i]
			q.Status = StatusPending
			st, cancel := step(ctx)
			if werr := r.writeFiltered(st, &q); werr != nil {
				log.Warn("could not mark the request pending again", "err", werr)
			}
			cancel()
			if errors.Is(err, errMutationTimeout) {
				// Later mutations would queue behind the stuck one.
				return nil
			}
		}
	}
	return nil
}

// runFilteredOne runs one request through the steps above; it returns
// the events it counted as deleted and the mutations it issued.
func (r *Runner) runFilteredOne(ctx context.Context, q *FilteredRequest) (uint64, int, error) {
	f, err := ParseFilter(q.Filter)
	if err != nil {
		return 0, 0, err
	}
	cond, err := f.Compile(ctx, q.RequestedAt)
	if err != nil {
		return 0, 0, fmt.Errorf("compile the filter: %w", err)
	}
	es := eventstore.New(r.conn)
	sc := eventstore.FilterScope{ProjectID: q.ProjectID, PersonID: q.PersonID, Seq: q.RequestSeq, Cond: cond.SQL, Args: cond.Args}
	st, cancel := step(ctx)
	defer func() { cancel() }()

	first, err := es.CountFiltered(st, sc)
	if err != nil {
		return 0, 0, fmt.Errorf("count events: %w", err)
	}
	q.Status, q.StartedAt = StatusRunning, time.Now().UTC()
	q.EventsDeleted = max(q.EventsDeleted, first.Events)
	if first.Events > 0 {
		lo := time.Unix(int64(first.Lo)-int64(first.Lo)%3600, 0).UTC()
		hi := time.Unix(int64(first.Hi)-int64(first.Hi)%3600+3600, 0).UTC()
		if q.SpanTo.Unix() <= 0 {
			q.SpanFrom, q.SpanTo = lo, hi
		} else {
			q.SpanFrom, q.SpanTo = minTime(q.SpanFrom, lo), maxTime(q.SpanTo, hi)
		}
	}
	// Recorded before anything is deleted: a run cut short after the
	// mutations still leaves the next one the hours to correct.
	if err := r.writeFiltered(st, q); err != nil {
		return 0, 0, fmt.Errorf("record the count: %w", err)
	}

	mutations := 0
	if first.Events > 0 {
		// The last seen times first (lastseen.go): they are read from
		// the events this run is about to delete.
		n, err := r.rebuildFilteredLastSeen(st, sc)
		if err != nil {
			return 0, 0, fmt.Errorf("rewrite last seen times: %w", err)
		}
		if n > 0 {
			mutations++
			r.m.mutations.Inc()
		}
	}
	mutate := func(what string, issue func(context.Context, eventstore.FilterScope) error, left func(eventstore.FilteredCounts) uint64) error {
		before, err := r.mutationIDs(st)
		if err != nil {
			return fmt.Errorf("list mutations: %w", err)
		}
		if err := issue(st, sc); err != nil {
			return fmt.Errorf("delete %s: %w", what, err)
		}
		mutations++
		r.m.mutations.Inc()
		if err := r.waitMutations(ctx, before); err != nil {
			return err
		}
		cancel()
		st, cancel = step(ctx)
		after, err := es.CountFiltered(st, sc)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		if n := left(after); n > 0 {
			// Written after the mutation was created; the next run.
			return fmt.Errorf("%d %s remain after the mutation", n, what)
		}
		return nil
	}
	if first.Copies > 0 {
		if err := mutate("copies", es.DeleteFilteredCopies, func(c eventstore.FilteredCounts) uint64 { return c.Copies }); err != nil {
			return 0, mutations, err
		}
	}
	if first.Events > 0 {
		if err := mutate("events", es.DeleteFiltered, func(c eventstore.FilteredCounts) uint64 { return c.Events + c.Copies }); err != nil {
			return 0, mutations, err
		}
	}
	if q.SpanTo.Unix() > 0 {
		// A month at a time, emptied then counted again: the analysis
		// reads a month's hours short only while that month is redone.
		region := eventstore.HourlyRegion{ProjectID: q.ProjectID, PersonID: q.PersonID, Events: f.Events, From: q.SpanFrom, To: q.SpanTo}
		for _, hr := range region.Months() {
			before, err := r.mutationIDs(st)
			if err != nil {
				return 0, mutations, fmt.Errorf("list mutations: %w", err)
			}
			if err := es.DeleteHourly(st, hr); err != nil {
				return 0, mutations, fmt.Errorf("delete events_hourly rows: %w", err)
			}
			mutations++
			r.m.mutations.Inc()
			if err := r.waitMutations(ctx, before); err != nil {
				return 0, mutations, err
			}
			cancel()
			st, cancel = step(ctx)
			if err := r.reconcileHourly(st, hr); err != nil {
				return 0, mutations, fmt.Errorf("count events_hourly again: %w", err)
			}
		}
	}
	q.Status, q.VerifiedAt = StatusVerified, time.Now().UTC()
	if err := r.writeFiltered(st, q); err != nil {
		return 0, mutations, fmt.Errorf("mark verified: %w", err)
	}
	return q.EventsDeleted, mutations, nil
}

// hourlyAttempts bounds the corrections of one month of hours: a key
// still off after a correction had events inserted during the statement
// (the view counts an insert after its events are written), and the next
// correction finds it.
const hourlyAttempts = 3

// reconcileHourly counts into events_hourly, emptied over the region (a
// month or less: one statement groups its keys), the events left there,
// checked and corrected again up to hourlyAttempts times.
func (r *Runner) reconcileHourly(ctx context.Context, hr eventstore.HourlyRegion) error {
	es := eventstore.New(r.conn)
	for range hourlyAttempts {
		if err := es.ReconcileHourly(ctx, hr); err != nil {
			return err
		}
		n, err := es.CheckHourly(ctx, hr)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return fmt.Errorf("hourly counts of %s..%s still differ from events after %d corrections", hr.From, hr.To, hourlyAttempts)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
