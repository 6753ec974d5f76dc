package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Field is an input field: Set says whether the body held it.
type Field[T any] struct {
	Set   bool
	Value T
}

// PluginInput is a create or PATCH body. Read-only fields (id,
// latest_tag, organization_id, organization_name; url after create) and
// unknown fields are ignored.
type PluginInput struct {
	Type         Field[string]
	URL          Field[string]
	Name         Field[string]
	Description  Field[*string]
	Icon         Field[*string]
	ConfigSchema Field[json.RawMessage]
	Tag          Field[*string]
	IsGlobal     Field[bool]
	Capabilities Field[Capabilities]
	Metrics      Field[json.RawMessage]
	PublicJobs   Field[json.RawMessage]
}

// Input size limits.
const (
	maxNameLen        = 400
	maxDescriptionLen = 10_000
	maxIconLen        = 256 << 10
	maxSchemaLen      = 256 << 10
	maxObjectLen      = 256 << 10
	maxListItems      = 200
	maxURLLen         = 2048
	maxConfigLen      = 256 << 10
)

// errTrailing is JSON text with more after its one value.
var errTrailing = errors.New("more than one JSON value")

// decodeOne decodes data, which must be exactly one JSON value (white
// space around it is fine), into v. json.Decoder.More alone is not enough:
// it reports a stray '}' or ']' after the value as the end of the input,
// so `{...}}` would pass.
func decodeOne(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// object decodes a body into its top-level fields.
func object(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := decodeOne(body, &m); errors.Is(err, errTrailing) {
		return nil, invalid("", "The request body must hold one JSON object and nothing after it.")
	} else if err != nil || m == nil {
		return nil, invalid("", "The request body must be a JSON object.")
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func text(m map[string]json.RawMessage, key string, limit int, nullable bool, f *Field[*string]) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	f.Set = true
	if isNull(raw) {
		if !nullable {
			return invalid(key, "This field may not be null.")
		}
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return invalid(key, "Not a valid string.")
	}
	if utf8.RuneCountInString(s) > limit {
		return invalid(key, "Ensure this field has no more than %d characters.", limit)
	}
	f.Value = &s
	return nil
}

func str(m map[string]json.RawMessage, key string, limit int, f *Field[string]) error {
	var p Field[*string]
	if err := text(m, key, limit, false, &p); err != nil || !p.Set {
		return err
	}
	f.Set, f.Value = true, *p.Value
	return nil
}

// jsonValue accepts a JSON object (or, when lists is true, an array) of at
// most limit bytes; null is the empty object.
func jsonValue(m map[string]json.RawMessage, key string, lists bool, limit int, f *Field[json.RawMessage]) error {
	raw, ok := m[key]
	if !ok {
		return nil
	}
	f.Set = true
	raw = bytes.TrimSpace(raw)
	switch {
	case isNull(raw):
		f.Value = json.RawMessage(`{}`)
		return nil
	case len(raw) > limit:
		return invalid(key, "Ensure this value is at most %d bytes of JSON.", limit)
	case raw[0] == '{', lists && raw[0] == '[':
	default:
		if lists {
			return invalid(key, "Must be a JSON list or object.")
		}
		return invalid(key, "Must be a JSON object.")
	}
	f.Value = slices.Clone(raw)
	return nil
}

// DecodePluginInput reads a plugin create or PATCH body.
func DecodePluginInput(body []byte) (PluginInput, error) {
	var in PluginInput
	m, err := object(body)
	if err != nil {
		return in, err
	}
	if err := str(m, "plugin_type", 20, &in.Type); err != nil {
		return in, err
	}
	if in.Type.Set && !slices.Contains(Types, in.Type.Value) {
		return in, invalid("plugin_type", "%q is not a valid choice.", in.Type.Value)
	}
	var url Field[*string]
	if err := text(m, "url", maxURLLen, true, &url); err != nil {
		return in, err
	}
	if url.Set && url.Value != nil && strings.TrimSpace(*url.Value) != "" {
		in.URL = Field[string]{Set: true, Value: strings.TrimSpace(*url.Value)}
	}
	if err := str(m, "name", maxNameLen, &in.Name); err != nil {
		return in, err
	}
	if in.Name.Set {
		in.Name.Value = strings.TrimSpace(in.Name.Value)
		if in.Name.Value == "" {
			return in, invalid("name", "This field may not be blank.")
		}
	}
	for _, t := range []struct {
		key   string
		limit int
		f     *Field[*string]
	}{{"description", maxDescriptionLen, &in.Description}, {"icon", maxIconLen, &in.Icon}, {"tag", 200, &in.Tag}} {
		if err := text(m, t.key, t.limit, true, t.f); err != nil {
			return in, err
		}
	}
	if err := jsonValue(m, "config_schema", true, maxSchemaLen, &in.ConfigSchema); err != nil {
		return in, err
	}
	if _, err := ParseSchema(in.ConfigSchema.Value); err != nil {
		return in, invalid("config_schema", "%s", err.(*SchemaError).Detail)
	}
	if err := jsonValue(m, "metrics", false, maxObjectLen, &in.Metrics); err != nil {
		return in, err
	}
	if err := jsonValue(m, "public_jobs", false, maxObjectLen, &in.PublicJobs); err != nil {
		return in, err
	}
	if raw, ok := m["is_global"]; ok {
		if err := json.Unmarshal(raw, &in.IsGlobal.Value); err != nil || isNull(raw) {
			return in, invalid("is_global", "Must be a valid boolean.")
		}
		in.IsGlobal.Set = true
	}
	if raw, ok := m["capabilities"]; ok {
		c, err := decodeCapabilities(raw)
		if err != nil {
			return in, err
		}
		in.Capabilities = Field[Capabilities]{Set: true, Value: c}
	}
	return in, nil
}

func decodeCapabilities(raw json.RawMessage) (Capabilities, error) {
	var c Capabilities
	if isNull(raw) {
		return Capabilities{Methods: []string{}, ScheduledTasks: []string{}, Jobs: []string{}}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, invalid("capabilities", `Must be an object {"methods": [...], "scheduled_tasks": [...], "jobs": [...]} of string lists.`)
	}
	for _, l := range []*[]string{&c.Methods, &c.ScheduledTasks, &c.Jobs} {
		if len(*l) > maxListItems {
			return c, invalid("capabilities", "A capability list holds at most %d names.", maxListItems)
		}
		for _, s := range *l {
			if s == "" || len(s) > 100 {
				return c, invalid("capabilities", "Capability names must be 1 to 100 characters.")
			}
		}
		if *l == nil {
			*l = []string{}
		}
		*l = slices.Compact(slices.Sorted(slices.Values(*l)))
	}
	return c, nil
}

// ConfigInput is a plugin config create or PATCH body.
type ConfigInput struct {
	Plugin      Field[uint64]
	Enabled     Field[bool]
	Order       Field[int]
	Config      Field[map[string]any] // on PATCH a null value removes the key
	Name        Field[*string]
	Description Field[*string]
	// AddAttachments and RemoveAttachments come from a multipart body's
	// add_attachment[KEY] files and remove_attachment[KEY] fields
	// (DecodeConfigForm); a JSON body has none.
	AddAttachments    []AttachmentUpload
	RemoveAttachments []string
}

// DecodeConfigInput reads a plugin config create or PATCH body.
func DecodeConfigInput(body []byte) (ConfigInput, error) {
	var in ConfigInput
	m, err := object(body)
	if err != nil {
		return in, err
	}
	if raw, ok := m["plugin"]; ok {
		var id uint64
		if err := json.Unmarshal(raw, &id); err != nil || id == 0 {
			return in, invalid("plugin", "Must be a plugin id.")
		}
		in.Plugin = Field[uint64]{Set: true, Value: id}
	}
	if raw, ok := m["enabled"]; ok {
		if err := json.Unmarshal(raw, &in.Enabled.Value); err != nil || isNull(raw) {
			return in, invalid("enabled", "Must be a valid boolean.")
		}
		in.Enabled.Set = true
	}
	if raw, ok := m["order"]; ok {
		var n int32
		if err := json.Unmarshal(raw, &n); err != nil || isNull(raw) {
			return in, invalid("order", "A valid integer is required.")
		}
		in.Order = Field[int]{Set: true, Value: int(n)}
	}
	if raw, ok := m["config"]; ok {
		if len(raw) > maxConfigLen {
			return in, invalid("config", "Ensure this value is at most %d bytes of JSON.", maxConfigLen)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			return in, invalid("config", "Must be a JSON object.")
		}
		if c == nil {
			c = map[string]any{}
		}
		for k := range c {
			if k == "" || len(k) > 200 {
				return in, invalid("config", "Config keys must be 1 to 200 characters.")
			}
		}
		in.Config = Field[map[string]any]{Set: true, Value: c}
	}
	if err := text(m, "name", maxNameLen, true, &in.Name); err != nil {
		return in, err
	}
	if err := text(m, "description", maxDescriptionLen, true, &in.Description); err != nil {
		return in, err
	}
	return in, nil
}

// DecodeSourceInput reads an update_source body: {filename: source or
// null}. Names and sizes are checked by the service.
func DecodeSourceInput(body []byte) (map[string]*string, error) {
	m, err := object(body)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*string, len(m))
	for name, raw := range m {
		if isNull(raw) {
			out[name] = nil
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(name, "A source file must be a string, or null to delete it.")
		}
		out[name] = &s
	}
	return out, nil
}
