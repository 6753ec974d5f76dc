package csvexport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds the nesting the flattener follows. encoding/json refuses
// documents nested deeper than 10000 levels, so anything decoded from JSON
// fits; the limit only stops self-referencing Go maps and slices from
// overflowing the stack.
const maxDepth = 1 << 14

// ErrTooDeep is returned for values nested more than maxDepth levels deep
// (in practice: Go maps or slices that contain themselves).
var ErrTooDeep = errors.New("csvexport: value nested too deeply")

// Flatten turns one JSON-compatible value into key/cell pairs, following the
// rules in the package documentation. v is either a value decoded by
// encoding/json with UseNumber (map[string]any, []any, string, json.Number,
// bool, nil) or any Go value that json.Marshal accepts.
//
// The cells are the raw flattened values: they are not yet passed through
// [Sanitize]; [Write] and [Writer] do that when producing CSV.
func Flatten(v any) (map[string]string, error) {
	out := make(map[string]string)
	wk := walker{emit: func(key []byte, val string) {
		if _, dup := out[string(key)]; !dup { // first value wins on collisions
			out[string(key)] = val
		}
	}}
	if err := wk.walk(v, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// walker performs a depth-first traversal, calling emit once per leaf with
// the leaf's dotted path. The path buffer is reused, so emit must copy key
// if it keeps it.
type walker struct {
	path []byte
	emit func(key []byte, val string)
}

// walk flattens v found at wk.path. depth is 0 for the row itself; the root
// contributes no path segment and its children no leading separator.
func (wk *walker) walk(v any, depth int) error {
	if depth > maxDepth {
		return ErrTooDeep
	}
	switch x := v.(type) {
	case nil:
		wk.emit(wk.path, "")
	case string:
		wk.emit(wk.path, validUTF8(x))
	case json.Number:
		wk.emit(wk.path, string(x))
	case bool:
		wk.emit(wk.path, strconv.FormatBool(x))
	case map[string]any:
		return wk.object(x, depth)
	case []any:
		mark := len(wk.path)
		for i, e := range x {
			if depth > 0 {
				wk.path = append(wk.path, '.')
			}
			wk.path = strconv.AppendInt(wk.path, int64(i), 10)
			err := wk.walk(e, depth+1)
			wk.path = wk.path[:mark]
			if err != nil {
				return err
			}
		}
	default:
		d, err := roundTrip(x)
		if err != nil {
			return err
		}
		// d only holds the plain types handled above, so this recursion
		// never reaches the default case again for the same value.
		return wk.walk(d, depth)
	}
	return nil
}

func (wk *walker) object(m map[string]any, depth int) error {
	mark := len(wk.path)
	visit := func(k string, e any) error {
		if depth > 0 {
			wk.path = append(wk.path, '.')
		}
		wk.path = append(wk.path, validUTF8(k)...)
		err := wk.walk(e, depth+1)
		wk.path = wk.path[:mark]
		return err
	}
	if !needsOrder(m) {
		for k, e := range m {
			if err := visit(k, e); err != nil {
				return err
			}
		}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := visit(k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

// needsOrder reports whether the keys of m must be visited in sorted order
// to make collision handling deterministic.
//
// Two distinct paths can only flatten to the same key if, at the first
// object where they diverge, one of the two keys contains a '.' (or the two
// keys become equal once invalid UTF-8 is replaced). Objects without such
// keys can therefore be visited in map order: the relative order of any two
// colliding leaves is decided by a deeper (or shallower, sorted) object.
func needsOrder(m map[string]any) bool {
	for k := range m {
		if strings.IndexByte(k, '.') >= 0 || !utf8.ValidString(k) {
			return true
		}
	}
	return false
}

// roundTrip converts an arbitrary Go value into plain decoded JSON by
// marshalling it and decoding the result with UseNumber.
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("csvexport: marshal %T: %w", v, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("csvexport: decode marshalled %T: %w", v, err)
	}
	return out, nil
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
