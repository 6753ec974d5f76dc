// Package cohort holds cohorts: named sets of persons of a project, static
// (an explicit member list) or dynamic (person property and behavioural
// filters). Definitions live in JetStream KV with the actions; static
// members in the ClickHouse table cohort_people. Membership is evaluated
// when it is read, as a condition over the persons table, so it is never
// stale (docs/cohorts.md).
package cohort

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotFound: no cohort with that id in the project.
var ErrNotFound = errors.New("cohort: not found")

// Error is an invalid input: the API answers 400 naming Attr.
type Error struct {
	Attr, Detail string
}

func (e *Error) Error() string { return e.Detail }

// Field is the input field the error is about.
func (e *Error) Field() string { return e.Attr }

func invalid(attr, format string, a ...any) *Error {
	return &Error{Attr: attr, Detail: fmt.Sprintf(format, a...)}
}

// Limits of a cohort's fields and member lists.
const (
	MaxNameRunes        = 400
	MaxDescriptionRunes = 1000
	// MaxMembersPerAdd bounds add_persons_to_static_cohort (as PostHog).
	MaxMembersPerAdd = 1000
	// MaxMembersPerCreate bounds the ids given at create (JSON or CSV).
	MaxMembersPerCreate = 100_000
	// maxNesting bounds cohorts referencing cohorts.
	maxNesting = 16
)

// Cohort is the stored definition.
type Cohort struct {
	ID          uint64          `json:"id"`
	Name        *string         `json:"name"`
	Description string          `json:"description"`
	IsStatic    bool            `json:"is_static"`
	Filters     json.RawMessage `json:"filters"` // {"properties": GROUP}; null for static cohorts
	Groups      json.RawMessage `json:"groups"`  // the deprecated form, as given ([] when not)
	Deleted     bool            `json:"deleted"`
	CreatedAt   time.Time       `json:"created_at"`
}

// Type is PostHog's derived classification.
func (c Cohort) Type() string {
	switch {
	case c.IsStatic:
		return "static"
	case bytes.Contains(c.Filters, []byte(`"behavioral"`)):
		return "behavioral"
	}
	return "person_property"
}

// properties is the filter group of a dynamic cohort.
func (c Cohort) properties() string {
	var f struct {
		Properties json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(c.Filters, &f)
	return string(f.Properties)
}

// Input is a create or PATCH body; nil fields were not given.
type Input struct {
	Name        *string
	nameNull    bool
	Description *string
	IsStatic    *bool
	Filters     json.RawMessage // normalised {"properties": GROUP}
	Groups      json.RawMessage
	Deleted     *bool
	// Members of a static cohort: integer ids or uuids, and distinct ids.
	PersonIDs   []string
	DistinctIDs []string
}

// HasMembers reports whether members were given.
func (in Input) HasMembers() bool { return len(in.PersonIDs)+len(in.DistinctIDs) > 0 }

// Decode reads a JSON body. Unknown fields are ignored (PostHog's cohort has
// many this service does not keep).
func Decode(body []byte) (Input, error) {
	var in Input
	if len(bytes.TrimSpace(body)) == 0 {
		return in, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return in, invalid("body", "The body must be a JSON object.")
	}
	str := func(field string, dst **string, max int) error {
		v, ok := raw[field]
		if !ok {
			return nil
		}
		if string(v) == "null" {
			if field == "name" {
				in.nameNull = true
			}
			return nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return invalid(field, "%s must be a string.", field)
		}
		if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
			return invalid(field, "%s must be at most %d characters.", field, max)
		}
		*dst = &s
		return nil
	}
	boolean := func(field string, dst **bool) error {
		v, ok := raw[field]
		if !ok || string(v) == "null" {
			return nil
		}
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return invalid(field, "%s must be a boolean.", field)
		}
		*dst = &b
		return nil
	}
	if err := errors.Join(str("name", &in.Name, MaxNameRunes), str("description", &in.Description, MaxDescriptionRunes),
		boolean("is_static", &in.IsStatic), boolean("deleted", &in.Deleted)); err != nil {
		return in, firstError(err)
	}
	if q, ok := raw["query"]; ok && string(q) != "null" {
		return in, invalid("query", "Cohorts defined by a query are not supported; use filters or a static member list.")
	}
	if f, ok := raw["filters"]; ok && string(f) != "null" {
		if err := checkFilters(f); err != nil {
			return in, err
		}
		in.Filters = compact(f)
	}
	if g, ok := raw["groups"]; ok && string(g) != "null" && string(bytes.TrimSpace(g)) != "[]" {
		filters, err := groupsToFilters(g)
		if err != nil {
			return in, err
		}
		in.Groups = compact(g)
		if in.Filters == nil {
			in.Filters = filters
		}
	}
	var err error
	if in.PersonIDs, err = idList(raw, "person_ids", true); err != nil {
		return in, err
	}
	if in.DistinctIDs, err = idList(raw, "distinct_ids", false); err != nil {
		return in, err
	}
	return in, nil
}

// firstError unwraps errors.Join to its first error, an *Error.
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()[0]
	}
	return err
}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// idList reads a list of ids; person ids may be integers or uuid strings,
// distinct ids are non-empty strings.
func idList(raw map[string]json.RawMessage, field string, numbers bool) ([]string, error) {
	v, ok := raw[field]
	if !ok || string(v) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var list []any
	if err := dec.Decode(&list); err != nil {
		return nil, invalid(field, "%s must be a list of ids.", field)
	}
	out := make([]string, 0, len(list))
	for _, el := range list {
		switch x := el.(type) {
		case string:
			if s := strings.TrimSpace(x); s != "" {
				out = append(out, s)
				continue
			}
		case json.Number:
			if numbers {
				out = append(out, x.String())
				continue
			}
		}
		return nil, invalid(field, "%s must be a list of ids, not %s.", field, v)
	}
	return out, nil
}

// checkFilters checks the shape {"properties": {"type": "AND"|"OR",
// "values": [...]}}; the filters themselves are checked by compiling them.
func checkFilters(raw json.RawMessage) error {
	var f struct {
		Properties *struct {
			Type   string            `json:"type"`
			Values []json.RawMessage `json:"values"`
		} `json:"properties"`
	}
	err := json.Unmarshal(raw, &f)
	if err != nil || f.Properties == nil || f.Properties.Values == nil {
		return invalid("filters", "Must contain a 'properties' key with type and values.")
	}
	switch strings.ToUpper(f.Properties.Type) {
	case "AND", "OR":
		return nil
	}
	return invalid("filters", "Must contain a 'properties' key with type and values.")
}

// groupsToFilters converts the deprecated groups (ORed; a group's property
// list ANDed, untyped and event-typed properties meaning person ones; a
// dict {"key": value} meaning key = value; event_id or action_id with days
// meaning "performed it within days days", count and count_operator
// "that many times") into the filters form.
func groupsToFilters(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var groups []map[string]any
	if err := dec.Decode(&groups); err != nil {
		return nil, invalid("groups", "groups must be a list of objects.")
	}
	ors := make([]any, 0, len(groups))
	for _, g := range groups {
		var and []any
		switch props := g["properties"].(type) {
		case nil:
		case []any:
			for _, p := range props {
				m, ok := p.(map[string]any)
				if !ok {
					return nil, invalid("groups", "A group's properties must be objects.")
				}
				if t, _ := m["type"].(string); t == "" || t == "event" {
					m["type"] = "person"
				}
				and = append(and, m)
			}
		case map[string]any:
			for k, v := range props {
				and = append(and, map[string]any{"type": "person", "key": k, "value": v})
			}
		default:
			return nil, invalid("groups", "A group's properties must be a list or an object.")
		}
		key, typ := g["event_id"], "events"
		if a, ok := g["action_id"]; ok && a != nil {
			key, typ = a, "actions"
		}
		if key != nil {
			days := any(json.Number("365"))
			if d, ok := g["days"]; ok && d != nil {
				days = d
			}
			f := map[string]any{"type": "behavioral", "key": key, "value": "performed_event",
				"event_type": typ, "time_value": days, "time_interval": "day"}
			if c, ok := g["count"]; ok && c != nil {
				f["value"], f["operator_value"], f["operator"] = "performed_event_multiple", c, g["count_operator"]
			}
			and = append(and, f)
		}
		ors = append(ors, map[string]any{"type": "AND", "values": and})
	}
	out, err := json.Marshal(map[string]any{"properties": map[string]any{"type": "OR", "values": ors}})
	return out, err
}
