// Package propjson holds the stored form of person properties: the JSON
// object the persons table keeps, which the fold also keeps for cached
// persons (docs/architecture.md), so both must encode it the same way.
package propjson

import (
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/personhub/personhub/pkg/event"
)

// A direct encoder for person properties, byte for byte what
// encoding/json's Marshal gives for the values decoded JSON holds (nil,
// bool, string, json.Number, map[string]any, []any): Marshal found each
// value's encoder by reflection and sorted each map's keys again, a share
// of the ingester's CPU for every person row. Any other type makes it
// give up (ok false), and Encode uses Marshal. FuzzAppendProps holds the
// two to the same bytes.

// Encode appends props to dst as the store keeps them (encoding/json's
// bytes) and returns it with props' keys, sorted.
func Encode(dst []byte, props map[string]any) ([]byte, []string, error) {
	keys := SortedKeys(props)
	start := len(dst)
	out, ok := appendProps(dst, keys, props, 0)
	if ok {
		return out, keys, nil
	}
	// A type decoded JSON does not hold: encoding/json decides.
	b, err := json.Marshal(props)
	if err != nil {
		return dst[:start], nil, err
	}
	return append(dst[:start], b...), keys, nil
}

// SortedKeys returns props' keys in the order Marshal writes them.
func SortedKeys(props map[string]any) []string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendProps appends props as a JSON object, keys in the order given
// (sorted, as Marshal sorts them; every key of props).
func appendProps(dst []byte, keys []string, props map[string]any, depth int) ([]byte, bool) {
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		var ok bool
		if dst, ok = appendValue(dst, props[k], depth); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// maxEncodeDepth: deeper values go to Marshal (which has its own bound).
const maxEncodeDepth = 100

func appendValue(dst []byte, v any, depth int) ([]byte, bool) {
	if depth > maxEncodeDepth {
		return dst, false
	}
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		if t {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case string:
		return appendString(dst, t), true
	case json.Number:
		if t == "" || !event.IsNumber(string(t)) {
			return dst, false // Marshal writes 0 or refuses: let it
		}
		return append(dst, t...), true
	case map[string]any:
		if t == nil {
			return append(dst, "null"...), true
		}
		return appendProps(dst, SortedKeys(t), t, depth+1)
	case []any:
		if t == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

const hexDigits = "0123456789abcdef"

// safeByte marks the ASCII bytes Marshal writes as they are: not the
// quote, the backslash, control characters, or <, > and & (which it
// escapes for HTML).
var safeByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s quoted as Marshal quotes it: short escapes for
// \" \\ \b \f \n \r \t, \u00XX for other control characters and for <, >
// and &, \ufffd for each invalid UTF-8 byte, and \u2028 and \u2029
// escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safeByte[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
