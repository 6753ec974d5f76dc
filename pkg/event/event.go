// Package event defines the JSON envelope that capture pipelines publish to
// JetStream and parses it strictly: anything the ingester cannot fold is
// rejected here with a reason, so it can be dead-lettered instead of
// blocking the stream.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// MaxSize is the largest envelope accepted, in bytes. The stream is
// configured with the same limit, so a larger message never reaches the
// ingester; the check here protects direct callers of Parse.
const MaxSize = 1 << 20

// MaxDistinctIDLength bounds distinct ids (PostHog uses 400 characters).
const MaxDistinctIDLength = 400

// Event is a parsed envelope. Values are decoded with json.Number so that
// numbers keep their exact text.
type Event struct {
	UUID       uuid.UUID
	Event      string
	DistinctID string
	Timestamp  time.Time
	// Properties holds only the properties the fold reads (FoldKeys);
	// the whole object stays in PropertiesRaw. Decoding every property of
	// every event was a third of the ingester's time.
	//
	// Properties, Set and SetOnce are nil when empty (most events): three
	// empty maps per event were a measurable share of the ingester's
	// allocations. Read them freely; never write to them.
	Properties map[string]any
	// Set, SetOnce and Unset merge the top-level fields with those found
	// inside properties; top-level wins on conflict.
	Set     map[string]any
	SetOnce map[string]any
	Unset   []string
	// PropertiesRaw is the properties object as received (nil if absent),
	// in memory of Parse's own. Never write to it: StoredProperties may
	// return a string sharing its bytes.
	PropertiesRaw json.RawMessage
	// top holds $set, $set_once and $unset as received at the top level.
	top [3]json.RawMessage
}

// FoldKeys are the properties the fold reads (and the reserved ones, which
// Reserved looks for); Parse decodes only these.
var FoldKeys = append([]string{"$set", "$set_once", "$unset", "$anon_distinct_id", "alias", PropSetTimestamp}, ReservedProperties...)

// wire is the envelope as published.
type wire struct {
	UUID       *string         `json:"uuid"`
	Event      *string         `json:"event"`
	DistinctID json.RawMessage `json:"distinct_id"`
	Timestamp  *string         `json:"timestamp"`
	Properties json.RawMessage `json:"properties"`
	Set        json.RawMessage `json:"$set"`
	SetOnce    json.RawMessage `json:"$set_once"`
	Unset      json.RawMessage `json:"$unset"`
}

// Error says why a message can never be folded. The ingester dead-letters
// it with Reason in a header.
type Error struct{ Reason string }

func (e *Error) Error() string { return "invalid event: " + e.Reason }

func invalid(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// Parse decodes and validates one envelope. The common envelope is read by
// the one-pass scanner (scan.go, envelope.go); anything else by
// parseReference. Both give the same Event or the same error.
func Parse(data []byte) (Event, error) { return parse(data, false) }

// ParseOwned is Parse for a message the caller never writes again (a
// JetStream message's own payload, capture's envelope): the Event's raw
// values (PropertiesRaw, StoredProperties' string) share data instead of a
// copy of it, which was the largest allocation per event (the properties
// are most of a message) for messages that stay alive until acknowledged
// anyway. FuzzParse holds it to Parse.
func ParseOwned(data []byte) (Event, error) { return parse(data, true) }

func parse(data []byte, owned bool) (Event, error) {
	if len(data) > MaxSize {
		return Event{}, invalid("message is %d bytes, limit is %d", len(data), MaxSize)
	}
	if w, props, ok := scanEnvelope(data, owned); ok {
		return build(w, props.decode, decodeFast)
	}
	return parseReference(data)
}

// parseReference is Parse on encoding/json alone: the fallback for what
// the scanner leaves, and the oracle the scanner is tested against.
func parseReference(data []byte) (Event, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return Event{}, invalid("%s has the wrong type (%s)", typeErr.Field, typeErr.Value)
		}
		return Event{}, invalid("not a JSON object: %v", err)
	}
	return build(w, foldProperties, decodeStd)
}

// build validates a decoded envelope. props decodes the properties the
// fold reads; decode decodes $set, $set_once and $unset values.
func build(w wire, props func(json.RawMessage) (map[string]any, error), decode func([]byte) (any, error)) (Event, error) {
	ev := Event{PropertiesRaw: w.Properties}
	if w.UUID == nil {
		return Event{}, invalid("uuid is required")
	}
	id, err := uuid.Parse(*w.UUID)
	if err != nil {
		return Event{}, invalid("uuid %q does not parse", *w.UUID)
	}
	ev.UUID = id
	if w.Event == nil || *w.Event == "" {
		return Event{}, invalid("event name is required")
	}
	if len(*w.Event) > 200 {
		return Event{}, invalid("event name is longer than 200 bytes")
	}
	ev.Event = *w.Event
	if ev.DistinctID, err = parseDistinctID(w.DistinctID); err != nil {
		return Event{}, err
	}
	if w.Timestamp == nil {
		return Event{}, invalid("timestamp is required")
	}
	if ev.Timestamp, err = ParseTime(*w.Timestamp); err != nil {
		return Event{}, invalid("timestamp %q: %v", *w.Timestamp, err)
	}
	if ev.Properties, err = props(w.Properties); err != nil {
		return Event{}, err
	}
	ev.top = [3]json.RawMessage{w.Set, w.SetOnce, w.Unset}
	if ev.Set, err = mergedObject(w.Set, ev.Properties["$set"], "$set", decode); err != nil {
		return Event{}, err
	}
	if ev.SetOnce, err = mergedObject(w.SetOnce, ev.Properties["$set_once"], "$set_once", decode); err != nil {
		return Event{}, err
	}
	if ev.Unset, err = mergedUnset(w.Unset, ev.Properties["$unset"], decode); err != nil {
		return Event{}, err
	}
	ev.Properties, ev.Set, ev.SetOnce = nilIfEmpty(ev.Properties), nilIfEmpty(ev.Set), nilIfEmpty(ev.SetOnce)
	return ev, nil
}

// nilIfEmpty makes an empty map nil, so that every path through build
// gives the same Event (the scanner and the reference parser must agree).
func nilIfEmpty(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// foldProperties checks that properties is an object and decodes the
// FoldKeys it holds. Most events hold none: a byte search finds that
// without decoding anything.
func foldProperties(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, invalid("properties must be an object")
	}
	// A key written with escapes (\u0024actor) is found only by decoding.
	found := bytes.Contains(raw, []byte(`\u`))
	for _, k := range FoldKeys {
		if bytes.Contains(raw, []byte(k)) {
			found = true
			break
		}
	}
	if !found {
		return nil, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, invalid("properties must be an object")
	}
	out := map[string]any{}
	for _, k := range FoldKeys {
		v, ok := all[k]
		if !ok {
			continue
		}
		val, err := decodeStd(v)
		if err != nil {
			return nil, invalid("properties.%s: %v", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// parseDistinctID accepts a JSON string or number (some SDKs send numeric
// ids) and returns its text.
func parseDistinctID(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalid("distinct_id is required")
	}
	var s string
	switch raw[0] {
	case '"':
		var err error
		if s, err = unquote(raw); err != nil {
			return "", invalid("distinct_id: %v", err)
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		s = string(raw) // a JSON number, validated by the envelope's decode
	default:
		return "", invalid("distinct_id must be a string or a number")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", invalid("distinct_id is empty")
	}
	if len(s) > MaxDistinctIDLength {
		return "", invalid("distinct_id is longer than %d bytes", MaxDistinctIDLength)
	}
	return s, nil
}

// ParseTime accepts RFC 3339 with or without fraction and zone, and
// returns UTC.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			// The year as stored, in UTC: 1970-01-01 with a positive
			// offset is before the epoch, which a DateTime wraps to 2106.
			if t = t.UTC(); t.Year() < 1970 || t.Year() > 2105 {
				return time.Time{}, errors.New("year out of range 1970-2105 (UTC)")
			}
			return t, nil
		}
	}
	return time.Time{}, errors.New("want RFC 3339")
}

func object(raw json.RawMessage, field string, decode func([]byte) (any, error)) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := decode(raw)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, invalid("%s must be an object", field)
	}
	return m, nil
}

// mergedObject combines the top-level field with the one inside properties;
// top-level keys win.
func mergedObject(top json.RawMessage, inner any, field string, decode func([]byte) (any, error)) (map[string]any, error) {
	if inner == nil {
		// The common case: nothing to merge, and object's map is new.
		return object(top, field, decode)
	}
	m, ok := inner.(map[string]any)
	if !ok {
		return nil, invalid("properties.%s must be an object", field)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	m, err := object(top, field, decode)
	if err != nil {
		return nil, err
	}
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

func mergedUnset(top json.RawMessage, inner any, decode func([]byte) (any, error)) ([]string, error) {
	var all []string
	add := func(v any, where string) error {
		switch t := v.(type) {
		case nil:
		case []any:
			for _, k := range t {
				s, ok := k.(string)
				if !ok {
					return invalid("%s must list string keys", where)
				}
				all = append(all, s)
			}
		case map[string]any:
			for k := range t {
				all = append(all, k)
			}
		default:
			return invalid("%s must be a list of keys or an object", where)
		}
		return nil
	}
	if err := add(inner, "properties.$unset"); err != nil {
		return nil, err
	}
	if len(top) > 0 {
		v, err := decode(top)
		if err != nil {
			return nil, invalid("$unset: %v", err)
		}
		if err := add(v, "$unset"); err != nil {
			return nil, err
		}
	}
	all = dedupe(all)
	sort.Strings(all)
	return all, nil
}

func dedupe(keys []string) []string {
	if len(keys) < 2 {
		return keys
	}
	seen := make(map[string]bool, len(keys))
	out := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// TopLevel returns $set, $set_once and $unset as received at the top level
// of the envelope (nil when absent): a transformation gets the event in
// PostHog's plugin shape, where $set and $set_once are top-level fields.
func (e *Event) TopLevel() (set, setOnce, unset json.RawMessage) {
	return e.top[0], e.top[1], e.top[2]
}
