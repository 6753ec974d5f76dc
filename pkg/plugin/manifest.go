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

// ManifestError is a plugin.json that cannot be used. Attr is
// "config_schema" when its config is the problem, else "".
type ManifestError struct{ Detail, Attr string }

func (e *ManifestError) Error() string { return "plugin.json: " + e.Detail }

// ParseManifest reads plugin.json: a JSON object whose name, description,
// url and main are strings, config a list of objects or an object, and
// publicJobs an object. Other fields are ignored.
func ParseManifest(data []byte) (Manifest, error) {
	var m Manifest
	var raw map[string]json.RawMessage
	if err := decodeOne(data, &raw); err != nil || raw == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = "invalid JSON: " + err.Error()
		}
		return m, &ManifestError{Detail: msg}
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
		if len(v) > maxSchemaLen {
			return m, &ManifestError{Detail: "config is too large", Attr: "config_schema"}
		}
		if _, err := ParseSchema(v); err != nil {
			return m, &ManifestError{Detail: "config: " + err.(*SchemaError).Detail, Attr: "config_schema"}
		}
		m.Config = json.RawMessage(v)
	}
	if v, ok := raw["publicJobs"]; ok && !isNull(v) {
		var dict map[string]any
		if json.Unmarshal(v, &dict) != nil {
			return m, &ManifestError{Detail: "publicJobs must be an object"}
		}
		if len(bytes.TrimSpace(v)) > maxObjectLen {
			return m, &ManifestError{Detail: "publicJobs is too large"}
		}
		m.PublicJobs = json.RawMessage(bytes.TrimSpace(v))
	}
	return m, nil
}

// invalidManifest is the 400 for a plugin.json that cannot be used: attr
// names where it came from (the url of an install, the file of
// update_source) unless its config_schema is the problem.
func invalidManifest(err *ManifestError, attr string) error {
	if err.Attr != "" {
		attr = err.Attr
	}
	return invalid(attr, "Invalid plugin.json: %s", err.Detail)
}
