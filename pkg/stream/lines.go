package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/event"
)

// Normalize prepares one JSON-lines record for publishing: it must be a
// JSON object; a missing uuid or timestamp is filled in (a fresh uuid,
// now). It returns the envelope and its uuid. The result still goes
// through the ingester's full validation.
func Normalize(line []byte, now time.Time) ([]byte, string, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, "", fmt.Errorf("not a JSON object")
	}
	if dec.More() {
		return nil, "", fmt.Errorf("more than one JSON value on the line")
	}
	var id string
	if raw, ok := m["uuid"]; ok {
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, "", fmt.Errorf("uuid must be a string")
		}
		if _, err := uuid.Parse(id); err != nil {
			return nil, "", fmt.Errorf("uuid %q does not parse", id)
		}
	} else {
		id = uuid.NewString()
		m["uuid"], _ = json.Marshal(id)
	}
	if _, ok := m["timestamp"]; !ok {
		m["timestamp"], _ = json.Marshal(now.UTC().Format(time.RFC3339Nano))
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	if len(out) > event.MaxSize {
		return nil, "", fmt.Errorf("event is larger than %d bytes", event.MaxSize)
	}
	return out, id, nil
}
