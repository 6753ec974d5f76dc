package fold

import (
	"context"
	"slices"

	"github.com/personhub/personhub/pkg/activity"
)

// resetDistinctID folds $reset_person_distinct_id: the event's distinct id
// leaves the person owning it (a tombstone at this sequence), so its next
// event starts a fresh person; the owner keeps its other ids. An id owned
// by nobody (unknown, or of a deleted person) needs nothing: it already
// starts afresh.
//
// The rule reads the distinct id's state only, never the owner's list: a
// redelivery after a crash rebuilds distinct id states exactly as of the
// event, while the owner's stored row may already show later events of the
// batch. So the fold does not refuse to take a person's last id (the API
// does, when it reads the request); see docs/events.md.
func (f *Folder) resetDistinctID(ctx context.Context, in Input) (Resolved, error) {
	d := in.Event.DistinctID
	k := didKey{in.ProjectID, d}
	if _, ok := f.dids[k]; !ok {
		if err := f.loadDistinctIDs(ctx, in.ProjectID, []string{d}); err != nil {
			return Resolved{}, err
		}
	}
	if dd := f.dids[k]; dd.row.IsDeleted || dd.row.Version >= in.Seq {
		return Resolved{}, nil
	}
	p, err := f.personOf(ctx, in.ProjectID, d)
	if err != nil || p == nil || deletedBefore(p, &in) {
		return Resolved{}, err
	}
	before := slices.Clone(p.row.DistinctIDs)
	fresh := in.Seq > p.row.Version || p.dirtyAt(in.Seq)
	if fresh {
		p.row.DistinctIDs = removeString(p.row.DistinctIDs, d)
		f.touch(p, in.Seq)
	}
	f.tombstone(in, d, p.row.ID)
	// A redelivery whose person row is already written wrote the entry
	// too (entries are written before person rows).
	if a := actorOf(&in.Event); a != nil && fresh {
		f.recordActivity(in, a, p, "reset_person_distinct_id", []activity.Change{{
			Type: "Person", Action: "changed", Field: "distinct_ids",
			Before: before, After: slices.Clone(p.row.DistinctIDs),
		}})
	}
	return resolved(p), nil
}
