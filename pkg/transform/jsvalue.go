package transform

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// The event crosses into and out of the plugin's runtime without JSON
// text. JSON.parse of the event, JSON.stringify of the result and Go's two
// decodings of that text were two thirds of a trivial step's cost
// (the transformations figure, docs/performance.md). Both directions give exactly what the text
// round trip gave, which stays the reference the tests compare against
// (jsvalue_test.go).

// jsEvent is JSON.parse(json.Marshal(ev)) built directly (an event with
// its properties as text becomes a lazy event, which stands for that
// object: newLazyEvent): plain objects
// and arrays in the order json.Marshal writes (struct fields in order,
// map keys sorted), every key an own data property (CreateDataProperty,
// as JSON.parse: a "__proto__" key is a property, not the prototype, and
// setters a plugin put on Object.prototype are not called). false when
// the event holds something json.Marshal would write differently (a
// string that is not UTF-8, a number that is not finite, a Go type the
// decoders never produce): the caller takes the text path.
func jsEvent(vm *goja.Runtime, ev Event) (*goja.Object, bool) {
	if ev.text != nil && ev.Properties == nil {
		return newLazyEvent(vm, &ev)
	}
	o := vm.NewObject()
	put := func(k string, v any) bool {
		jv, ok := jsValue(vm, v)
		return ok && o.DefineDataProperty(k, jv, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE) == nil
	}
	ok := put("event", ev.Event) && put("distinct_id", ev.DistinctID) && put("properties", ev.Properties)
	if ok && ev.Timestamp != "" {
		ok = put("timestamp", ev.Timestamp)
	}
	ok = ok && put("uuid", ev.UUID) && put("team_id", json.Number(strconv.FormatUint(ev.TeamID, 10)))
	if ok && len(ev.Set) > 0 {
		ok = put("$set", ev.Set)
	}
	if ok && len(ev.SetOnce) > 0 {
		ok = put("$set_once", ev.SetOnce)
	}
	return o, ok
}

func jsValue(vm *goja.Runtime, v any) (goja.Value, bool) {
	switch v := v.(type) {
	case nil:
		return goja.Null(), true
	case bool:
		return vm.ToValue(v), true
	case string:
		return vm.ToValue(v), utf8.ValidString(v)
	case json.Number:
		// What JSON.parse does with the number's text: goja reads it
		// with strconv.ParseFloat and fails where it fails.
		f, err := strconv.ParseFloat(string(v), 64)
		return vm.ToValue(f), err == nil
	case float64:
		return vm.ToValue(v), !math.IsNaN(v) && !math.IsInf(v, 0)
	case map[string]any:
		if v == nil {
			return goja.Null(), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			if !utf8.ValidString(k) {
				return nil, false
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		o := vm.NewObject()
		for _, k := range keys {
			jv, ok := jsValue(vm, v[k])
			if !ok || o.DefineDataProperty(k, jv, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE) != nil {
				return nil, false
			}
		}
		return o, true
	case []any:
		if v == nil {
			return goja.Null(), true
		}
		items := make([]any, len(v))
		for i, x := range v {
			jv, ok := jsValue(vm, x)
			if !ok {
				return nil, false
			}
			items[i] = jv
		}
		return vm.NewArray(items...), true
	case []string:
		if v == nil {
			return goja.Null(), true
		}
		items := make([]any, len(v))
		for i, x := range v {
			if !utf8.ValidString(x) {
				return nil, false
			}
			items[i] = vm.ToValue(x)
		}
		return vm.NewArray(items...), true
	}
	return nil, false
}
