package event

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Parts are an event's fields as a pipeline transformation gives them
// back (pkg/transform): strings as its JavaScript held them, the objects
// as JSON text.
type Parts struct {
	UUID, Event, DistinctID string
	Timestamp               string // "": absent
	// Properties is a JSON object (or null); nil: absent.
	Properties json.RawMessage
	// Set and SetOnce are the top-level $set and $set_once; nil: absent.
	Set, SetOnce json.RawMessage
}

// FromParts is Parse(p.Envelope()) without writing the envelope and
// reading it back, which was a sixth of a transformed event's cost in the
// ingester (the transformations figure, docs/performance.md): the same validation (build), the
// same Event, the same errors' kind. FuzzFromParts holds it to Parse. The
// Event keeps p's JSON slices: the caller must not change them.
func FromParts(p Parts) (Event, error) {
	if n := p.sizeBound(); n > MaxSize {
		if n = len(p.Envelope()); n > MaxSize {
			return Event{}, invalid("message is %d bytes, limit is %d", n, MaxSize)
		}
	}
	props, set, setOnce := trimRaw(p.Properties), trimRaw(p.Set), trimRaw(p.SetOnce)
	scan := &propScan{}
	if len(props) > 0 && props[0] == '{' {
		end, ok := walkObject(props, 0, 1, scan.member(props))
		scan.object = ok && end == len(props)
	}
	for i, raw := range [...]json.RawMessage{props, set, setOnce} {
		if raw == nil || i == 0 && scan.object {
			continue
		}
		// The envelope would not be JSON: Parse's error.
		if end, ok := skipValue(raw, 0, 1); (!ok || end != len(raw)) && !json.Valid(raw) {
			return Event{}, invalid("not a JSON object: invalid value")
		}
	}
	w := wire{Properties: props, Set: set, SetOnce: setOnce}
	// Strings pass through json.Marshal and back in Parse: invalid UTF-8
	// becomes U+FFFD, byte by byte.
	strs := [3]string{validUTF8(p.UUID), validUTF8(p.Event), validUTF8(p.Timestamp)}
	w.UUID, w.Event = &strs[0], &strs[1]
	if p.Timestamp != "" {
		w.Timestamp = &strs[2]
	}
	var err error
	if w.DistinctID, err = json.Marshal(p.DistinctID); err != nil {
		return Event{}, invalid("distinct_id: %v", err)
	}
	return build(w, scan.decode, decodeFast)
}

// Envelope is the envelope the parts stand for: what FromParts reads.
func (p Parts) Envelope() []byte {
	var b bytes.Buffer
	str := func(key, s string) {
		k, _ := json.Marshal(key)
		v, _ := json.Marshal(s)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
		b.WriteByte(',')
	}
	raw := func(key string, v json.RawMessage) {
		if v != nil {
			b.WriteString(`"` + key + `":`)
			b.Write(v)
			b.WriteByte(',')
		}
	}
	b.WriteByte('{')
	str("uuid", p.UUID)
	str("event", p.Event)
	str("distinct_id", p.DistinctID)
	if p.Timestamp != "" {
		str("timestamp", p.Timestamp)
	}
	raw("properties", p.Properties)
	raw("$set", p.Set)
	raw("$set_once", p.SetOnce)
	out := b.Bytes()
	out[len(out)-1] = '}'
	return out
}

// sizeBound is at least len(p.Envelope()): a string's JSON is at most six
// bytes per byte (\u00XX), plus its quotes.
func (p Parts) sizeBound() int {
	n := 100 + len(p.Properties) + len(p.Set) + len(p.SetOnce)
	for _, s := range [...]string{p.UUID, p.Event, p.DistinctID, p.Timestamp} {
		n += 6*len(s) + 2
	}
	return n
}

// trimRaw is raw without the white space around it, as Parse keeps a
// value's span (nil stays nil).
func trimRaw(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	start, end := skipSpace(raw, 0), len(bytes.TrimRight(raw, " \t\r\n"))
	if start >= end {
		return raw[:0]
	}
	return raw[start:end]
}

// validUTF8 is s as json.Marshal writes it and json.Unmarshal reads it
// back: each byte that is not part of valid UTF-8 becomes U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// DecodeValue decodes one validated JSON value as DecodeObject decodes
// the values of an object (json.Number numbers): a transformation decodes
// a property only when its plugin reads it.
func DecodeValue(raw []byte) (any, error) { return decodeFast(raw) }

// Members calls member with each key of the JSON object raw (decoded) and
// the text of its value, in order, repeats included. false when raw is
// not an object the scanner reads (the caller decodes it whole instead).
func Members(raw []byte, member func(key string, value []byte)) bool {
	raw = trimRaw(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	end, ok := walkObject(raw, 0, 1, func(key []byte, plain bool, v int) (int, bool) {
		end, ok := skipValue(raw, v, 2)
		if !ok {
			return 0, false
		}
		k := string(key[1 : len(key)-1])
		if !plain {
			var err error
			if k, err = unquote(key); err != nil {
				return 0, false
			}
		}
		member(k, raw[v:end])
		return end, true
	})
	return ok && end == len(raw)
}

// The scanner's walkers, for other parsers of outside input that must
// accept exactly what encoding/json accepts (capture's request bodies).
// Each reads the value starting at b[i] and returns its end; false means
// the scanner does not read it (invalid JSON, or nesting past its bound)
// and the caller must ask encoding/json, whose answer counts. depth is
// the nesting of b[i]: pass the caller's depth plus one into values.

// WalkObject reads the object at b[i] == '{', calling member with each
// key's token (quotes included), whether the key is plain (printable
// ASCII without escapes: its bytes are its value) and where its value
// starts; member reads the value and returns its end.
func WalkObject(b []byte, i, depth int, member func(key []byte, plain bool, v int) (int, bool)) (int, bool) {
	return walkObject(b, i, depth, member)
}

// WalkArray reads the array at b[i] == '[', calling elem with where each
// element starts; elem reads it and returns its end.
func WalkArray(b []byte, i, depth int, elem func(v int) (int, bool)) (int, bool) {
	return walkArray(b, i, depth, elem)
}

// SkipValue validates the value at b[i] and returns its end.
func SkipValue(b []byte, i, depth int) (int, bool) { return skipValue(b, i, depth) }
