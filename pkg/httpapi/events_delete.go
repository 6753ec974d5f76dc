package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Filtered deletions of events (docs/api.md, "Deleting events by
// filter"): delete_events/ and bulk_delete take after, before and event;
// events/delete/ takes properties too, for the whole project.

// Bounds of a filter's dates: DateTime's range.
var (
	minDeletionDate = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDeletionDate = time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC)
)

// deletionFilter reads a filtered deletion's fields from a JSON body:
// after and before (ISO 8601), event (a name or a list of names) and,
// when withProperties, properties (an event property filter, as a JSON
// value or a string holding one). set says whether any field was given.
func deletionFilter(r *http.Request, body map[string]any, withProperties bool) (f deletion.Filter, set bool, err error) {
	for _, field := range []string{"after", "before"} {
		raw, ok := body[field]
		if !ok || raw == nil {
			continue
		}
		s, isString := raw.(string)
		t, parsed := parseAbsolute(s)
		if !isString || !parsed {
			return f, false, invalid(field, field+" must be an ISO 8601 date or datetime, e.g. 2026-01-02 or 2026-01-02T15:04:05Z.")
		}
		if t.Before(minDeletionDate) || !t.Before(maxDeletionDate) {
			return f, false, invalid(field, field+" must be between 1970-01-01 and 2105-12-31.")
		}
		t = t.Truncate(time.Millisecond)
		if field == "after" {
			f.After = &t
		} else {
			f.Before = &t
		}
	}
	if f.After != nil && f.Before != nil && !f.After.Before(*f.Before) {
		return f, false, invalid("before", "before must be later than after (after is inclusive, before exclusive).")
	}
	if f.Events, err = eventNames(body["event"]); err != nil {
		return f, false, err
	}
	if raw, ok := body["properties"]; ok && raw != nil {
		if !withProperties {
			return f, false, invalid("properties", "properties filters events of the whole project: use POST /api/projects/{project_id}/events/delete/.")
		}
		text, isString := raw.(string)
		if isString && strings.TrimSpace(text) == "" {
			text = "null"
		}
		if !isString {
			b, err := json.Marshal(raw)
			if err != nil {
				return f, false, invalid("properties", "properties must be a JSON array or object.")
			}
			text = string(b)
		}
		if len(text) > deletion.MaxFilterBytes {
			return f, false, invalid("properties", fmt.Sprintf("properties is longer than %d bytes.", deletion.MaxFilterBytes))
		}
		if !json.Valid([]byte(text)) {
			return f, false, invalid("properties", "properties must be valid JSON.")
		}
		f.Properties = json.RawMessage(text)
		c, err := f.Compile(r.Context(), time.Now())
		var pe *propfilter.Error
		switch {
		case errors.As(err, &pe):
			return f, false, invalid("properties", "Properties are unparsable! "+pe.Detail)
		case err != nil && !errors.Is(err, deletion.ErrSelectsEverything):
			return f, false, err
		case err != nil || !c.ByProperties:
			// [], {}, null, or groups with nothing in them: no constraint.
			f.Properties = nil
		}
	}
	return f, !f.Empty(), nil
}

// eventNames reads event: a non-empty name or a list of them, at most
// deletion.MaxFilterEvents, each once.
func eventNames(raw any) ([]string, error) {
	const msg = "event must be an event name or a list of event names."
	var list []any
	switch v := raw.(type) {
	case nil:
		return nil, nil
	case string:
		list = []any{v}
	case []any:
		if len(v) == 0 {
			return nil, invalid("event", "event must name at least one event.")
		}
		list = v
	default:
		return nil, invalid("event", msg)
	}
	if len(list) > deletion.MaxFilterEvents {
		return nil, invalid("event", fmt.Sprintf("event lists at most %d names; got %d.", deletion.MaxFilterEvents, len(list)))
	}
	var out []string
	seen := map[string]bool{}
	for _, it := range list {
		s, ok := it.(string)
		if !ok {
			return nil, invalid("event", msg)
		}
		if s == "" {
			return nil, invalid("event", "event names must not be empty.")
		}
		if len(s) > 1000 {
			return nil, invalid("event", "event names are at most 1000 bytes.")
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// filterJSON is the filter as the command carries it.
func filterJSON(f deletion.Filter) (json.RawMessage, error) {
	return json.Marshal(f)
}

// filteredCommand is the command queueing the deletion of person p's
// events that f matches.
func filteredCommand(p chstore.PersonRecord, f deletion.Filter) (command.Command, error) {
	raw, err := filterJSON(f)
	if err != nil {
		return command.Command{}, err
	}
	return command.DeleteFilteredEvents(commandDistinctID(p), p.ID, raw), nil
}

// eventDeletionResult answers events/delete/.
type eventDeletionResult struct {
	DryRun    bool            `json:"dry_run"`
	Count     *uint64         `json:"count,omitempty"`
	RequestID *uuid.UUID      `json:"request_id,omitempty"`
	Filter    deletion.Filter `json:"filter"`
}

// deleteProjectEvents serves POST /events/delete/: the deletion of the
// project's events that the filter matches (properties, after, before,
// event; at least one) is queued, 202 with the request's id once folded;
// with dry_run true, 200 with the number of events it matches now and
// nothing queued.
func (a *API) deleteProjectEvents(w http.ResponseWriter, r *http.Request) error {
	proj, body, err := a.projectWithBody(r)
	if err != nil {
		return err
	}
	dryRun := false
	if raw, ok := body["dry_run"]; ok && raw != nil {
		b, isBool := raw.(bool)
		if !isBool {
			return invalid("dry_run", "dry_run must be true or false.")
		}
		dryRun = b
	}
	f, set, err := deletionFilter(r, body, true)
	if err != nil {
		return err
	}
	if !set {
		return invalid("properties", "Give at least one of properties, after, before or event: an empty filter would delete every event of the project.")
	}
	if dryRun {
		n, err := a.writes.Deletions.CountMatching(r.Context(), proj.ID, f, time.Now())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, eventDeletionResult{DryRun: true, Count: &n, Filter: f})
		return nil
	}
	raw, err := filterJSON(f)
	if err != nil {
		return err
	}
	id := uuid.New()
	c := command.DeleteFilteredEvents(command.EventDeletionDistinctID, 0, raw)
	c.ID = id.String()
	// Recorded but not folded within the wait (errPending) is queued all
	// the same: the answer carries the id to follow in deletion_status/.
	if err := a.apply(r, proj.ID, c); err != nil && !errors.Is(err, errPending) {
		return err
	}
	writeJSON(w, http.StatusAccepted, eventDeletionResult{RequestID: &id, Filter: f})
	return nil
}

// filteredDeletionItem is one filtered deletion in deletion_status/: its
// id, person (null: the project's events), filter, stage and counts.
type filteredDeletionItem struct {
	RequestID        uuid.UUID       `json:"request_id"`
	PersonID         *uint64         `json:"person_id"`
	PersonUUID       *uuid.UUID      `json:"person_uuid"`
	Filter           json.RawMessage `json:"filter"`
	CreatedAt        time.Time       `json:"created_at"`
	Status           string          `json:"status"`
	Stage            string          `json:"stage"`
	StartedAt        *time.Time      `json:"started_at"`
	DeleteVerifiedAt *time.Time      `json:"delete_verified_at"`
	EventsDeleted    *uint64         `json:"events_deleted"`
	RequestSeq       uint64          `json:"request_seq"`
}

func filteredDeletionJSON(q deletion.FilteredRequest) filteredDeletionItem {
	it := filteredDeletionItem{RequestID: q.RequestID, Filter: json.RawMessage(q.Filter), CreatedAt: q.RequestedAt.UTC(),
		Status: "pending", Stage: q.Status, RequestSeq: q.RequestSeq}
	if !json.Valid(it.Filter) {
		it.Filter = json.RawMessage("null")
	}
	if q.PersonID != 0 {
		id, u := q.PersonID, q.PersonUUID
		it.PersonID, it.PersonUUID = &id, &u
	}
	if q.Status == deletion.StatusRunning {
		t := q.StartedAt.UTC()
		it.StartedAt = &t
	}
	if q.Status == deletion.StatusVerified {
		started, verified, n := q.StartedAt.UTC(), q.VerifiedAt.UTC(), q.EventsDeleted
		it.Status, it.StartedAt, it.DeleteVerifiedAt, it.EventsDeleted = "completed", &started, &verified, &n
	}
	return it
}
