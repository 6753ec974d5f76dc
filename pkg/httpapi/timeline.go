package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/timeline"
)

// parseDate reads an absolute date (2026-01-02, RFC 3339, "2026-01-02
// 15:04:05"), "all", or a relative one (-7d, -24h, -2w, -3m, -1y, the
// property filters' syntax) relative to now.
func parseDate(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "all" {
		return time.Unix(0, 0).UTC(), true
	}
	if t, ok := propfilter.RelativeDate(s, now); ok {
		return t, true
	}
	return parseAbsolute(s)
}

// parseAbsolute reads an ISO 8601 moment as PostHog's routes take it:
// with Z or an offset, or without one (UTC), fractional seconds or not, T
// or a space between date and time, or a date alone (its midnight, UTC).
func parseAbsolute(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// entity is an element of the legacy `events` filter.
type entity struct {
	ID         any             `json:"id"`
	Properties json.RawMessage `json:"properties"`
}

// propertiesTimeline serves GET /persons/{id}/properties_timeline/.
func (a *API) propertiesTimeline(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	p, err := a.lookupPerson(r, proj.ID)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	now := time.Now().UTC()
	from, to := p.CreatedAt.UTC(), now
	if v := q.Get("date_from"); v != "" {
		var ok bool
		if from, ok = parseDate(v, now); !ok {
			return invalid("date_from", "date_from must be a date, a date-time, or relative like -7d.")
		}
	}
	if v := q.Get("date_to"); v != "" {
		var ok bool
		if to, ok = parseDate(v, now); !ok {
			return invalid("date_to", "date_to must be a date, a date-time, or relative like -7d.")
		}
		if len(v) == len("2006-01-02") {
			to = to.Add(24*time.Hour - time.Nanosecond) // the whole day
		}
	}
	var tq timeline.Query
	tq.From, tq.To = from, to
	keys, err := propfilter.Keys(q.Get("properties"))
	if err != nil {
		return err
	}
	if v := q.Get("events"); v != "" {
		var entities []entity
		if err := json.Unmarshal([]byte(v), &entities); err != nil {
			return invalid("events", "events must be a JSON array of {\"id\": event name}.")
		}
		for _, e := range entities {
			if name, ok := e.ID.(string); ok && name != "" {
				tq.Events = append(tq.Events, name)
			}
			if len(e.Properties) > 0 {
				more, err := propfilter.Keys(string(e.Properties))
				if err != nil {
					return err
				}
				keys = append(keys, more...)
			}
		}
	}
	if b := q.Get("breakdown"); b != "" && (q.Get("breakdown_type") == "" || q.Get("breakdown_type") == "person") {
		keys = append(keys, b)
	}
	tq.Keys = timeline.SortedKeys(keys)
	events, err := a.store.PersonEvents(r.Context(), proj.ID, p.DistinctIDs, to)
	if err != nil {
		return err
	}
	list := make([]timeline.Event, len(events))
	for i, e := range events {
		list[i] = timeline.Event{Name: e.Name, Timestamp: e.Timestamp, Properties: e.Properties}
	}
	points, err := timeline.Build(list, tq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"points":                points,
		"crucial_property_keys": tq.Keys,
		"effective_date_from":   from.Format(time.RFC3339),
		"effective_date_to":     to.Format(time.RFC3339),
	})
	return nil
}

// pointInTime is properties_at_time's metadata: PostHog's fields, and
// which events were applied.
type pointInTime struct {
	QueriedTimestamp   string        `json:"queried_timestamp"`
	IncludeSetOnce     bool          `json:"include_set_once"`
	DistinctIDUsed     *string       `json:"distinct_id_used"`
	PersonIDUsed       *string       `json:"person_id_used"`
	QueryMode          string        `json:"query_mode"`
	DistinctIDsQueried []string      `json:"distinct_ids_queried"`
	DistinctIDsCount   int           `json:"distinct_ids_count"`
	EventsApplied      int           `json:"events_applied"`
	LastEventApplied   *appliedEvent `json:"last_event_applied"`
}

// appliedEvent names an event applied.
type appliedEvent struct {
	UUID      string `json:"uuid"`
	Event     string `json:"event"`
	Timestamp string `json:"timestamp"`
}

// propertiesAtTime serves GET /persons/properties_at_time/ (PostHog's
// route): the person named by distinct_id or person_id (integer id or
// uuid), with its properties as of timestamp: the $set (and, with
// include_set_once, $set_once) and $unset of the events of its distinct
// ids at or before that moment, folded in the order the ingester folded
// them. The log keeps every event, so no moment is too old (PostHog
// replays the 60 days of events it keeps).
func (a *API) propertiesAtTime(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	did, pid := q.Get("distinct_id"), q.Get("person_id")
	// PostHog's sentences, which its clients may match on.
	switch {
	case did != "" && pid != "":
		return invalid("person_id", "Cannot provide both distinct_id and person_id - choose one.")
	case did == "" && pid == "":
		return invalid("distinct_id", "Must provide either distinct_id or person_id parameter.")
	}
	raw := q.Get("timestamp")
	if raw == "" {
		return invalid("timestamp", "timestamp parameter is required (ISO format: 2023-06-15T14:30:00Z).")
	}
	at, ok := parseAbsolute(raw)
	if !ok {
		return invalid("timestamp", "Invalid timestamp format. Use ISO format like 2023-06-15T14:30:00Z.")
	}
	setOnce, err := parseBool("include_set_once", q.Get("include_set_once"))
	if err != nil {
		return err
	}
	meta := pointInTime{QueriedTimestamp: at.Format(time.RFC3339Nano), IncludeSetOnce: setOnce, QueryMode: "person_id"}
	var p chstore.PersonRecord
	if did != "" {
		meta.DistinctIDUsed, meta.QueryMode = &did, "distinct_id"
		found, err := a.store.PersonsByDistinctID(r.Context(), proj.ID, []string{did})
		if err != nil {
			return err
		}
		var ok bool
		if p, ok = found[did]; !ok {
			return &Error{Status: http.StatusNotFound, Type: "invalid_request", Code: "not_found", Detail: fmt.Sprintf("Person with distinct_id %.200q not found.", did)}
		}
	} else {
		meta.PersonIDUsed = &pid
		if id, err := parseID(pid); err == nil {
			p, err = a.store.GetPerson(r.Context(), proj.ID, id)
			if err != nil {
				return err
			}
		} else if u, err := uuid.Parse(pid); err == nil {
			if p, err = a.store.GetPersonByUUID(r.Context(), proj.ID, u); err != nil {
				return err
			}
		} else {
			return invalid("person_id", "person_id must be a person's integer id or uuid.")
		}
	}
	// Folded as they stream: memory holds the properties, not the events.
	state := timeline.NewState()
	var last *eventstore.PersonEvent
	err = a.store.EachPersonEvent(r.Context(), proj.ID, p.DistinctIDs, true, at, func(e eventstore.PersonEvent) error {
		state.Fold(e.Properties, e.Timestamp, setOnce)
		meta.EventsApplied++
		last = &e
		return nil
	})
	if err != nil {
		return err
	}
	out := personJSON(p)
	out.Properties = state.Props
	meta.DistinctIDsQueried = append([]string{}, out.DistinctIDs...)
	meta.DistinctIDsCount = len(out.DistinctIDs)
	if last != nil {
		meta.LastEventApplied = &appliedEvent{UUID: last.UUID.String(), Event: last.Name, Timestamp: last.Timestamp.Format(time.RFC3339Nano)}
	}
	writeJSON(w, http.StatusOK, struct {
		person.Person
		Meta pointInTime `json:"point_in_time_metadata"`
	}{out, meta})
	return nil
}
