package insight

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Property filters of analysis routes use the persons list's language
// (pkg/propfilter: arrays, AND/OR groups, legacy dicts, the same operators),
// with one difference: a filter without a type is an EVENT filter, as in
// PostHog's insights. Event and person filters may be mixed in any group.
//
// Each leaf is compiled by propfilter, which reads a property through the
// person table's parallel arrays property_keys/property_values. Event
// leaves are compiled the same way and then pointed at e_keys/e_values:
// arrays the query builds from events.properties for exactly the keys the
// filters name (eventArrays), so both kinds share one set of operator
// semantics and the same NULL-free predicates.

// cond is a boolean SQL fragment with ? placeholders; "" is no constraint.
type cond struct {
	sql  string
	args []any
}

func and(cs ...cond) cond { return join("AND", cs) }

// subquery is c as a SELECT for another package's statement (c a SELECT
// of one column); the zero Subquery when c is empty.
func (c cond) subquery() statement.Subquery { return statement.NewSubquery(c.sql, c.args...) }

func or(cs ...cond) cond { return join("OR", cs) }

func join(op string, cs []cond) cond {
	var kept []cond
	for _, c := range cs {
		if c.sql != "" {
			kept = append(kept, c)
		}
	}
	switch len(kept) {
	case 0:
		return cond{}
	case 1:
		return kept[0]
	}
	parts := make([]string, len(kept))
	var args []any
	for i, c := range kept {
		parts[i] = c.sql
		args = append(args, c.args...)
	}
	return cond{"(" + strings.Join(parts, " "+op+" ") + ")", args}
}

// filters compiles property filters and remembers which event keys and
// whether person columns the query must provide.
type filters struct {
	eventKeys map[string]struct{}
	person    bool
	count     int
	// ctx and cohorts compile cohort filters (a condition over the persons
	// row, the persons list's hook); cohorts nil: only their shape is
	// checked, as ParseFilter does before the project's cohorts are known.
	ctx     context.Context
	cohorts propfilter.CohortResolver
}

func newFilters() *filters { return &filters{eventKeys: map[string]struct{}{}} }

// decodeJSON parses text as one JSON value with exact numbers.
func decodeJSON(attr, text string) (any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf(attr, "%s is not valid JSON: %v", attr, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidf(attr, "%s is not valid JSON: unexpected data after the value", attr)
	}
	return v, nil
}

// compile turns a decoded properties value (array, group, legacy dict, or
// nil) into a condition; attr names the parameter in errors.
func (f *filters) compile(attr string, v any) (cond, error) {
	switch t := v.(type) {
	case nil:
		return cond{}, nil
	case []any:
		return f.items(attr, t, "AND", 1)
	case map[string]any:
		if op, ok := groupOp(t); ok {
			return f.group(attr, t, op, 1)
		}
		return f.legacy(attr, t)
	}
	return cond{}, invalidf(attr, "Properties are unparsable! They must be a JSON array or object.")
}

// groupOp reports whether obj is an AND/OR group (propfilter's rule).
func groupOp(obj map[string]any) (string, bool) {
	if s, ok := obj["type"].(string); ok {
		if u := strings.ToUpper(s); u == "AND" || u == "OR" {
			return u, true
		}
	}
	_, hasType := obj["type"]
	_, hasKey := obj["key"]
	_, hasValues := obj["values"]
	if !hasType && !hasKey && hasValues {
		return "AND", true
	}
	return "", false
}

func (f *filters) group(attr string, obj map[string]any, op string, depth int) (cond, error) {
	if depth > propfilter.MaxDepth {
		return cond{}, invalidf(attr, "Properties are unparsable! Groups are nested deeper than %d levels.", propfilter.MaxDepth)
	}
	values, ok := obj["values"].([]any)
	if !ok {
		return cond{}, invalidf(attr, "Properties are unparsable! A group needs a JSON array of values.")
	}
	return f.items(attr, values, op, depth)
}

func (f *filters) items(attr string, list []any, op string, depth int) (cond, error) {
	parts := make([]cond, 0, len(list))
	for _, it := range list {
		obj, ok := it.(map[string]any)
		if !ok {
			return cond{}, invalidf(attr, "Properties are unparsable! Each filter must be a JSON object.")
		}
		var c cond
		var err error
		if gop, isGroup := groupOp(obj); isGroup {
			c, err = f.group(attr, obj, gop, depth+1)
		} else {
			c, err = f.leaf(attr, obj)
		}
		if err != nil {
			return cond{}, err
		}
		parts = append(parts, c)
	}
	return join(op, parts), nil
}

// legacy compiles {"key__operator": value} (event filters), sorted by name.
func (f *filters) legacy(attr string, obj map[string]any) (cond, error) {
	names := make([]string, 0, len(obj))
	for n := range obj {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]cond, 0, len(names))
	for _, n := range names {
		key, op := n, "exact"
		if i := strings.LastIndex(n, "__"); i >= 0 {
			key, op = n[:i], n[i+2:]
		}
		c, err := f.leaf(attr, map[string]any{"key": key, "operator": op, "value": obj[n]})
		if err != nil {
			return cond{}, err
		}
		parts = append(parts, c)
	}
	return and(parts...), nil
}

// leaf compiles one filter through propfilter (as a person filter), then
// points event filters at the event arrays.
func (f *filters) leaf(attr string, obj map[string]any) (cond, error) {
	f.count++
	if f.count > propfilter.MaxFilters {
		return cond{}, invalidf(attr, "Properties are unparsable! Too many filters (at most %d).", propfilter.MaxFilters)
	}
	kind := "event"
	if t, ok := obj["type"]; ok && t != nil {
		s, ok := t.(string)
		if !ok {
			return cond{}, invalidf(attr, "Properties are unparsable! A filter type must be a string.")
		}
		if s != "" {
			kind = s
		}
	}
	switch kind {
	case "event", "person":
	case "cohort":
		return f.cohort(attr, obj)
	default:
		return cond{}, invalidf(attr, "Filters of type %q are not supported here (only event, person and cohort filters).", kind)
	}
	leaf := map[string]any{"type": "person"}
	for _, k := range []string{"key", "value", "operator"} {
		if v, ok := obj[k]; ok {
			leaf[k] = v
		}
	}
	raw, err := json.Marshal([]any{leaf})
	if err != nil {
		return cond{}, invalidf(attr, "Properties are unparsable! %v", err)
	}
	clause, err := propfilter.Parse(string(raw))
	if err != nil {
		var pe *propfilter.Error
		if errors.As(err, &pe) {
			return cond{}, invalidf(attr, "Properties are unparsable! %s", pe.Detail)
		}
		return cond{}, err
	}
	c := cond{clause.SQL, clause.Args}
	if kind == "person" {
		f.person = true
		return c, nil
	}
	f.eventKeys[obj["key"].(string)] = struct{}{} // propfilter accepted it: a non-empty string
	c.sql = strings.NewReplacer("property_keys", "e_keys", "property_values", "e_values").Replace(c.sql)
	return c, nil
}

// cohort compiles {"type":"cohort","key":"id","value":N} (negation
// allowed) through propfilter and the resolver: membership of the event's
// current person.
func (f *filters) cohort(attr string, obj map[string]any) (cond, error) {
	ctx, res := f.ctx, f.cohorts
	if ctx == nil {
		ctx = context.Background()
	}
	if res == nil {
		res = anyCohort{}
	}
	raw, err := json.Marshal([]any{obj})
	if err != nil {
		return cond{}, invalidf(attr, "Properties are unparsable! %v", err)
	}
	clause, err := propfilter.ParseWith(ctx, string(raw), propfilter.Options{Cohorts: res})
	if err != nil {
		var pe *propfilter.Error
		if errors.As(err, &pe) {
			return cond{}, invalidf(attr, "Properties are unparsable! %s", pe.Detail)
		}
		return cond{}, err
	}
	f.person = true
	return cond{clause.SQL, clause.Args}, nil
}

// anyCohort accepts every cohort id: the shape check before the project's
// cohorts are known.
type anyCohort struct{}

func (anyCohort) CohortClause(context.Context, uint64) (propfilter.Clause, bool, error) {
	return propfilter.Clause{SQL: "(1 = 1)"}, true, nil
}

// keys returns the event keys the filters name, sorted.
func (f *filters) keys() []string {
	out := make([]string, 0, len(f.eventKeys))
	for k := range f.eventKeys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// eventArrays is the SELECT part defining e_keys and e_values for keys:
// e_keys holds each key the event has (” for those it lacks, so has()
// is presence), e_values the value as text the way propfilter.ValueText
// renders person properties: strings unquoted, anything else as its JSON.
//
// visitParamExtract* reads the first occurrence of the key at any depth
// of the JSON text, a limit of ClickHouse 18.16 (no JSON parser there);
// docs/analysis.md states it.
func eventArrays(keys []string) cond {
	if len(keys) == 0 {
		return cond{}
	}
	var ks, vs []string
	var kargs, vargs []any
	for _, k := range keys {
		ks = append(ks, "if(visitParamHas(properties, ?), ?, '')")
		kargs = append(kargs, k, k)
		vs = append(vs, "if(visitParamHas(properties, ?), if(substring(visitParamExtractRaw(properties, ?), 1, 1) = '\"', "+
			"visitParamExtractString(properties, ?), visitParamExtractRaw(properties, ?)), '')")
		vargs = append(vargs, k, k, k, k)
	}
	return cond{"[" + strings.Join(ks, ", ") + "] AS e_keys, [" + strings.Join(vs, ", ") + "] AS e_values", append(kargs, vargs...)}
}
