package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/personhub/personhub/pkg/plugin/archive"
)

// Manifest is what a plugin.json says.
type Manifest struct {
	Name        string          // "" when absent
	Description *string         // nil when absent
	URL         string          // informational
	Main        string          // entry file; "" when absent
	Config      json.RawMessage // config_schema; nil when absent
	PublicJobs  json.RawMessage // nil when absent
}

// ManifestError is a plugin.json that cannot be used.
type ManifestError struct{ Detail string }

func (e *ManifestError) Error() string { return "plugin.json: " + e.Detail }

// ParseManifest reads plugin.json: a JSON object whose name, description,
// url and main are strings, config a list of objects or an object, and
// publicJobs an object. Other fields are ignored.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil || raw == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = "invalid JSON: " + err.Error()
		}
		return m, &ManifestError{Detail: msg}
	}
	if dec.More() {
		return m, &ManifestError{Detail: "invalid JSON: more than one value"}
	}
	str := func(key string, dst *string) error {
		v, ok := raw[key]
		if !ok || isNull(v) {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return &ManifestError{Detail: key + " must be a string"}
		}
		return nil
	}
	var desc string
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &m.Name}, {"description", &desc}, {"url", &m.URL}, {"main", &m.Main}} {
		if err := str(f.key, f.dst); err != nil {
			return m, err
		}
	}
	m.Name = strings.TrimSpace(m.Name)
	if len(m.Name) > maxNameLen {
		return m, &ManifestError{Detail: fmt.Sprintf("name is longer than %d characters", maxNameLen)}
	}
	if v, ok := raw["description"]; ok && !isNull(v) {
		m.Description = &desc
	}
	if m.Main != "" {
		clean, ok := archive.CleanName(m.Main)
		if !ok || strings.HasSuffix(m.Main, "/") {
			return m, &ManifestError{Detail: fmt.Sprintf("main %q is not a file inside the plugin", m.Main)}
		}
		m.Main = clean
	}
	if v, ok := raw["config"]; ok && !isNull(v) {
		v = bytes.TrimSpace(v)
		var list []map[string]any
		var dict map[string]any
		if json.Unmarshal(v, &list) != nil && json.Unmarshal(v, &dict) != nil {
			return m, &ManifestError{Detail: "config must be a list of objects or an object"}
		}
		if len(v) > maxSchemaLen {
			return m, &ManifestError{Detail: "config is too large"}
		}
		m.Config = json.RawMessage(v)
	}
	if v, ok := raw["publicJobs"]; ok && !isNull(v) {
		var dict map[string]any
		if json.Unmarshal(v, &dict) != nil {
			return m, &ManifestError{Detail: "publicJobs must be an object"}
		}
		m.PublicJobs = json.RawMessage(bytes.TrimSpace(v))
	}
	return m, nil
}
