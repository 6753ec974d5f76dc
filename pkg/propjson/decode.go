package propjson

import (
	"bytes"
	"encoding/json"
)

// Decode decodes a stored properties object as the fold reads it: numbers
// kept exact (json.Number), so Encode gives their text back unchanged. An
// empty string is an empty object.
func Decode(s string) (map[string]any, error) {
	props := map[string]any{}
	if s == "" {
		return props, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&props); err != nil {
		return nil, err
	}
	return props, nil
}
