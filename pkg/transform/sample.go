package transform

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// InputError is a sample event that cannot be run; Attr names the field.
type InputError struct{ Attr, Detail string }

func (e *InputError) Error() string { return e.Detail }

// Field is the input field the error is about.
func (e *InputError) Field() string { return e.Attr }

// DecodeSample reads a sample event for a dry run (PostHog's plugin event
// shape). event is required; team_id is always the project's; a missing
// uuid is a new one, a missing timestamp now, missing properties {}.
func DecodeSample(raw []byte, teamID uint64, now time.Time) (Event, error) {
	var in struct {
		Event
		TeamID json.RawMessage `json:"team_id"` // ignored: the project's
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&in); err != nil {
		return Event{}, &InputError{Attr: "event", Detail: "The body must be a plugin event: {event, distinct_id, properties, timestamp, uuid, $set, $set_once}; " + err.Error()}
	}
	ev := in.Event
	if ev.Event == "" {
		return Event{}, &InputError{Attr: "event", Detail: "event must be a non-empty string."}
	}
	if ev.UUID == "" {
		ev.UUID = uuid.NewString()
	} else if _, err := uuid.Parse(ev.UUID); err != nil {
		return Event{}, &InputError{Attr: "uuid", Detail: "uuid must be a UUID."}
	}
	if ev.Timestamp == "" {
		ev.Timestamp = now.UTC().Format(time.RFC3339Nano)
	} else if _, err := time.Parse(time.RFC3339Nano, ev.Timestamp); err != nil {
		return Event{}, &InputError{Attr: "timestamp", Detail: "timestamp must be an RFC 3339 time."}
	}
	if ev.Properties == nil {
		ev.Properties = map[string]any{}
	}
	ev.TeamID = teamID
	return ev, nil
}
