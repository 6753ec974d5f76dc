package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// A config_schema is a list of fields {key, name, type, default, required,
// secret, hint, order} (other members, such as choices, are kept as they
// are), or the legacy dict {key: field}. A list element without "key" is
// a note ({"markdown": "…"}): it holds no value and cannot be secret.
//
// The schema decides which config values are masked, so an element that
// cannot be read is refused where a schema enters (body, plugin.json)
// rather than guessed at: a guess is how `"secret": "no"` once unmasked
// every secret of a plugin.

// SchemaError says why a config_schema is refused.
type SchemaError struct{ Detail string }

func (e *SchemaError) Error() string { return "config_schema: " + e.Detail }

func schemaErr(format string, args ...any) error {
	return &SchemaError{Detail: fmt.Sprintf(format, args...)}
}

// maxConfigKeyLen bounds config keys (schema keys and config values' keys).
const maxConfigKeyLen = 200

// ParseSchema checks a config_schema and returns the config keys it marks
// secret. Empty and null are the empty schema.
func ParseSchema(raw json.RawMessage) (map[string]bool, error) {
	raw = bytes.TrimSpace(raw)
	secret := map[string]bool{}
	if len(raw) == 0 || isNull(raw) {
		return secret, nil
	}
	switch raw[0] {
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, schemaErr("must be a list of fields or an object")
		}
		for i, el := range list {
			label := fmt.Sprintf("element %d", i)
			f, err := schemaObject(el, label)
			if err != nil {
				return nil, err
			}
			k, ok := f["key"]
			if !ok {
				if _, note := f["markdown"]; !note {
					return nil, schemaErr("%s has no key", label)
				}
				if _, ok := f["secret"]; ok {
					return nil, schemaErr("%s has no key but a secret flag", label)
				}
				continue
			}
			var key string
			if err := json.Unmarshal(k, &key); err != nil || key == "" || len(key) > maxConfigKeyLen {
				return nil, schemaErr("the key of %s must be a string of 1 to %d characters", label, maxConfigKeyLen)
			}
			if err := addField(secret, key, f, fmt.Sprintf("%s (%q)", label, key)); err != nil {
				return nil, err
			}
		}
	case '{':
		var dict map[string]json.RawMessage
		if err := json.Unmarshal(raw, &dict); err != nil {
			return nil, schemaErr("must be a list of fields or an object")
		}
		for _, key := range slices.Sorted(maps.Keys(dict)) {
			label := fmt.Sprintf("entry %q", key)
			if key == "" || len(key) > maxConfigKeyLen {
				return nil, schemaErr("keys must be 1 to %d characters", maxConfigKeyLen)
			}
			f, err := schemaObject(dict[key], label)
			if err != nil {
				return nil, err
			}
			if k, ok := f["key"]; ok {
				var inner string
				if json.Unmarshal(k, &inner) != nil || inner != key {
					return nil, schemaErr("%s has a key other than its own", label)
				}
			}
			if err := addField(secret, key, f, label); err != nil {
				return nil, err
			}
		}
	default:
		return nil, schemaErr("must be a list of fields or an object")
	}
	return secret, nil
}

func schemaObject(raw json.RawMessage, label string) (map[string]json.RawMessage, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return nil, schemaErr("%s is not an object", label)
	}
	return f, nil
}

// addField checks the typed members of a field and records it when secret.
// secret and required must be booleans; name, type and hint strings (or
// null); order a number (or null).
func addField(secret map[string]bool, key string, f map[string]json.RawMessage, label string) error {
	for _, m := range []struct {
		name     string
		nullable bool
		ok       func(any) bool
		want     string
	}{
		{"secret", false, isBool, "true or false"},
		{"required", false, isBool, "true or false"},
		{"name", true, isString, "a string"},
		{"type", true, isString, "a string"},
		{"hint", true, isString, "a string"},
		{"order", true, isNumber, "a number"},
	} {
		raw, ok := f[m.name]
		if !ok || (m.nullable && isNull(raw)) {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil || !m.ok(v) {
			return schemaErr("%q of %s must be %s", m.name, label, m.want)
		}
		if m.name == "secret" && v == true {
			secret[key] = true
		}
	}
	return nil
}

func isBool(v any) bool   { _, ok := v.(bool); return ok }
func isString(v any) bool { _, ok := v.(string); return ok }
func isNumber(v any) bool { _, ok := v.(float64); return ok }

// secretsEver reads the secret keys of any schema leniently, for the
// history of secret keys: a schema stored before schemas were checked may
// be ill-formed, and every key it might mean as secret (a "secret" member
// that is present and neither false nor null) counts.
func secretsEver(raw json.RawMessage) []string {
	var out []string
	eachField(raw, func(key string, f map[string]any) {
		if s, ok := f["secret"]; ok && s != nil && s != false {
			out = append(out, key)
		}
	})
	return union(out)
}

// eachField calls fn with every keyed field of a schema read leniently
// (list or dict; what is not an object with a key is skipped).
func eachField(raw json.RawMessage, fn func(key string, f map[string]any)) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	mark := func(key string, f any) {
		if m, ok := f.(map[string]any); ok && key != "" {
			fn(key, m)
		}
	}
	switch s := v.(type) {
	case []any:
		for _, el := range s {
			if m, ok := el.(map[string]any); ok {
				key, _ := m["key"].(string)
				mark(key, m)
			}
		}
	case map[string]any:
		for key, f := range s {
			mark(key, f)
		}
	}
}

// union returns the sorted, distinct keys of the lists.
func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
