package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// FromEnvelope is a parsed envelope of project in the plugin event shape:
// every property decoded (numbers kept exact), the top-level $set and
// $set_once as the plugin's $set and $set_once, and a top-level $unset
// moved into properties (the plugin shape has no top-level $unset).
func FromEnvelope(project uint64, ev *event.Event) (Event, error) {
	out := Event{Event: ev.Event, DistinctID: ev.DistinctID, UUID: ev.UUID.String(), TeamID: project,
		Timestamp: ev.Timestamp.UTC().Format(time.RFC3339Nano)}
	if err := decodeObject(ev.PropertiesRaw, &out.Properties); err != nil {
		return Event{}, fmt.Errorf("properties: %w", err)
	}
	if out.Properties == nil {
		out.Properties = map[string]any{}
	}
	set, setOnce, unset := ev.TopLevel()
	if err := decodeObject(set, &out.Set); err != nil {
		return Event{}, fmt.Errorf("$set: %w", err)
	}
	if err := decodeObject(setOnce, &out.SetOnce); err != nil {
		return Event{}, fmt.Errorf("$set_once: %w", err)
	}
	if u := bytes.TrimSpace(unset); len(u) > 0 && string(u) != "null" {
		out.Properties["$unset"] = ev.Unset
	}
	return out, nil
}

// fromEnvelopeText is FromEnvelope with the properties kept as text
// (Event.text), for the ingester: decoded only as far as a plugin reads
// them (lazyProps). An envelope with a top-level $unset, which moves into
// the properties, is decoded (FromEnvelope).
func fromEnvelopeText(project uint64, ev *event.Event) (Event, error) {
	_, _, unset := ev.TopLevel()
	if u := bytes.TrimSpace(unset); len(u) > 0 && string(u) != "null" {
		return FromEnvelope(project, ev)
	}
	out := Event{Event: ev.Event, DistinctID: ev.DistinctID, UUID: ev.UUID.String(), TeamID: project,
		Timestamp: ev.Timestamp.UTC().Format(time.RFC3339Nano), text: propsText(ev.PropertiesRaw)}
	if t := bytes.TrimSpace(ev.PropertiesRaw); len(t) == 0 || string(t) == "null" {
		out.text = propsText("{}")
	}
	set, setOnce, _ := ev.TopLevel()
	if err := decodeObject(set, &out.Set); err != nil {
		return Event{}, fmt.Errorf("$set: %w", err)
	}
	if err := decodeObject(setOnce, &out.SetOnce); err != nil {
		return Event{}, fmt.Errorf("$set_once: %w", err)
	}
	return out, nil
}

func decodeObject(raw json.RawMessage, into *map[string]any) error {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	m, err := event.DecodeObject(raw)
	*into = m
	return err
}

// Envelope is the event as an envelope the ingester parses (event.Parse):
// the plugin shape is a superset of it (team_id is ignored there).
func (e Event) Envelope() ([]byte, error) { return json.Marshal(e.materialized()) }

// parts are the event as event.FromParts takes it: the properties' text
// as the plugin left it, or the map written once.
func (e Event) parts() (event.Parts, error) {
	p := event.Parts{UUID: e.UUID, Event: e.Event, DistinctID: e.DistinctID, Timestamp: e.Timestamp, Properties: json.RawMessage(e.text)}
	var err error
	if e.text == nil || e.Properties != nil {
		if p.Properties, err = json.Marshal(e.Properties); err != nil {
			return p, err
		}
	}
	if len(e.Set) > 0 {
		if p.Set, err = json.Marshal(e.Set); err != nil {
			return p, err
		}
	}
	if len(e.SetOnce) > 0 {
		p.SetOnce, err = json.Marshal(e.SetOnce)
	}
	return p, err
}

// Parsed is the event as the ingester folds it. An event a plugin returned
// that does not parse, or that carries a name or property reserved for
// the API's commands, is refused: a transformation must not forge a
// person write (ErrShape).
func (e Event) Parsed() (event.Event, error) {
	if e.parsed != nil {
		return *e.parsed, nil
	}
	parts, err := e.parts()
	if err != nil {
		return event.Event{}, fmt.Errorf("%w: %v", ErrShape, err)
	}
	pe, err := event.FromParts(parts)
	if err != nil {
		return event.Event{}, fmt.Errorf("%w: %v", ErrShape, err)
	}
	if r := pe.Reserved(); r != "" {
		return event.Event{}, fmt.Errorf("%w: %s", ErrShape, r)
	}
	return pe, nil
}

// checkEnvelope refuses a result the ingester could not store (see
// Parsed) and returns it parsed, or nil when the check had to stand in
// for a field. Fields the plugin left as they came are not held against
// it: a dry run's sample may lack a distinct_id.
func checkEnvelope(out, in Event) (*event.Event, error) {
	stand := out.DistinctID == in.DistinctID && out.DistinctID == ""
	if stand {
		out.DistinctID = "unchanged"
	}
	out.parsed = nil
	pe, err := out.Parsed()
	if err != nil || stand {
		return nil, err
	}
	return &pe, nil
}
