package event

import (
	"bytes"
	"encoding/json"
	"unsafe"
)

// StoredProperties is the properties object as the events table keeps it:
// in canonical form (Canonical), whatever spacing and escapes the client
// wrote, with top-level $set, $set_once and $unset moved inside, where
// analysts look for them. It depends on the event's text alone, so a
// replay of the log stores the same text.
//
// For most events that is PropertiesRaw as it is (JavaScript and Go write
// canonical JSON), and the string shares its bytes instead of copying
// them: a copy of every event's properties was 4% of the ingester's CPU
// (the ingest figure, docs/performance.md), and the events insert copies them once more
// anyway. Parse's buffer is written only while it is built, and
// Canonical's output is new, so the string stays immutable.
func (e *Event) StoredProperties() string {
	raw := canonicalOrAsIs(e.PropertiesRaw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	names := [3]string{"$set", "$set_once", "$unset"}
	var top [3][]byte
	size := len(raw)
	for i, v := range e.top {
		if v = canonicalOrAsIs(v); len(v) > 0 && string(v) != "null" {
			top[i] = v
			size += len(names[i]) + len(v) + 4
		}
	}
	if size == len(raw) {
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	// The common case: properties hold none of the three, so the top-level
	// values are spliced in, with no decoding. (raw is canonical: a key
	// is written as it reads, so the search finds every one.)
	if !bytes.Contains(raw, []byte(`"$set`)) && !bytes.Contains(raw, []byte(`"$unset`)) {
		b := make([]byte, 0, size)
		b = append(b, '{')
		for i, v := range top {
			if v != nil {
				b = append(b, '"')
				b = append(b, names[i]...)
				b = append(b, '"', ':')
				b = append(b, v...)
				b = append(b, ',')
			}
		}
		if string(raw) == "{}" {
			b[len(b)-1] = '}'
		} else {
			b = append(b, raw[1:]...)
		}
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	// Both places hold some: store the merged values (keys in
	// encoding/json's order, then made canonical).
	all := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &all)
	put := func(key string, v any, keep bool) {
		if keep {
			if b, err := json.Marshal(v); err == nil {
				all[key] = b
			}
		}
	}
	put("$set", e.Set, len(e.Set) > 0)
	put("$set_once", e.SetOnce, len(e.SetOnce) > 0)
	put("$unset", e.Unset, len(e.Unset) > 0)
	out, err := json.Marshal(all)
	if err != nil {
		return "{}"
	}
	out = canonicalOrAsIs(out)
	return unsafe.String(unsafe.SliceData(out), len(out))
}

// canonicalOrAsIs is raw's canonical form, or raw without the white space
// around it when raw is not JSON (Parse lets no such value through; a
// direct caller gets its text stored as given).
func canonicalOrAsIs(raw []byte) []byte {
	if len(raw) == 0 {
		return raw
	}
	if c, err := Canonical(raw); err == nil {
		return c
	}
	return bytes.TrimSpace(raw)
}
