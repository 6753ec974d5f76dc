package deletion

import (
	"context"
	"fmt"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// The distinct ids' last seen times (person_last_seen, schema 0020) are
// maxima without the events' seq or person, so the deleter cannot cut them
// as it cuts events: for each distinct id of the behaviour events a batch
// deletes, it deletes the id's rows and writes them again from the events
// the batch keeps (those of the id's later owners, or above a request's
// sequence; often none), all before it issues the purge. A run cut short
// anywhere before the purge leaves the events for the next run, which
// finds them and does it all again; once the purge is issued, the times
// are already those of the events it keeps. So nothing needs to be
// verified afterwards, and a request verified has its ids' times right.

// rebuildLastSeen makes the last seen times of the distinct ids whose
// events the batch's purge deletes those of the events it keeps, and says
// how many ids it rewrote.
func (r *Runner) rebuildLastSeen(ctx context.Context, ts []eventstore.PurgeTarget, project uint64, sp span) (int, error) {
	es := eventstore.New(r.conn)
	lap := laps(r.log)
	ids, err := es.PurgedDistinctIDs(ctx, project, ts, sp.hours())
	if err != nil {
		return 0, fmt.Errorf("read the distinct ids to purge: %w", err)
	}
	lap("last seen: read ids")
	return r.rewriteLastSeen(ctx, project, ids, func(ctx context.Context) ([]eventstore.SeenAt, error) {
		return es.KeptLastSeen(ctx, project, ids, ts, sp.hours())
	})
}

// rebuildFilteredLastSeen does for a filtered deletion what
// rebuildLastSeen does for a batch: the last seen times of the distinct
// ids of the events the scope selects become those of the events it
// keeps, before anything is deleted (the same argument holds: a run cut
// short before its mutations leaves the events to the next run).
func (r *Runner) rebuildFilteredLastSeen(ctx context.Context, sc eventstore.FilterScope) (int, error) {
	es := eventstore.New(r.conn)
	ids, err := es.FilteredDistinctIDs(ctx, sc)
	if err != nil {
		return 0, fmt.Errorf("read the distinct ids of the matching events: %w", err)
	}
	return r.rewriteLastSeen(ctx, sc.ProjectID, ids, func(ctx context.Context) ([]eventstore.SeenAt, error) {
		return es.KeptFilteredLastSeen(ctx, sc, ids)
	})
}

// rewriteLastSeen deletes the rows of the distinct ids, reads their times
// from the events kept (kept) while that mutation runs, waits for it,
// then writes the times, and says how many ids it rewrote. The read
// overlaps the mutation: it reads the copy by distinct id, which the
// mutation does not touch, and starts after it is issued, so every event
// whose row the mutation deletes is in what it reads, unless an insert
// wrote that row before the event's copy and the read came between the
// two (a window of one insert's views).
func (r *Runner) rewriteLastSeen(ctx context.Context, project uint64, ids []string, kept func(context.Context) ([]eventstore.SeenAt, error)) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	lap := laps(r.log)
	es := eventstore.New(r.conn)
	before, err := r.mutationIDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("list mutations: %w", err)
	}
	if err := es.DeleteLastSeen(ctx, project, ids); err != nil {
		return 0, err
	}
	lap("last seen: issue delete")
	times, err := kept(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the kept events' last seen: %w", err)
	}
	lap("last seen: read kept times")
	// Written once the old rows are gone: a row written while the
	// mutation may still reach its part would be deleted with them.
	if err := r.waitMutations(ctx, before); err != nil {
		return 0, err
	}
	lap("last seen: wait delete")
	if err := es.AddLastSeen(ctx, project, times); err != nil {
		return 0, err
	}
	lap("last seen: write")
	return len(ids), nil
}
