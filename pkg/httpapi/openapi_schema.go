package httpapi

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/person"
)

// The schemas of the answers are derived from the Go types the handlers
// encode, by encoding/json's rules (json tags, omitempty, embedded
// structs, pointers as null), so they follow the code as it changes. The
// named types below become components; the others are inlined.

var (
	timeType      = reflect.TypeOf(time.Time{})
	uuidType      = reflect.TypeOf(uuid.UUID{})
	rawType       = reflect.TypeOf(json.RawMessage{})
	marshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	textType      = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

// components are the named schemas: name and the Go value whose type it
// describes.
var components = []struct {
	name string
	v    any
}{
	{"Error", Error{}},
	{"Person", person.Person{}},
	{"Actor", actorJSON{}},
	{"Cohort", cohortJSON{}},
	{"Action", action.Action{}},
	{"Plugin", pluginJSON{}},
	{"PluginConfig", pluginConfigJSON{}},
	{"Project", projectJSON{}},
	{"Activity", activityJSON{}},
	{"ActivityPage", activityPage{}},
}

// nullFields are fields that encode a nil slice or map, so null, by design
// (a Go slice field is otherwise described as an array).
var nullFields = map[reflect.Type][]string{
	reflect.TypeOf(activity.Detail{}): {"changes"},
}

func componentName(t reflect.Type) string {
	for _, c := range components {
		if reflect.TypeOf(c.v) == t {
			return c.name
		}
	}
	return ""
}

func componentSchemas() sch {
	out := sch{}
	for _, c := range components {
		out[c.name] = structSchema(reflect.TypeOf(c.v))
	}
	out["Error"].(sch)["description"] = "Every error answer: type, code, a human detail and attr, the input field at fault (null when none)."
	out["PersonList"] = listOf(ref("Person"))
	return out
}

func ref(name string) sch { return sch{"$ref": "#/components/schemas/" + name} }

// listOf is the paginated list envelope of items: count, next, previous
// (absolute URLs or null) and results.
func listOf(item sch) sch {
	url := sch{"type": []any{"string", "null"}, "format": "uri"}
	return sch{"type": "object", "required": []any{"count", "next", "previous", "results"},
		"properties": sch{"count": sch{"type": "integer", "minimum": 0}, "next": url, "previous": url,
			"results": sch{"type": "array", "items": item}}}
}

// schemaFor is the schema of v's type.
func schemaFor(v any) sch { return typeSchema(reflect.TypeOf(v), true) }

// typeSchema is the schema of values of t; top: t itself is being
// described (a component does not refer to itself).
func typeSchema(t reflect.Type, top bool) sch {
	if t == nil {
		return sch{}
	}
	if name := componentName(t); name != "" && !top {
		return ref(name)
	}
	if t.Kind() == reflect.Pointer {
		// Before the marshaler cases: a nil pointer encodes as null
		// whatever its element's encoding (*uuid.UUID, *time.Time).
		return nullable(typeSchema(t.Elem(), false))
	}
	switch {
	case t == timeType:
		return sch{"type": "string", "format": "date-time"}
	case t == uuidType:
		return sch{"type": "string", "format": "uuid"}
	case t == rawType:
		return sch{}
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		return sch{} // its own encoding: described in prose
	case t.Implements(textType):
		return sch{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Interface:
		return sch{}
	case reflect.Bool:
		return sch{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return sch{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return sch{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return sch{"type": "number"}
	case reflect.String:
		return sch{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return sch{"type": "string", "contentEncoding": "base64"}
		}
		return sch{"type": "array", "items": typeSchema(t.Elem(), false)}
	case reflect.Map:
		return sch{"type": "object", "additionalProperties": typeSchema(t.Elem(), false)}
	case reflect.Struct:
		return structSchema(t)
	}
	return sch{}
}

// structSchema describes a struct as encoding/json encodes it: every
// exported field under its json name, required unless omitempty;
// embedded structs without a name are inlined.
func structSchema(t reflect.Type) sch {
	props, req := sch{}, []any{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			s := typeSchema(f.Type, false)
			for _, n := range nullFields[t] {
				if n == name {
					s = nullable(s)
				}
			}
			props[name] = s
			if !strings.Contains(opts, "omitempty") {
				req = append(req, name)
			}
		}
	}
	walk(t)
	return sch{"type": "object", "properties": props, "required": req}
}

// nullable lets a schema be null too.
func nullable(s sch) sch {
	switch ty := s["type"].(type) {
	case string:
		out := sch{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{ty, "null"}
		return out
	case nil:
		if len(s) == 0 {
			return s // anything, null included
		}
		return sch{"anyOf": []any{s, sch{"type": "null"}}}
	}
	return s
}
