package chstore

import (
	"bytes"
	"encoding/json"
)

// decodeProps decodes a stored properties object, keeping numbers exact.
func decodeProps(s string) (map[string]any, error) {
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
