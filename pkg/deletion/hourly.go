package deletion

import (
	"context"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// The hourly counts (events_hourly, schema 0014) are sums without the
// events' seq, so the deleter cannot cut them at each person's
// request_seq as it cuts events: it deletes every row of the batch's
// persons in the hours of the rows it deletes (span), then, once events
// are mutated, counts again the events of those persons left in those
// hours (normally none: events above a deletion's sequence belong to the
// ids' next persons, so the recount is normally skipped: runBatch). A
// failure between the two leaves the request unverified, and the next run
// of it deletes and rebuilds again; both steps run in every run that
// mutates. A run killed after the events' mutation and before the hourly
// one leaves nothing of the person's in events for the next run to find,
// so each run also compares a person's hourly sums with its events
// (counts.drift) and mutates where they differ.

// rebuildHourly counts into events_hourly the events of the batch's
// persons left in events in the batch's hours (those its mutation
// emptied), as the view counts an insert (schema 0014): the events
// tables' owner runs the statement.
func (r *Runner) rebuildHourly(ctx context.Context, b []Request, sp span) error {
	ids := make([]uint64, len(b))
	for i, q := range b {
		ids[i] = q.PersonID
	}
	return eventstore.New(r.conn).RebuildHourly(ctx, eventstore.PersonHours{
		ProjectID: b[0].ProjectID, PersonIDs: ids, From: sp.from, To: sp.to, AllHours: sp.all})
}
