package fold

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/event"
)

// EventDeletionRequest asks for the events a filter matches, up to
// RequestSeq, to be deleted: of person PersonID (kept), or of the whole
// project when PersonID is 0 (schema 0021, event_deletion_requests).
type EventDeletionRequest struct {
	ProjectID uint64
	// RequestID is the command's uuid: a redelivery writes the same row.
	RequestID  uuid.UUID
	PersonID   uint64
	PersonUUID uuid.UUID
	// Filter is the command's event.PropDeletionFilter as JSON (keys
	// sorted, numbers as they were): deletion.Filter.
	Filter      string
	RequestSeq  uint64
	RequestedAt time.Time
	// Version is the row's version: RequestSeq (the deleter's later
	// states carry its nanosecond clock, far above any sequence).
	Version uint64
}

// deleteFilteredEvents folds $delete_filtered_events: the events matching
// its filter, up to this sequence, are queued for deletion; those of the
// person named by $person_id when there is one (the person stays, and a
// person deleted or unknown at this point of the log queues nothing, as
// $delete_person_events), else the project's. No row changes: a
// redelivery writes the same request row again (keyed by the command's
// uuid), and the activity entry again under the command's uuid, as
// deletePersonEvents does.
func (f *Folder) deleteFilteredEvents(ctx context.Context, in Input) (Resolved, error) {
	ev := &in.Event
	raw, ok := ev.Properties[event.PropDeletionFilter]
	if !ok {
		return Resolved{}, nil
	}
	filter, err := json.Marshal(raw)
	if err != nil {
		// A value decoded from JSON always encodes; nothing to queue.
		return Resolved{}, nil
	}
	req := EventDeletionRequest{ProjectID: in.ProjectID, RequestID: ev.UUID, Filter: string(filter),
		RequestSeq: in.Own(), RequestedAt: ev.Timestamp, Version: in.Own()}
	if _, scoped := ev.Properties[event.PropPersonID]; !scoped {
		f.eventDeletions = append(f.eventDeletions, req)
		return Resolved{}, nil
	}
	id, ok := numberProp(ev.Properties, event.PropPersonID)
	if !ok {
		return Resolved{}, nil
	}
	p, err := f.personByID(ctx, in, id)
	if err != nil || p == nil {
		return Resolved{}, err
	}
	if deletedBefore(p, &in) {
		return Resolved{}, nil
	}
	req.PersonID, req.PersonUUID = p.row.ID, p.row.UUID
	f.eventDeletions = append(f.eventDeletions, req)
	if a := actorOf(ev); a != nil && !newerThan(p, &in) {
		f.recordActivity(in, a, p, "delete_events", []activity.Change{{
			Type: "Person", Action: "delete_events", Field: "events", After: map[string]any{"filter": raw}}})
	}
	return resolved(p), nil
}
