// Package transform runs pipeline transformations: the processEvent
// functions of a project's enabled plugin configs, in ascending order, on
// each event before it is folded and stored. Plugins are JavaScript (or
// TypeScript transpiled by esbuild) run by goja in a sandbox with no
// network, no file system and no require, a time bound per call and a
// call-depth bound. See docs/plugins.md ("Running transformations").
package transform

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/personhub/personhub/pkg/event"
)

// Event is PostHog's plugin event shape, what processEvent receives and
// must return.
type Event struct {
	Event      string         `json:"event"`
	DistinctID string         `json:"distinct_id"`
	Properties map[string]any `json:"properties"`
	Timestamp  string         `json:"timestamp,omitempty"`
	UUID       string         `json:"uuid"`
	TeamID     uint64         `json:"team_id"`
	Set        map[string]any `json:"$set,omitempty"`
	SetOnce    map[string]any `json:"$set_once,omitempty"`
	// text, when Properties is nil, is the properties as JSON text: the
	// ingester's events (fromEnvelopeText), which reach processEvent as
	// lazyProps and come back as text when the plugin kept the object.
	text propsText
	// parsed is the event as the ingester folds it, when a step's check
	// computed it (Parsed): encoding and parsing it again cost as much as
	// the check.
	parsed *event.Event
}

// materialized is e with its properties as a map (a copy when they were
// text): what JSON answers and the eager path need.
func (e Event) materialized() Event {
	if e.text != nil && e.Properties == nil {
		e.Properties, e.text = e.text.decoded(), nil
	}
	return e
}

// ErrShape is a processEvent result that is not an event; the event stays
// as the previous step gave it.
var ErrShape = errors.New("processEvent returned a value that is not an event")

// ErrIdentity is a result that changes team_id or uuid: refused, since the
// project and the event's identity (deduplication, deletions) are not a
// plugin's to change.
var ErrIdentity = errors.New("processEvent may not change team_id or uuid")

// decodeResult reads a processEvent result (JSON text) and checks it
// against the input: an object with a non-empty string event and string
// distinct_id, object properties/$set/$set_once, the same team_id and
// uuid. A missing team_id or uuid keeps the input's.
func decodeResult(text []byte, in Event) (Event, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(text, &raw); err != nil || raw == nil {
		return in, ErrShape
	}
	var out Event
	if err := json.Unmarshal(text, &out); err != nil {
		return in, fmt.Errorf("%w: %v", ErrShape, err)
	}
	_, hasTeam := raw["team_id"]
	_, hasUUID := raw["uuid"]
	return checkResult(out, hasTeam, hasUUID, in)
}

// checkResult checks a decoded result against the input (decodeResult).
func checkResult(out Event, hasTeam, hasUUID bool, in Event) (Event, error) {
	if out.Event == "" {
		return in, fmt.Errorf("%w: event must be a non-empty string", ErrShape)
	}
	if !hasTeam {
		out.TeamID = in.TeamID
	}
	if !hasUUID {
		out.UUID = in.UUID
	}
	if out.TeamID != in.TeamID || out.UUID != in.UUID {
		return in, ErrIdentity
	}
	if out.Properties == nil && out.text == nil {
		out.Properties = map[string]any{}
	}
	pe, err := checkEnvelope(out, in)
	if err != nil {
		return in, err
	}
	out.parsed = pe
	return out, nil
}
