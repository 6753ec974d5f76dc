package capture

import (
	"bytes"
	"encoding/json"

	"github.com/personhub/personhub/pkg/event"
)

// The request's JSON in one pass of pkg/event's scanner (the ingester's
// own, exactly as strict as encoding/json): the body's top-level fields,
// each event's span and each event's Fields. encoding/json took a third of
// a /batch/ request's CPU (docs/performance-history.md,
// its capture profile of 2026-11-24 08:29): it validated the
// whole body, decoded it into spans, then validated and decoded every event
// again by reflection. scanBody decides nothing itself: whatever it does
// not read plainly (invalid JSON, a key with escapes or outside printable
// ASCII, a key equal to a field's name but for case, which encoding/json
// would match, a repeated request field, batch not a list) makes it give
// up, or leave that one event to decodeRaw, so every error and every
// unusual input gets encoding/json's answer. FuzzDecode holds the two to
// the same result.

// topFields are the request-level fields splitJSON reads.
type topFields struct {
	apiKey, token, sentAt json.RawMessage
}

// scanBody reads a JSON body that starts with '{' or '['. ok is false
// when the reference (splitJSON, then decodeRaw per event) must decide;
// slow[i] when events[i] holds only its span, for decodeRaw.
func scanBody(body []byte) (top topFields, events []Raw, slow []bool, ok bool) {
	return scanBodyInto(body, nil)
}

// scanBodyInto is scanBody appending the events to room[:0] when it is
// large enough for a body of ~250-byte events (a slice of Raws grown by
// doubling was a fifth of the bytes a request allocated).
func scanBodyInto(body []byte, room []Raw) (top topFields, events []Raw, slow []bool, ok bool) {
	if len(body) == 0 {
		return top, nil, nil, false
	}
	if n := min(len(body)/256+1, 1024); cap(room) >= n {
		events = room[:0]
	} else {
		events = make([]Raw, 0, n)
	}
	slow = make([]bool, 0, cap(events))
	collect := func(b []byte, i, depth int) (int, bool) {
		return event.WalkArray(b, i, depth, func(v int) (int, bool) {
			ev, end, fast, ok := scanEvent(b, v, depth+1)
			if !ok {
				return 0, false
			}
			events = append(events, ev)
			slow = append(slow, !fast)
			return end, true
		})
	}
	switch body[0] {
	case '[':
		end, ok := collect(body, 0, 0)
		return top, events, slow, ok && end == len(body)
	case '{':
		var batch []byte
		seen := 0
		end, ok := event.WalkObject(body, 0, 0, func(key []byte, plain bool, v int) (int, bool) {
			if !plain {
				return 0, false
			}
			name := key[1 : len(key)-1]
			var dst *json.RawMessage
			var bit int
			switch string(name) {
			case "batch":
				if v >= len(body) || body[v] != '[' || seen&1 != 0 {
					return 0, false // null, a wrong type or a repeat: the reference's
				}
				seen |= 1
				end, ok := collect(body, v, 1)
				if ok {
					batch = body[v:end]
				}
				return end, ok
			case "api_key":
				dst, bit = &top.apiKey, 2
			case "token":
				dst, bit = &top.token, 4
			case "sent_at":
				dst, bit = &top.sentAt, 8
			default:
				if foldsTo(name, "batch", "api_key", "token", "sent_at") {
					return 0, false
				}
				return event.SkipValue(body, v, 1)
			}
			if seen&bit != 0 {
				return 0, false
			}
			seen |= bit
			end, ok := event.SkipValue(body, v, 1)
			if ok {
				*dst = body[v:end:end]
			}
			return end, ok
		})
		if !ok || end != len(body) {
			return top, nil, nil, false
		}
		if batch == nil {
			// A single event: its own fields, read by the reference's rules.
			ev, _, fast, ok := scanEvent(body, 0, 0)
			return top, []Raw{ev}, []bool{!fast}, ok
		}
		return top, events, slow, true
	}
	return top, nil, nil, false
}

// scanEvent reads the value at b[i], an element of the batch: its span,
// and its Fields when it is an object whose keys the scanner reads
// plainly (fast). Anything else is left to decodeRaw.
func scanEvent(b []byte, i, depth int) (ev Raw, end int, fast, ok bool) {
	if i >= len(b) || b[i] != '{' {
		if end, ok = event.SkipValue(b, i, depth); !ok {
			return Raw{}, 0, false, false
		}
		return Raw{JSON: b[i:end:end]}, end, false, true
	}
	fast = true
	end, ok = event.WalkObject(b, i, depth, func(key []byte, plain bool, v int) (int, bool) {
		end, ok := event.SkipValue(b, v, depth+1)
		if !ok {
			return 0, false
		}
		if !plain {
			fast = false
			return end, true
		}
		if dst := ev.Fields.field(key[1 : len(key)-1]); dst != nil {
			*dst = b[v:end:end] // the last of repeated keys, as encoding/json
		} else if foldsTo(key[1:len(key)-1], fieldNames[:]...) {
			fast = false
		}
		return end, true
	})
	if !ok {
		return Raw{}, 0, false, false
	}
	ev.JSON = b[i:end:end]
	if !fast {
		ev.Fields = Fields{}
	}
	return ev, end, fast, true
}

// fieldNames are Fields' JSON names, as in its tags.
var fieldNames = [...]string{"event", "distinct_id", "$distinct_id", "uuid", "timestamp", "offset",
	"properties", "$set", "$set_once", "$unset", "api_key", "token", "$token"}

// field is the Fields member a key names exactly, or nil.
func (f *Fields) field(name []byte) *json.RawMessage {
	switch string(name) {
	case "event":
		return &f.Event
	case "distinct_id":
		return &f.DistinctID
	case "$distinct_id":
		return &f.DollarID
	case "uuid":
		return &f.UUID
	case "timestamp":
		return &f.Timestamp
	case "offset":
		return &f.Offset
	case "properties":
		return &f.Properties
	case "$set":
		return &f.Set
	case "$set_once":
		return &f.SetOnce
	case "$unset":
		return &f.Unset
	case "api_key":
		return &f.APIKey
	case "token":
		return &f.Token
	case "$token":
		return &f.DollarToken
	}
	return nil
}

// foldsTo reports whether a plain (ASCII) key equals one of names but for
// case: encoding/json would take it for that field.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(n) == len(key) && bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}
