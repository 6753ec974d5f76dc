package propfilter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limits on the size of a filter document.
const (
	// MaxDepth is the deepest allowed nesting of groups; the top level
	// (array, group object or legacy dict) is level 1.
	MaxDepth = 8
	// MaxFilters is the maximum number of filters, ignored ones included.
	MaxFilters = 100
	// MaxListValues is the maximum number of elements in a list value.
	MaxListValues = 1000
)

// Clause is a WHERE fragment with positional `?` placeholders. SQL "" means
// no constraint; otherwise SQL is a self-contained boolean expression (a
// function call or a parenthesised expression, safe to join with AND) and
// len(Args) equals the number of placeholders. Args holds only string and
// float64 values.
type Clause struct {
	SQL  string
	Args []any
}

// Error reports a malformed properties parameter. The HTTP layer answers it
// with status 400.
type Error struct {
	Detail string
}

func (e *Error) Error() string { return e.Detail }

func errorf(format string, a ...any) *Error {
	return &Error{Detail: fmt.Sprintf(format, a...)}
}

// Parse turns the raw properties parameter into a WHERE fragment; cohort
// and behavioural filters are ignored (ParseWith compiles them).
func Parse(raw string) (Clause, error) {
	return ParseWith(context.Background(), raw, Options{})
}

// CohortResolver compiles cohort membership: the caller knows its cohorts.
type CohortResolver interface {
	// CohortClause returns a condition over a row of the persons table
	// (columns id, project_id, property_keys, property_values) that holds
	// when the person is a member of the cohort; found is false for a
	// cohort that does not exist (or is deleted). Any error is returned
	// by ParseWith as is.
	CohortClause(ctx context.Context, id uint64) (c Clause, found bool, err error)
}

// Options extend Parse with filter types that need the caller.
type Options struct {
	// Cohorts compiles {"type":"cohort","key":"id","value":N}; nil:
	// cohort filters are ignored, as Parse does.
	Cohorts CohortResolver
	// Behavioral compiles {"type":"behavioral", ...} filters (cohort
	// definitions) into a condition over a persons row; nil: ignored.
	Behavioral func(ctx context.Context, filter map[string]any) (Clause, error)
	// Now is the instant relative dates ("-7d") count back from; nil:
	// time.Now.
	Now func() time.Time
	// Events compiles EVENT property filters instead of person ones
	// (events.go): type "event", or no type, over the properties column
	// of an events row; any other type is an *Error, never ignored.
	Events bool
}

// ParseWith is Parse with cohort and behavioural filters compiled by opts.
// An unknown cohort is an *Error (a 400 of the properties parameter).
func ParseWith(ctx context.Context, raw string, opts Options) (Clause, error) {
	f, _, err := buildWith(ctx, raw, opts)
	if err != nil {
		return Clause{}, err
	}
	if opts.Events {
		f = eventColumns(f)
	}
	return Clause{SQL: f.sql, Args: f.args}, nil
}

// Keys returns the sorted distinct person property keys named by the filter
// (ignored non-person filters excluded). It fails exactly when Parse fails.
func Keys(raw string) ([]string, error) {
	_, keys, err := build(raw)
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// frag is a compiled SQL fragment. An empty sql means "no constraint"; a
// non-empty one is an atom (function call or parenthesised expression).
type frag struct {
	sql  string
	args []any
}

type parser struct {
	filters int
	keys    map[string]struct{}
	ctx     context.Context
	opts    Options
}

// now is the instant relative dates count back from.
func (p *parser) now() time.Time {
	if p.opts.Now != nil {
		return p.opts.Now()
	}
	return time.Now()
}

func build(raw string) (frag, []string, error) {
	return buildWith(context.Background(), raw, Options{})
}

func buildWith(ctx context.Context, raw string, opts Options) (frag, []string, error) {
	v, err := decode(raw)
	if err != nil {
		return frag{}, nil, err
	}
	p := &parser{keys: map[string]struct{}{}, ctx: ctx, opts: opts}
	f, err := p.top(v)
	if err != nil {
		return frag{}, nil, err
	}
	keys := make([]string, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return f, keys, nil
}

// decode parses raw as a single JSON value with numbers kept as json.Number.
// Blank input decodes to nil.
func decode(raw string) (any, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errorf("properties are not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errorf("properties are not valid JSON: unexpected data after the JSON value")
	}
	return v, nil
}

func (p *parser) top(v any) (frag, error) {
	switch t := v.(type) {
	case nil:
		return frag{}, nil
	case []any:
		return p.items(t, "AND", 1)
	case map[string]any:
		if op, ok := groupOp(t); ok {
			return p.group(t, op, 1)
		}
		return p.legacy(t)
	default:
		return frag{}, errorf("properties must be a JSON array or object, not %s", kind(v))
	}
}

// groupOp reports whether obj is a group and, if so, its operator.
func groupOp(obj map[string]any) (string, bool) {
	t, hasType := obj["type"]
	if s, ok := t.(string); ok {
		switch strings.ToUpper(s) {
		case "AND", "OR":
			return strings.ToUpper(s), true
		}
	}
	_, hasValues := obj["values"]
	_, hasKey := obj["key"]
	if !hasType && !hasKey && hasValues {
		return "AND", true
	}
	return "", false
}

func (p *parser) group(obj map[string]any, op string, depth int) (frag, error) {
	if depth > MaxDepth {
		return frag{}, errorf("filter groups are nested deeper than %d levels", MaxDepth)
	}
	values, ok := obj["values"].([]any)
	if !ok {
		return frag{}, errorf("group %q must have a JSON array of values", op)
	}
	return p.items(values, op, depth)
}

func (p *parser) items(list []any, op string, depth int) (frag, error) {
	parts := make([]frag, 0, len(list))
	for _, it := range list {
		obj, ok := it.(map[string]any)
		if !ok {
			return frag{}, errorf("each filter must be a JSON object, not %s", kind(it))
		}
		var f frag
		var err error
		if gop, isGroup := groupOp(obj); isGroup {
			f, err = p.group(obj, gop, depth+1)
		} else {
			f, err = p.filter(obj)
		}
		if err != nil {
			return frag{}, err
		}
		parts = append(parts, f)
	}
	return combine(op, parts), nil
}

func (p *parser) count() error {
	p.filters++
	if p.filters > MaxFilters {
		return errorf("too many filters (at most %d)", MaxFilters)
	}
	return nil
}

// filter compiles one filter object; filters of other types than person
// (and cohort or behavioral when opts compile them) yield an empty frag.
// "negation": true negates the filter (cohort definitions use it).
func (p *parser) filter(obj map[string]any) (frag, error) {
	f, err := p.filterPlain(obj)
	if err != nil || f.sql == "" {
		return f, err
	}
	switch neg := obj["negation"].(type) {
	case nil:
	case bool:
		if neg {
			f = not(f)
		}
	default:
		return frag{}, errorf("filter negation must be a boolean, not %s", kind(neg))
	}
	return f, nil
}

func (p *parser) filterPlain(obj map[string]any) (frag, error) {
	if err := p.count(); err != nil {
		return frag{}, err
	}
	if t, ok := obj["type"]; ok && t != nil {
		s, ok := t.(string)
		if !ok {
			return frag{}, errorf("filter type must be a string, not %s", kind(t))
		}
		switch {
		case p.opts.Events && s != "" && s != "event":
			return frag{}, errorf("only event property filters (type \"event\") are allowed here, not type %q", s)
		case p.opts.Events:
		case s == "cohort" && p.opts.Cohorts != nil:
			return p.cohort(obj)
		case s == "behavioral" && p.opts.Behavioral != nil:
			c, err := p.opts.Behavioral(p.ctx, obj)
			return frag{sql: c.SQL, args: c.Args}, err
		case s != "" && s != "person":
			return frag{}, nil
		}
	}
	kv, ok := obj["key"]
	if !ok || kv == nil {
		return frag{}, errorf("filter without key")
	}
	key, ok := kv.(string)
	if !ok {
		return frag{}, errorf("filter key must be a string, not %s", kind(kv))
	}
	if key == "" {
		return frag{}, errorf("filter without key")
	}
	op := "exact"
	if ov, ok := obj["operator"]; ok && ov != nil {
		s, ok := ov.(string)
		if !ok {
			return frag{}, errorf("filter operator must be a string, not %s", kind(ov))
		}
		if s != "" {
			op = s
		}
	}
	return p.leaf(key, op, obj["value"])
}

// legacy compiles a {"key__operator": value} dict in sorted key order.
func (p *parser) legacy(obj map[string]any) (frag, error) {
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]frag, 0, len(names))
	for _, name := range names {
		if err := p.count(); err != nil {
			return frag{}, err
		}
		key, op := splitLegacy(name)
		if key == "" {
			return frag{}, errorf("filter without key")
		}
		f, err := p.leaf(key, op, obj[name])
		if err != nil {
			return frag{}, err
		}
		parts = append(parts, f)
	}
	return combine("AND", parts), nil
}

// splitLegacy splits "key__operator" at the last "__".
func splitLegacy(name string) (key, op string) {
	i := strings.LastIndex(name, "__")
	if i < 0 {
		return name, "exact"
	}
	return name[:i], name[i+2:]
}

// combine joins non-empty parts with AND or OR.
func combine(op string, parts []frag) frag {
	var kept []frag
	for _, f := range parts {
		if f.sql != "" {
			kept = append(kept, f)
		}
	}
	switch len(kept) {
	case 0:
		return frag{}
	case 1:
		return kept[0]
	}
	var sb strings.Builder
	var args []any
	sb.WriteByte('(')
	for i, f := range kept {
		if i > 0 {
			sb.WriteString(" " + op + " ")
		}
		sb.WriteString(f.sql)
		args = append(args, f.args...)
	}
	sb.WriteByte(')')
	return frag{sql: sb.String(), args: args}
}

// kind names the JSON type of a decoded value for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64, int:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// cohort compiles {"type":"cohort","key":"id","value":N} through the
// resolver.
func (p *parser) cohort(obj map[string]any) (frag, error) {
	if k, ok := obj["key"]; ok && k != "id" {
		return frag{}, errorf(`a cohort filter has key "id", not %v`, k)
	}
	var id uint64
	var err error
	switch v := obj["value"].(type) {
	case json.Number:
		id, err = strconv.ParseUint(v.String(), 10, 64)
	case string:
		id, err = strconv.ParseUint(v, 10, 64)
	default:
		return frag{}, errorf("a cohort filter's value is a cohort id, not %s", kind(v))
	}
	if err != nil || id == 0 {
		return frag{}, errorf("a cohort filter's value is a cohort id, not %v", obj["value"])
	}
	c, found, err := p.opts.Cohorts.CohortClause(p.ctx, id)
	if err != nil {
		return frag{}, err
	}
	if !found {
		return frag{}, errorf("cohort %d does not exist", id)
	}
	if c.SQL == "" {
		return frag{"(1 = 1)", nil}, nil
	}
	return frag{"(" + c.SQL + ")", c.Args}, nil
}
