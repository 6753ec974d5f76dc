package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// jsReader reads a processEvent result as json.Unmarshal(JSON.stringify(v))
// into any would, walking the objects in goja's stringify order: toJSON
// methods and getters are called as stringify calls them, boxed
// primitives are unwrapped, functions, symbols and undefined are left out
// (null in arrays), NaN and infinities are null, a cycle or a BigInt is
// the same TypeError. It runs inside a native function called from Go
// (read), so a getter's throw or an interrupt unwinds it the way it
// unwinds JSON.stringify. It counts the bytes the text would have had and
// stops past the limit.
type jsReader struct {
	vm      *goja.Runtime
	isArray goja.Callable // the realm's Array.isArray, taken before plugin code ran
	stack   []*goja.Object
	size    int
	max     int
	over    bool
	// keys are the top-level object's keys in order: json.Unmarshal
	// into a struct matches keys case-insensitively and the last wins.
	keys []string
}

// errTooBig stops a walk past the size limit.
type errTooBig struct{}

var (
	proxyType = reflect.TypeOf(goja.Proxy{})
	lazyType  = reflect.TypeOf((*lazyProps)(nil))
)

func newReader(vm *goja.Runtime) (*jsReader, error) {
	isArray, ok := goja.AssertFunction(vm.Get("Array").ToObject(vm).Get("isArray"))
	if !ok {
		return nil, fmt.Errorf("transform: Array.isArray missing")
	}
	return &jsReader{vm: vm, isArray: isArray}, nil
}

// read returns the result's JSON value, whether stringify would have
// written anything, and false in over when it would be longer than max.
func (r *jsReader) read(v goja.Value, max int) (out any, ok bool) {
	r.stack, r.size, r.max, r.over, r.keys = r.stack[:0], 0, max, false, r.keys[:0]
	defer func() {
		if x := recover(); x != nil {
			if _, ok := x.(errTooBig); !ok {
				panic(x) // a JavaScript throw or interrupt: goja's to unwind
			}
			r.over, out, ok = true, nil, false
		}
	}()
	return r.prop("", v)
}

func (r *jsReader) grow(n int) {
	if r.size += n; r.size > r.max {
		panic(errTooBig{})
	}
}

// prop is stringify's SerializeJSONProperty on a value already read. The
// key becomes a JavaScript string only for a toJSON call.
func (r *jsReader) prop(key string, value goja.Value) (any, bool) {
	if o, isObj := value.(*goja.Object); isObj || goja.IsBigInt(value) {
		var tj goja.Value
		if isObj {
			tj = o.Get("toJSON")
		} else {
			tj = value.ToObject(r.vm).Get("toJSON")
		}
		if f, ok := goja.AssertFunction(tj); ok {
			v, err := f(value, r.vm.ToValue(key))
			if err != nil {
				panic(err) // a throw or an interrupt, re-raised in the caller's frame
			}
			value = v
		}
	}
	if o, ok := value.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			value = o.ToNumber()
		case "String":
			value = r.vm.ToValue(o.String())
		case "Boolean":
			b, _ := o.Export().(bool)
			value = r.vm.ToValue(b)
		case "BigInt":
			panic(r.vm.NewTypeError("Do not know how to serialize a BigInt"))
		case "Symbol":
			return nil, false
		}
	}
	if value == nil || goja.IsUndefined(value) {
		return nil, false
	}
	if goja.IsNull(value) {
		r.grow(4)
		return nil, true
	}
	o, ok := value.(*goja.Object)
	if !ok {
		return r.primitive(value)
	}
	if o.ClassName() == "RawJSON" {
		text := o.Get("rawJSON").String()
		r.grow(len(text))
		var v any
		_ = json.Unmarshal([]byte(text), &v) // JSON.rawJSON checked it is a JSON primitive
		return v, true
	}
	for _, s := range r.stack {
		if s.SameAs(o) {
			panic(r.vm.NewTypeError("Converting circular structure to JSON"))
		}
	}
	if _, ok := goja.AssertFunction(o); ok {
		return nil, false
	}
	r.stack = append(r.stack, o)
	defer func() { r.stack = r.stack[:len(r.stack)-1] }()
	if o.ExportType() == lazyType {
		lp, _ := o.Export().(*lazyProps)
		switch {
		case lp.ev == nil:
			text, err := lp.text(r.prop)
			if err != nil {
				panic(r.vm.NewTypeError(err.Error()))
			}
			r.grow(len(text))
			return text, true
		case lp.untouched():
			return r.event(lp), true
		}
	}
	if r.array(o) {
		return r.arrayItems(o), true
	}
	return r.object(o), true
}

func (r *jsReader) primitive(v goja.Value) (any, bool) {
	if _, ok := v.(*goja.Symbol); ok {
		return nil, false // Export would give its description
	}
	switch x := v.Export().(type) {
	case bool:
		r.grow(5)
		return x, true
	case string:
		r.grow(quotedLen(x))
		return x, true
	case int64:
		r.grow(len(strconv.FormatInt(x, 10)))
		return float64(x), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r.grow(4)
			return nil, true
		}
		r.grow(len(v.String()))
		if x == 0 {
			return float64(0), true // -0 is written "0"
		}
		return x, true
	case *big.Int:
		panic(r.vm.NewTypeError("Do not know how to serialize a BigInt"))
	}
	return nil, false
}

func (r *jsReader) array(o *goja.Object) bool {
	if o.ClassName() == "Array" {
		return true
	}
	if o.ExportType() != proxyType {
		return false
	}
	v, err := r.isArray(goja.Undefined(), o)
	if err != nil {
		panic(err)
	}
	return v.ToBoolean()
}

func (r *jsReader) arrayItems(o *goja.Object) []any {
	n := o.Get("length").ToInteger()
	r.grow(2)
	out := make([]any, 0, min(max(n, 0), 1024))
	for i := int64(0); i < n; i++ {
		k := strconv.FormatInt(i, 10)
		v, ok := r.prop(k, o.Get(k))
		if !ok {
			r.grow(4)
		}
		r.grow(1)
		out = append(out, v)
	}
	return out
}

// event is object on an event the plugin left as it came but for its
// properties: its fields are read from the Event, not through goja. The
// result itself with properties the reader gave as text is that Event
// with the text (a *Event, which result takes as eventFromJSON's).
func (r *jsReader) event(lp *lazyProps) any {
	top := len(r.stack) == 1
	var props any
	propsOK := false
	if i := lp.find("properties"); i >= 0 {
		props, propsOK = r.prop("properties", lp.entries[i].val)
	}
	if t, ok := props.(propsText); ok && propsOK && top && lp.ev.TeamID <= 1<<53 {
		// Above 2^53 the team id read as a JavaScript number is not the
		// project's: eventFromJSON refuses it, and so must this.
		out := *lp.ev
		out.Properties, out.text, out.parsed = nil, t, nil
		r.grow(len(t) + 40 + quotedLen(out.Event) + quotedLen(out.DistinctID) + quotedLen(out.Timestamp) + quotedLen(out.UUID) + 20)
		return &out
	}
	out := make(map[string]any, len(lp.entries))
	r.grow(2)
	for _, e := range lp.entries {
		var v any
		switch x := e.gov.(type) {
		case string:
			v = x
			r.grow(quotedLen(x))
		case json.Number:
			f, _ := strconv.ParseFloat(string(x), 64)
			v = f
			r.grow(len(x))
		case map[string]any:
			// $set or $set_once never read: what the reader would give of
			// the object jsValue builds of it.
			var ok bool
			if v, ok = r.prop(e.key, lp.Get(e.key)); !ok {
				continue
			}
		default:
			if e.key == "properties" {
				if v = props; !propsOK {
					continue
				}
			} else {
				var ok bool
				if v, ok = r.prop(e.key, e.val); !ok {
					continue
				}
			}
		}
		r.grow(quotedLen(e.key) + 2)
		out[e.key] = v
		if top {
			r.keys = append(r.keys, e.key)
		}
	}
	return out
}

func (r *jsReader) object(o *goja.Object) map[string]any {
	top := len(r.stack) == 1
	keys := o.Keys()
	out := make(map[string]any, len(keys))
	r.grow(2)
	for _, k := range keys {
		v, ok := r.prop(k, o.Get(k))
		if !ok {
			continue
		}
		r.grow(quotedLen(k) + 2)
		out[k] = v
		if top {
			r.keys = append(r.keys, k)
		}
	}
	return out
}

// quotedLen is the length of s as stringify quotes it.
func quotedLen(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

// eventFields are the Event's JSON fields, as json.Unmarshal matches them.
var eventFields = [...]string{"event", "distinct_id", "properties", "timestamp", "uuid", "team_id", "$set", "$set_once"}

// eventFromJSON is json.Unmarshal of the top-level object m (keys in
// order) into an Event, with whether team_id and uuid were present (as
// decodeResult's raw map tells).
func eventFromJSON(m map[string]any, keys []string) (out Event, hasTeam, hasUUID bool, err error) {
	dst := [len(eventFields)]any{&out.Event, &out.DistinctID, &out.Properties, &out.Timestamp, &out.UUID, &out.TeamID, &out.Set, &out.SetOnce}
	// The lazy properties kept as one key "properties" stay text;
	// anywhere else (merged with another key matching it, under $set),
	// they are the map they stand for.
	named := 0
	for _, k := range keys {
		if strings.EqualFold(k, "properties") {
			named++
		}
	}
	text, lazy := m["properties"].(propsText)
	lazy = lazy && named == 1
	for _, k := range keys {
		hasTeam = hasTeam || k == "team_id"
		hasUUID = hasUUID || k == "uuid"
		f := -1
		for i, name := range eventFields {
			if k == name || f < 0 && strings.EqualFold(k, name) {
				f = i
			}
		}
		if f < 0 {
			continue
		}
		if f == 2 && lazy {
			out.text = text
			continue
		}
		if e := setField(dst[f], m[k]); e != nil && err == nil {
			err = fmt.Errorf("json: cannot unmarshal %s into Go struct field Event.%s", e, eventFields[f])
		}
	}
	return out, hasTeam, hasUUID, err
}

// setField sets one field as json.Unmarshal would: null leaves a string
// or a number as it was and makes a map nil; an object fills a map
// already there. The error is the JSON kind that does not fit.
func setField(dst, v any) error {
	if t, ok := v.(propsText); ok {
		v = t.decoded()
	}
	if v == nil {
		if p, ok := dst.(*map[string]any); ok {
			*p = nil
		}
		return nil
	}
	switch p := dst.(type) {
	case *string:
		if s, ok := v.(string); ok {
			*p = s
			return nil
		}
	case *map[string]any:
		if x, ok := v.(map[string]any); ok {
			// A copy when merging: the first map is also a value of m.
			merged := maps.Clone(*p)
			if merged == nil {
				merged = x
			} else {
				maps.Copy(merged, x)
			}
			*p = merged
			return nil
		}
	case *uint64:
		if x, ok := v.(float64); ok {
			// The text JSON.stringify wrote; a fraction, a sign or an
			// exponent does not fit a uint64.
			id, perr := strconv.ParseUint(strconv.FormatFloat(x, 'f', -1, 64), 10, 64)
			if perr == nil && x < 1e21 {
				*p = id
				return nil
			}
		}
	}
	return errors.New(jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	}
	return "object"
}
