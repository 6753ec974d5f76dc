package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/event"
)

// uuidNamespace names the uuids given to events that arrive without one
// but with their own timestamp (see appendEnvelope).
var uuidNamespace = uuid.MustParse("6f3c1d52-8a0e-4b7f-9c61-2d5e8f4a7b30")

// Envelope is one event ready to publish: the contract's JSON
// (docs/events.md) and its uuid, the Nats-Msg-Id.
type Envelope struct {
	UUID string
	Data []byte
}

// appendEnvelope builds the envelope of the i-th event of a request and
// validates it with the ingester's own parser and reserved names, so that
// an event accepted here is never dead-lettered.
//
//   - event: the name; a missing name takes defaultEvent when set.
//   - distinct_id: distinct_id, else $distinct_id, else
//     properties.distinct_id, else properties.$distinct_id.
//   - uuid: kept when given; otherwise made up. When the event has its own
//     timestamp the made-up uuid is a hash of the project and the event's
//     exact text, so a library retrying the same body within JetStream's
//     duplicate window does not double the event; without a timestamp
//     two identical events are different events, and get random uuids.
//   - timestamp: see eventTime.
//   - properties: as sent, with the client's address as $ip (withClientIP),
//     and "$set_timestamp":true when the project has
//     timestamped_person_properties and the event a $set without one;
//     $set, $set_once, $unset: passed through as sent.
//
// The envelope is appended to arena, which is returned grown (unchanged
// on an error); its Data is a full slice of it.
func appendEnvelope(ev *Raw, i int, proj controlplane.Project, now time.Time, batch *Batch, arena []byte) (Envelope, []byte, error) {
	projectID, sentAt, defaultEvent := proj.ID, batch.SentAt, batch.DefaultEvent
	f := ev.Fields
	properties, addIP, err := withClientIP(ev, batch.ClientIP, proj.AnonymizeIPs)
	if err != nil {
		return Envelope{}, arena, eventError(Malformed, i, "%v", err)
	}
	name := f.Event
	if isNull(name) {
		if defaultEvent == "" {
			return Envelope{}, arena, eventError(Malformed, i, "event name is required")
		}
		name, _ = json.Marshal(defaultEvent)
	}
	if name[0] != '"' {
		return Envelope{}, arena, eventError(Malformed, i, "event name must be a string")
	}
	distinctID := firstPresent(f.DistinctID, f.DollarID)
	if distinctID == nil {
		distinctID = firstPresent(ev.Property("distinct_id"), ev.Property("$distinct_id"))
	}
	if distinctID == nil {
		return Envelope{}, arena, eventError(Malformed, i, "distinct_id is required (or properties.distinct_id)")
	}
	ts, hasTimestamp, err := eventTime(ev, now, sentAt)
	if err != nil {
		return Envelope{}, arena, eventError(Malformed, i, "%v", err)
	}
	var id string
	switch raw := f.UUID; {
	case isNull(raw) || string(raw) == `""`:
		if hasTimestamp {
			id = uuid.NewSHA1(uuidNamespace, append(strconv.AppendUint(nil, projectID, 10), ev.JSON...)).String()
		} else {
			u, err := uuid.NewV7()
			if err != nil {
				return Envelope{}, arena, err
			}
			id = u.String()
		}
	default:
		if err := unquote(raw, &id); err != nil {
			return Envelope{}, arena, eventError(Malformed, i, "uuid must be a string")
		}
		if _, err := uuid.Parse(id); err != nil {
			return Envelope{}, arena, eventError(Malformed, i, "uuid %q does not parse", id)
		}
	}

	// The envelope is appended to the request's arena (see arena.go): one
	// buffer for all of a request's envelopes instead of one each.
	start := len(arena)
	env := envelopeParts{id: id, name: name, distinctID: distinctID, ts: ts, properties: properties, addIP: addIP, ip: batch.ClientIP}
	b, parsed, err := env.appendTo(arena, i, &f)
	if err != nil {
		return Envelope{}, arena, err
	}
	if proj.TimestampedPersonProperties && len(parsed.Set) > 0 {
		// The project imports history: the event's $set is made
		// timestamp-aware in the log itself, so a replay folds it the
		// same whatever the setting is then (docs/events.md). An event
		// with its own $set_timestamp keeps it.
		if _, has := parsed.Properties[event.PropSetTimestamp]; !has {
			env.stamp = true
			if b, parsed, err = env.appendTo(arena[:start], i, &f); err != nil {
				return Envelope{}, arena, err
			}
		}
	}
	data := b[start:len(b):len(b)]
	// Person writes (deleting, splitting, writing in a key's name) are the
	// API's commands; the public token grants none of them.
	if reason := parsed.Reserved(); reason != "" {
		return Envelope{}, arena, eventError(Malformed, i, "event %q: %s (personal API key routes only)", parsed.Event, reason)
	}
	return Envelope{UUID: id, Data: data}, b, nil
}

// envelopeParts are the fields of an envelope as appendEnvelope settled
// them.
type envelopeParts struct {
	id               string
	name, distinctID json.RawMessage
	ts               time.Time
	properties       json.RawMessage // as withClientIP gives it
	addIP            bool
	ip               string
	// stamp puts "$set_timestamp":true first in the properties (the
	// project's timestamped_person_properties).
	stamp bool
}

// appendTo appends the envelope of the i-th event (with f its top-level
// fields) to b, and returns b grown and the envelope parsed with the
// ingester's parser.
func (e *envelopeParts) appendTo(b []byte, i int, f *Fields) ([]byte, event.Event, error) {
	start := len(b)
	b = append(b, `{"uuid":`...)
	b = appendString(b, e.id)
	b = append(b, `,"event":`...)
	b = append(b, e.name...)
	b = append(b, `,"distinct_id":`...)
	b = append(b, e.distinctID...)
	// RFC 3339 never holds a character JSON escapes.
	b = append(b, `,"timestamp":"`...)
	b = e.ts.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for _, kv := range [...]struct {
		key string
		v   json.RawMessage
	}{{`,"properties":`, e.properties}, {`,"$set":`, f.Set}, {`,"$set_once":`, f.SetOnce}, {`,"$unset":`, f.Unset}} {
		switch {
		case kv.key == `,"properties":` && (e.addIP || e.stamp):
			rest := kv.v // addIP: what follows the opening brace
			if !e.addIP && !isNull(rest) {
				// An object: the parse of the envelope without the
				// stamp said so.
				rest = rest[skipSpace(rest)+1:]
				rest = rest[skipSpace(rest):]
			}
			b = appendFirst(append(b, kv.key...), e.addIP, e.ip, e.stamp, rest)
		case !isNull(kv.v):
			b = append(b, kv.key...)
			b = append(b, kv.v...)
		}
	}
	b = append(b, '}')
	data := b[start:len(b):len(b)]
	if len(data) > MaxEventBytes {
		return b, event.Event{}, eventError(TooLarge, i, "is %d bytes, the limit is %d", len(data), MaxEventBytes)
	}
	// The envelope is ours and never written again: Parse need not copy it.
	parsed, err := event.ParseOwned(data)
	if err != nil {
		var evErr *event.Error
		if errors.As(err, &evErr) {
			return b, event.Event{}, eventError(Malformed, i, "%s", evErr.Reason)
		}
		return b, event.Event{}, eventError(Malformed, i, "%v", err)
	}
	return b, parsed, nil
}

// withClientIP says what an event's properties are published as: as
// sent, with the client's address added as $ip when ip is known and the
// event has no $ip of its own (server libraries forwarding their users'
// events set it), as PostHog stores it. A project that anonymizes
// addresses gets none, and a $ip sent is dropped (props is then the
// object written again).
//
// addIP: $ip goes first, and props is what follows the sent object's
// opening brace (nil when there are no properties): appendFirst
// writes both into the envelope, with no copy of the properties between.
// The common event is looked at without decoding its properties: no
// "$ip" in their text and no escape that could spell it.
func withClientIP(ev *Raw, ip string, anonymize bool) (props json.RawMessage, addIP bool, err error) {
	props = ev.Fields.Properties
	if ip == "" && !anonymize {
		return props, false, nil
	}
	if isNull(props) {
		return props, !anonymize, nil
	}
	start := skipSpace(props)
	if start >= len(props) || props[start] != '{' {
		return props, false, nil // not an object: the validation says so
	}
	has := (bytes.Contains(props, []byte(`$ip`)) || bytes.Contains(props, []byte(`\u`))) && ev.Property("$ip") != nil
	switch {
	case anonymize && has:
		// Rare: a client sending $ip to a project that keeps none. The
		// object is written again without it (keys sorted: stored
		// properties are compared as JSON, never as text).
		all := map[string]json.RawMessage{}
		if err := json.Unmarshal(props, &all); err != nil {
			return nil, false, fmt.Errorf("properties: %v", err)
		}
		delete(all, "$ip")
		// Without HTML escapes: the object must not grow past the
		// envelope limit that the event as sent met.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(all); err != nil {
			return nil, false, fmt.Errorf("properties: %v", err)
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), false, nil
	case anonymize || has:
		return props, false, nil
	}
	rest := props[start+1:]
	return rest[skipSpace(rest):], true, nil
}

// appendFirst appends a properties object with $ip (when addIP) and
// "$set_timestamp":true (when stamp) first, then rest: what followed the
// object's opening brace (nil: no properties).
func appendFirst(b []byte, addIP bool, ip string, stamp bool, rest json.RawMessage) []byte {
	b = append(b, '{')
	if addIP {
		b = appendString(append(b, `"$ip":`...), ip)
	}
	if stamp {
		if addIP {
			b = append(b, ',')
		}
		b = append(b, `"$set_timestamp":true`...)
	}
	if isNull(rest) || rest[0] == '}' {
		return append(b, '}')
	}
	return append(append(b, ','), rest...)
}

// skipSpace is the index of b's first byte that is not JSON white space.
func skipSpace(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// eventTime applies PostHog's clock-skew rules, with now the time the
// request arrived:
//
//   - a timestamp with the request's sent_at: now - (sent_at - timestamp),
//     the client's clock error taken out (unless properties.$ignore_sent_at
//     is true);
//   - a timestamp alone: as sent;
//   - no timestamp, an offset (milliseconds before sending): now - offset;
//   - neither: now.
//
// A result more than 23 hours ahead of now becomes now. hasTimestamp
// reports whether the event carried its own timestamp.
func eventTime(ev *Raw, now, sentAt time.Time) (t time.Time, hasTimestamp bool, err error) {
	if raw := ev.Fields.Timestamp; !isNull(raw) {
		var s string
		if err := unquote(raw, &s); err != nil {
			return time.Time{}, false, errors.New("timestamp must be an RFC 3339 string")
		}
		if t, err = event.ParseTime(s); err != nil {
			return time.Time{}, false, errors.New("timestamp " + strconv.Quote(s) + ": " + err.Error())
		}
		if !sentAt.IsZero() && string(ev.Property("$ignore_sent_at")) != "true" {
			t = now.Add(t.Sub(sentAt))
		}
		hasTimestamp = true
	} else if raw := ev.Fields.Offset; !isNull(raw) {
		ms, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return time.Time{}, false, errors.New("offset must be a number of milliseconds")
		}
		t = now.Add(-time.Duration(ms * float64(time.Millisecond)))
	} else {
		t = now
	}
	if t.After(now.Add(maxFuture)) {
		t = now
	}
	return t.UTC(), hasTimestamp, nil
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// firstPresent returns the first value that is neither null nor "".
func firstPresent(values ...json.RawMessage) json.RawMessage {
	for _, v := range values {
		if !isNull(v) && string(v) != `""` {
			return v
		}
	}
	return nil
}

// appendString appends s as json.Marshal would: as it is, quoted, when it
// holds nothing Marshal escapes (uuids never do).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s)
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// unquote is json.Unmarshal(raw, s) without its validating pass for a
// string of printable ASCII without escapes, whose bytes are its value.
func unquote(raw json.RawMessage, s *string) error {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		plain := true
		for _, c := range raw[1 : n-1] {
			if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain {
			*s = string(raw[1 : n-1])
			return nil
		}
	}
	return json.Unmarshal(raw, s)
}
