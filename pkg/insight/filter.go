package insight

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/propfilter"
)

// Entity is one series of an insight: an event (ID the event name, nil
// for any event) or an action (ActionID), with its own filters.
type Entity struct {
	Type         string // "events" or "actions"
	ID           *string
	ActionID     uint64
	Order        int
	Index        int // position after the stable sort by Order
	Math         string
	MathProperty string
	Properties   any // decoded filters
}

// Filter is the parsed legacy insight filter shared by the actor routes
// (reference §1.2).
type Filter struct {
	Series     []Entity
	Properties any // global filters, decoded
	Range      Range
	Interval   Interval
	Loc        *time.Location
	// Breakdown: a property (event or person per BreakdownType) whose value
	// must equal BreakdownValue when set.
	Breakdown      string
	BreakdownType  string
	BreakdownValue *string
	Search         string
	// Cohorts compiles cohort filters of the project (cohort.Service.
	// Options(project).Cohorts); nil: every cohort filter names an unknown
	// cohort. The caller sets it after ParseFilter.
	Cohorts propfilter.CohortResolver
}

// ParseFilter reads the shared parameters. loc is the project's zone, now
// the clock relative dates count from.
func ParseFilter(q url.Values, loc *time.Location, now time.Time) (*Filter, error) {
	f := &Filter{Loc: loc, Search: strings.TrimSpace(q.Get("search")), BreakdownType: "event"}
	var err error
	for _, typ := range []string{"events", "actions"} {
		list, err := parseEntities(typ, q.Get(typ))
		if err != nil {
			return nil, err
		}
		f.Series = append(f.Series, list...)
	}
	sort.SliceStable(f.Series, func(i, j int) bool { return f.Series[i].Order < f.Series[j].Order })
	for i := range f.Series {
		f.Series[i].Index = i
	}
	if f.Properties, err = decodeJSON("properties", q.Get("properties")); err != nil {
		return nil, err
	}
	// Compile once here so that a malformed filter is a 400 before any query.
	if _, err := newFilters().compile("properties", f.Properties); err != nil {
		return nil, err
	}
	if f.Interval, err = parseInterval(q.Get("interval")); err != nil {
		return nil, err
	}
	explicit, err := parseBool("explicit_date", q.Get("explicit_date"))
	if err != nil {
		return nil, err
	}
	if f.Range, err = resolveRange(q.Get("date_from"), q.Get("date_to"), explicit, f.Interval, now, loc); err != nil {
		return nil, err
	}
	if err := f.parseBreakdown(q); err != nil {
		return nil, err
	}
	if v := q.Get("aggregation_group_type_index"); v != "" {
		return nil, invalidf("aggregation_group_type_index", "Group analytics is not supported: actors are persons.")
	}
	return f, nil
}

func (f *Filter) parseBreakdown(q url.Values) error {
	f.Breakdown = q.Get("breakdown")
	if t := q.Get("breakdown_type"); t != "" {
		f.BreakdownType = t
	}
	if _, ok := q["breakdown_value"]; !ok || f.Breakdown == "" {
		return nil
	}
	switch f.BreakdownType {
	case "event", "person":
	default:
		return invalidf("breakdown_type", "breakdown_type %q is not supported (event or person).", f.BreakdownType)
	}
	if strings.HasPrefix(strings.TrimSpace(f.Breakdown), "[") || q.Get("breakdown_histogram_bin_count") != "" {
		return invalidf("breakdown", "Multi-property and histogram breakdowns are not supported; give one property name.")
	}
	v := q.Get("breakdown_value")
	f.BreakdownValue = &v
	return nil
}

// parseBool accepts true|false|1|0 (and "" as false).
func parseBool(attr, s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, invalidf(attr, "%s must be true or false.", attr)
}

// parseEntities reads the events or actions parameter: a JSON array of
// entity objects.
func parseEntities(typ, text string) ([]Entity, error) {
	v, err := decodeJSON(typ, text)
	if err != nil || v == nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, invalidf(typ, "%s must be a JSON array of entities.", typ)
	}
	out := make([]Entity, 0, len(list))
	for _, it := range list {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, invalidf(typ, "Each entity of %s must be a JSON object.", typ)
		}
		e, err := entityOf(typ, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func entityOf(typ string, obj map[string]any) (Entity, error) {
	e := Entity{Type: typ}
	if o, ok := obj["order"]; ok && o != nil {
		n, ok := o.(json.Number)
		i, err := strconv.Atoi(string(n))
		if !ok || err != nil {
			return Entity{}, invalidf(typ, "An entity's order must be an integer.")
		}
		e.Order = i
	}
	if err := e.setID(obj["id"]); err != nil {
		return Entity{}, err
	}
	e.Math, _ = obj["math"].(string)
	e.MathProperty, _ = obj["math_property"].(string)
	e.Properties = obj["properties"]
	if _, err := newFilters().compile(typ, e.Properties); err != nil {
		return Entity{}, err
	}
	return e, nil
}

// setID reads an entity id: an event name (or null, any event) for
// events, an integer (or its decimal text) for actions.
func (e *Entity) setID(v any) error {
	if e.Type == "events" {
		switch id := v.(type) {
		case nil:
			return nil
		case string:
			e.ID = &id
			return nil
		case json.Number:
			s := id.String()
			e.ID = &s
			return nil
		}
		return invalidf("events", "An event entity's id must be an event name or null.")
	}
	var s string
	switch id := v.(type) {
	case json.Number:
		s = id.String()
	case string:
		s = id
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return invalidf("actions", "An action entity's id must be a positive integer.")
	}
	e.ActionID = n
	return nil
}

// Target picks the series a trends or stickiness request is about: the
// one at entity_order when given, else the first of entity_type whose id
// is entity_id (and math entity_math when given). A request without a
// matching series but with entity_type=events names a bare event series
// (any event when entity_id is absent).
func (f *Filter) Target(q url.Values) (Entity, error) {
	typ := firstOf(q, "entity_type", "type")
	id := firstOf(q, "entity_id", "entityId")
	math := q.Get("entity_math")
	if typ == "" {
		typ = "events"
	}
	if typ != "events" && typ != "actions" {
		return Entity{}, invalidf("entity_type", "entity_type must be events or actions.")
	}
	if o := q.Get("entity_order"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			return Entity{}, invalidf("entity_order", "entity_order must be a series index (0, 1, ...).")
		}
		if n < len(f.Series) {
			return f.Series[n], nil
		}
	}
	for _, e := range f.Series {
		if e.Type != typ || (math != "" && mathOf(e) != math) {
			continue
		}
		if (typ == "events" && e.ID != nil && *e.ID == id) || (typ == "actions" && strconv.FormatUint(e.ActionID, 10) == id) {
			return e, nil
		}
	}
	missing := invalidf("entity_id", "An entity id and the entity type must be provided to determine an entity.")
	bare := Entity{Type: typ, Math: math}
	switch {
	case typ == "actions":
		if err := bare.setID(id); err != nil {
			return Entity{}, missing
		}
	case id != "":
		bare.ID = &id
	case firstOf(q, "entity_type", "type") == "":
		return Entity{}, missing
	} // entity_type=events without an id: any event
	return bare, nil
}

func firstOf(q url.Values, names ...string) string {
	for _, n := range names {
		if v := q.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func mathOf(e Entity) string {
	if e.Math == "" {
		return "total"
	}
	return e.Math
}
