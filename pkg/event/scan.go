package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"unicode/utf8"
)

// A validating JSON scanner over one byte slice, exactly as strict as
// encoding/json's (RFC 8259 grammar, no UTF-8 check outside strings that
// are decoded), written for the envelope: Parse spent most of the
// ingester's time in encoding/json, which validates the whole message,
// decodes it by reflection, and scans the properties again for the keys
// the fold reads. This scanner does all of it in one pass without
// reflection. It never decides anything itself: whatever it does not
// handle (an escaped or case-variant key, a duplicate envelope field, a
// wrong type, invalid JSON, deep nesting) makes Parse fall back to
// parseReference, the encoding/json parser, so every error and every
// unusual input gets the reference's answer. FuzzParseDifferential holds
// the two to the same result.

// maxScanDepth bounds the nesting the scanner follows; deeper input goes
// to the reference parser (encoding/json allows 10000).
const maxScanDepth = 200

// plainByte marks the bytes a string may hold without a closer look: not
// the quote, the backslash, a control character or a non-ASCII byte.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString reads the string starting at b[i] == '"'. It returns the
// index after the closing quote and whether the content is plain
// (printable ASCII without escapes: its bytes are its value).
func scanString(b []byte, i int) (end int, plain, ok bool) {
	i++
	plain = true
	for {
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, false, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, plain, true
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default: // non-ASCII: valid here, decoded with care (unquote)
			plain = false
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// scanNumber reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		i = digits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return 0, false
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		i = digits(b, i)
	}
	return i, true
}

// IsNumber reports whether s is a JSON number, as a json.Number must be
// to be encoded.
func IsNumber(s string) bool {
	end, ok := scanNumber([]byte(s), 0)
	return ok && end == len(s)
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipValue validates the value starting at b[i] and returns its end.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case c == '{':
		return walkObject(b, i, depth, func(_ []byte, _ bool, v int) (int, bool) { return skipValue(b, v, depth+1) })
	case c == '[':
		return walkArray(b, i, depth, func(v int) (int, bool) { return skipValue(b, v, depth+1) })
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || isDigit(c):
		return scanNumber(b, i)
	}
	return 0, false
}

// walkObject reads the object starting at b[i] == '{'. For each member it
// calls member with the key's token (quotes included), whether the key is
// plain, and the index where the value starts; member reads the
// value and returns its end.
func walkObject(b []byte, i, depth int, member func(key []byte, plain bool, v int) (int, bool)) (int, bool) {
	if depth >= maxScanDepth {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, plain, ok := scanString(b, i)
		if !ok {
			return 0, false
		}
		key := b[i:end]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if i, ok = member(key, plain, skipSpace(b, i+1)); !ok {
			return 0, false
		}
		var done bool
		if i, done, ok = separator(b, i, '}'); !ok || done {
			return i, ok
		}
	}
}

// walkArray reads the array starting at b[i] == '[', calling elem for
// each element as walkObject calls member.
func walkArray(b []byte, i, depth int, elem func(v int) (int, bool)) (int, bool) {
	if depth >= maxScanDepth {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = elem(i); !ok {
			return 0, false
		}
		var done bool
		if i, done, ok = separator(b, i, ']'); !ok || done {
			return i, ok
		}
	}
}

// separator reads what follows a member or an element at b[i:]: a comma
// (next is the start of the following one) or the closing byte (done,
// next is just past it). ok is false on anything else.
func separator(b []byte, i int, closing byte) (next int, done, ok bool) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, false, false
	}
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), false, true
	case closing:
		return i + 1, true, true
	}
	return 0, false, false
}

// unquote returns the value of a validated string token (quotes included).
// Plain or valid UTF-8 text without escapes is its own value; anything
// else (escapes, invalid UTF-8, which encoding/json replaces with U+FFFD)
// is decoded by encoding/json so the result is the reference's.
func unquote(tok []byte) (string, error) {
	if len(tok) < 2 {
		return "", errors.New("not a string")
	}
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(tok, &s)
	return s, err
}

// decodeFast decodes one JSON value as encoding/json's Decoder with
// UseNumber does (objects as map[string]any, arrays as []any, numbers as
// json.Number), for the small objects of person updates. Input it cannot
// decode goes to decodeStd, which gives the reference's answer.
func decodeFast(raw []byte) (any, error) {
	v, end, ok := decodeValue(raw, skipSpace(raw, 0), 0)
	if !ok || skipSpace(raw, end) != len(raw) {
		return decodeStd(raw)
	}
	return v, nil
}

// DecodeObject decodes a validated JSON object (or null: a nil map) as
// encoding/json's Decoder with UseNumber decodes it into a map[string]any,
// in one pass: a transformation's view of an envelope's properties
// (pkg/transform), where the Decoder was a tenth of a trivial step.
func DecodeObject(raw []byte) (map[string]any, error) {
	v, err := decodeFast(raw)
	if err != nil || v == nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &json.UnmarshalTypeError{Value: "non-object", Type: reflect.TypeFor[map[string]any]()}
	}
	return m, nil
}

// decodeStd is the reference decoder.
func decodeStd(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func decodeValue(b []byte, i, depth int) (any, int, bool) {
	if i >= len(b) {
		return nil, 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanString(b, i)
		if !ok {
			return nil, 0, false
		}
		s, err := unquote(b[i:end])
		return s, end, err == nil
	case c == '{':
		m := map[string]any{}
		end, ok := walkObject(b, i, depth, func(key []byte, _ bool, v int) (int, bool) {
			k, err := unquote(key)
			if err != nil {
				return 0, false
			}
			val, end, ok := decodeValue(b, v, depth+1)
			m[k] = val
			return end, ok
		})
		return m, end, ok
	case c == '[':
		a := make([]any, 0)
		end, ok := walkArray(b, i, depth, func(v int) (int, bool) {
			val, end, ok := decodeValue(b, v, depth+1)
			a = append(a, val)
			return end, ok
		})
		return a, end, ok
	case c == 't':
		end, ok := scanLiteral(b, i, "true")
		return true, end, ok
	case c == 'f':
		end, ok := scanLiteral(b, i, "false")
		return false, end, ok
	case c == 'n':
		end, ok := scanLiteral(b, i, "null")
		return nil, end, ok
	case c == '-' || isDigit(c):
		end, ok := scanNumber(b, i)
		if !ok {
			return nil, 0, false
		}
		return json.Number(b[i:end]), end, true
	}
	return nil, 0, false
}
