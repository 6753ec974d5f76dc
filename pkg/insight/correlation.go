package insight

import (
	"context"
	"net/url"

	"github.com/personhub/personhub/pkg/chstore"
)

// FunnelCorrelation answers GET|POST /persons/funnel/correlation/: the
// persons of one row of the correlation table (reference §7). The
// population is the funnel's entrants (or funnel_step's persons); the
// events types keep those with an event of funnel_correlation_person_entity
// inside their counted attempt, the properties type those whose person
// properties match funnel_correlation_property_values; then
// funnel_correlation_person_converted keeps the converted (true) or the
// others (false), both when absent. By person id.
func (st *Store) FunnelCorrelation(ctx context.Context, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
	fn, err := ParseFunnel(q, f, false)
	if err != nil {
		return nil, err
	}
	converted, err := parseConverted(q.Get("funnel_correlation_person_converted"))
	if err != nil {
		return nil, err
	}
	var entity *Entity
	var person cond
	switch typ := q.Get("funnel_correlation_type"); typ {
	case "", "events", "event_with_properties":
		e, err := correlationEntity(q.Get("funnel_correlation_person_entity"))
		if err != nil {
			return nil, err
		}
		entity = &e
	case "properties":
		if person, err = correlationProperties(q.Get("funnel_correlation_property_values")); err != nil {
			return nil, err
		}
	default:
		return nil, invalidf("funnel_correlation_type", "funnel_correlation_type must be events, event_with_properties or properties, not %q.", typ)
	}
	fq, err := st.funnelScan(ctx, project, f, fn, entity)
	if err != nil {
		return nil, err
	}
	return st.funnelActors(ctx, f, fq, page, func(s *sqlText) {
		if entity != nil {
			s.add(" AND hit")
		}
		if person.sql != "" {
			in, args := chstore.LivePersons(project, person.sql, person.args...).In("pid")
			s.add(" AND "+in, args...)
		}
		switch {
		case converted == nil:
		case *converted:
			s.add(" AND level = ?", len(fn.Steps))
		default:
			s.add(" AND level < ?", len(fn.Steps))
		}
	})
}

// parseConverted reads funnel_correlation_person_converted: absent is
// both (nil).
func parseConverted(s string) (*bool, error) {
	if s == "" {
		return nil, nil
	}
	b, err := parseBool("funnel_correlation_person_converted", s)
	return &b, err
}

func correlationEntity(raw string) (Entity, error) {
	const attr = "funnel_correlation_person_entity"
	v, err := decodeJSON(attr, raw)
	if err != nil {
		return Entity{}, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Entity{}, invalidf(attr, "No entity for persons specified: funnel_correlation_person_entity must be a JSON entity {\"id\", \"type\", \"properties\"}.")
	}
	typ, _ := obj["type"].(string)
	if typ != "actions" {
		typ = "events"
	}
	e, err := entityOf(typ, obj)
	if err != nil {
		return Entity{}, invalidf(attr, "%s", err.(*Error).Detail)
	}
	return e, nil
}

// correlationProperties compiles the property row's filters; they are
// person properties whatever their type says (PostHog's correlation
// table lists person properties).
func correlationProperties(raw string) (cond, error) {
	const attr = "funnel_correlation_property_values"
	v, err := decodeJSON(attr, raw)
	if err != nil {
		return cond{}, err
	}
	if list, ok := v.([]any); v == nil || (ok && len(list) == 0) {
		return cond{}, invalidf(attr, "Property Correlation expects at least one property to get persons for.")
	}
	c, err := newFilters().compile(attr, asPersonFilters(v))
	if err != nil {
		return cond{}, err
	}
	if c.sql == "" {
		return cond{}, invalidf(attr, "Property Correlation expects at least one property to get persons for.")
	}
	return c, nil
}

// asPersonFilters marks every leaf of decoded filters as a person filter.
func asPersonFilters(v any) any {
	switch t := v.(type) {
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = asPersonFilters(x)
		}
		return out
	case map[string]any:
		if op, ok := groupOp(t); ok {
			return map[string]any{"type": op, "values": asPersonFilters(t["values"])}
		}
		if _, ok := t["key"]; !ok {
			return t // a legacy dict: compiled as it is
		}
		out := map[string]any{}
		for k, x := range t {
			out[k] = x
		}
		out["type"] = "person"
		return out
	}
	return v
}
