package event

import (
	"bytes"
	"encoding/json"
)

// envelopeFields are wire's JSON names, in the order of the fields
// scanEnvelope fills.
var envelopeFields = [...]string{"uuid", "event", "distinct_id", "timestamp", "properties", "$set", "$set_once", "$unset"}

const (
	fieldUUID = iota
	fieldEvent
	fieldDistinctID
	fieldTimestamp
	fieldProperties
	fieldSet
	fieldSetOnce
	fieldUnset
)

// propScan is what scanEnvelope learned about properties while
// validating it: where the FoldKeys' values are.
type propScan struct {
	object bool // properties is an object and was walked
	// escaped: a key of properties is written with escapes, so matching
	// FoldKeys needs decoding (foldProperties does it).
	escaped bool
	// values[k] is FoldKeys[k]'s value in properties (the last one when
	// a key repeats, as encoding/json keeps), nil when absent.
	values [][]byte
}

// decode returns the FoldKeys properties holds, as foldProperties does.
func (p *propScan) decode(raw json.RawMessage) (map[string]any, error) {
	if !p.object || p.escaped {
		return foldProperties(raw)
	}
	var out map[string]any // nil when properties hold no FoldKey
	for k, v := range p.values {
		if v == nil {
			continue
		}
		val, err := decodeFast(v)
		if err != nil {
			return nil, invalid("properties.%s: %v", FoldKeys[k], err)
		}
		if out == nil {
			out = map[string]any{}
		}
		out[FoldKeys[k]] = val
	}
	return out, nil
}

// scanEnvelope reads the envelope in one pass. ok is false for anything
// it leaves to parseReference: invalid JSON, a top level that is not an
// object, an envelope field repeated, written with escapes or in another
// case (encoding/json matches names case-insensitively), or of a type
// wire cannot hold.
//
// owned: the caller never writes data again, so the raw values the Event
// keeps may share it (ParseOwned).
func scanEnvelope(data []byte, owned bool) (w wire, props *propScan, ok bool) {
	var spans [len(envelopeFields)][]byte
	props = &propScan{}
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return wire{}, nil, false
	}
	end, ok := walkObject(data, i, 0, func(key []byte, plain bool, v int) (int, bool) {
		name := key[1 : len(key)-1]
		f := -1
		for j, n := range envelopeFields {
			if string(name) == n {
				f = j
				break
			}
		}
		if f < 0 {
			if !plain || isFieldFold(name) {
				return 0, false
			}
			return skipValue(data, v, 1)
		}
		if spans[f] != nil {
			return 0, false
		}
		var end int
		var ok bool
		switch {
		case f == fieldProperties && v < len(data) && data[v] == '{':
			props.object = true
			end, ok = walkObject(data, v, 1, props.member(data))
		case f == fieldUUID || f == fieldEvent || f == fieldTimestamp:
			// *string fields: a string or null, else a type error.
			if v >= len(data) || data[v] != '"' && data[v] != 'n' {
				return 0, false
			}
			end, ok = skipValue(data, v, 1)
		default:
			end, ok = skipValue(data, v, 1)
		}
		if !ok {
			return 0, false
		}
		spans[f] = data[v:end]
		return end, true
	})
	if !ok || skipSpace(data, end) != len(data) {
		return wire{}, nil, false
	}
	// The three strings live in one array: one allocation, not three.
	strs := new([3]string)
	for j, f := range [...]int{fieldUUID, fieldEvent, fieldTimestamp} {
		if spans[f] == nil || spans[f][0] == 'n' {
			continue
		}
		var err error
		if strs[j], err = unquote(spans[f]); err != nil {
			return wire{}, nil, false
		}
		switch f {
		case fieldUUID:
			w.UUID = &strs[j]
		case fieldEvent:
			w.Event = &strs[j]
		default:
			w.Timestamp = &strs[j]
		}
	}
	w.DistinctID = spans[fieldDistinctID]
	if owned {
		share := func(f int) json.RawMessage {
			if spans[f] == nil {
				return nil
			}
			return spans[f][:len(spans[f]):len(spans[f])]
		}
		w.Properties, w.Set, w.SetOnce, w.Unset = share(fieldProperties), share(fieldSet), share(fieldSetOnce), share(fieldUnset)
		return w, props, true
	}
	// The raw values the Event keeps are copied into one buffer: the
	// caller's message may be reused.
	n := 0
	for _, f := range [...]int{fieldProperties, fieldSet, fieldSetOnce, fieldUnset} {
		n += len(spans[f])
	}
	buf := make([]byte, 0, n)
	keep := func(f int) json.RawMessage {
		if spans[f] == nil {
			return nil
		}
		start := len(buf)
		buf = append(buf, spans[f]...)
		return buf[start:len(buf):len(buf)]
	}
	w.Properties, w.Set, w.SetOnce, w.Unset = keep(fieldProperties), keep(fieldSet), keep(fieldSetOnce), keep(fieldUnset)
	return w, props, true
}

// member returns the walkObject callback for properties' members.
func (p *propScan) member(data []byte) func(key []byte, plain bool, v int) (int, bool) {
	return func(key []byte, plain bool, v int) (int, bool) {
		end, ok := skipValue(data, v, 2)
		if !ok {
			return 0, false
		}
		name := key[1 : len(key)-1]
		if !plain && bytes.IndexByte(name, '\\') >= 0 {
			p.escaped = true
			return end, true
		}
		for k, fk := range FoldKeys {
			if string(name) == fk {
				if p.values == nil {
					p.values = make([][]byte, len(FoldKeys))
				}
				p.values[k] = data[v:end]
				break
			}
		}
		return end, true
	}
}

// isFieldFold reports whether an unknown top-level key would still match
// an envelope field in encoding/json, which compares names
// case-insensitively (with Unicode folding, so any non-ASCII key is
// left to it as well).
func isFieldFold(name []byte) bool {
	for _, n := range envelopeFields {
		if bytes.EqualFold(name, []byte(n)) {
			return true
		}
	}
	return false
}
