package propjson

import (
	"bytes"
	"encoding/json"
	"unsafe"

	"github.com/personhub/personhub/pkg/event"
)

// Decode decodes a stored properties object as the fold reads it: numbers
// kept exact (json.Number), so Encode gives their text back unchanged. An
// empty string is an empty object.
//
// The one-pass scanner of package event decodes it (about three times
// faster than encoding/json's Decoder, which was the fold's share of
// decoding in the bench's ingest: docs/performance-history.md); whatever the scanner refuses goes
// to the Decoder, so errors are the Decoder's own. FuzzDecode holds the
// two to the same result on every input.
func Decode(s string) (map[string]any, error) {
	if s == "" {
		return map[string]any{}, nil
	}
	// A read-only view of s: the scanner copies every string it keeps.
	raw := unsafe.Slice(unsafe.StringData(s), len(s))
	if m, err := event.DecodeObject(raw); err == nil {
		if m == nil {
			// null: the Decoder sets the map to nil as well.
			return nil, nil
		}
		return m, nil
	}
	return decodeStd(raw)
}

// decodeStd is encoding/json's Decoder with UseNumber.
func decodeStd(raw []byte) (map[string]any, error) {
	props := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return nil, err
	}
	return props, nil
}
