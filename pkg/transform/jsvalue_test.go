package transform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// The event crosses into the runtime without JSON text (jsEvent) and
// back (jsReader); these tests hold both to the text round trip they
// replace: JSON.parse(json.Marshal(ev)) in, decodeResult(JSON.stringify(v))
// out.

func bridge(t testing.TB) *instance {
	prog, err := compile("index.js", `exports.processEvent = function(e) { return e }`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := newInstance(prog, nil, nil, Limits{}.withDefaults(), newWatchdog(time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (in *instance) stringify(t testing.TB, v goja.Value) string {
	f, _ := goja.AssertFunction(in.vm.Get("JSON").ToObject(in.vm).Get("stringify"))
	s, err := f(goja.Undefined(), v)
	if err != nil {
		t.Fatal(err)
	}
	return s.String()
}

// viaText is the old way out; viaReader the new one.
func (in *instance) viaText(v goja.Value, ev Event) (Event, error) {
	f, _ := goja.AssertFunction(in.vm.Get("JSON").ToObject(in.vm).Get("stringify"))
	s, err := f(goja.Undefined(), v)
	if err != nil {
		return ev, err
	}
	if len(s.String()) > in.limits.MaxEventBytes {
		return ev, ErrShape
	}
	return decodeResult([]byte(s.String()), ev)
}

func (in *instance) viaReader(v goja.Value, ev Event) (Event, error) {
	if _, err := in.readFn(goja.Undefined(), v); err != nil {
		return ev, err
	}
	return in.result(ev)
}

func sameOutcome(t *testing.T, what string, a, b Event, ea, eb error) {
	t.Helper()
	if (ea == nil) != (eb == nil) || errors.Is(ea, ErrShape) != errors.Is(eb, ErrShape) || errors.Is(ea, ErrIdentity) != errors.Is(eb, ErrIdentity) {
		t.Fatalf("%s: text path error %v, reader error %v", what, ea, eb)
	}
	a.parsed, b.parsed = nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("%s:\ntext   %#v\nreader %#v", what, a, b)
	}
}

func TestReaderMatchesStringify(t *testing.T) {
	in := bridge(t)
	ev := sample("in")
	ok := 0
	for _, expr := range []string{
		`e`,
		`(e.properties.added = 1, e)`,
		`{event: "x", team_id: 8}`,
		`{event: "x", team_id: 7, uuid: "0190c6c5-0000-7000-8000-000000000001"}`,
		`{event: "x", team_id: 7.5}`, `{event: "x", team_id: "7"}`, `{event: "x", team_id: -0}`, `{event: "x", team_id: null}`,
		`{event: "x", uuid: null}`, `{event: "x", distinct_id: 5}`, `{event: "x", distinct_id: null, timestamp: "2026-11-20T10:00:00Z"}`,
		`{event: "x", Event: "y", EVENT: "z", Distinct_ID: "dd"}`,
		`{event: "x", properties: {a: 1}, Properties: {b: 2}}`,
		`{event: "x", properties: {a: 1}, Properties: null}`,
		`{event: "x", properties: [1]}`, `{event: "x", $set: "s"}`, `{event: "x", $SET: {a: 1}, $set_ONCE: {b: [1, {c: null}]}}`,
		`{event: "x", get distinct_id() { return "g" }}`,
		`{event: "x", properties: {d: new Date(0), n: new Number(5), s: new String("s"), b: new Boolean(false), f: function() {}, u: undefined,
			sym: Symbol("x"), nan: NaN, inf: -Infinity, nz: -0, arr: [undefined, function() {}, 1.5, "x", Symbol("y")], big: 1e21, i: 2 ** 60,
			q: "\u2028\"<>\\\n\u0001", m: new Map([[1, 2]]), re: /x/g, ta: new Uint8Array([1, 2])}}`,
		`{toJSON() { return {event: "tj", properties: {k: {toJSON(k) { return "key:" + k }}}} }}`,
		`{event: "x", properties: {a: [{toJSON(k) { return k }}]}}`,
		`{event: "x", properties: new Proxy([1, 2], {})}`,
		`{event: "x", properties: {p: new Proxy([1, 2], {}), o: new Proxy({a: 1}, {})}}`,
		`(function() { var o = {event: "x"}; o.properties = {o: o}; return o })()`,
		`(function() { var s = {a: 1}; return {event: "x", properties: {s1: s, s2: s}} })()`,
		`{event: "x", properties: {b: 10n}}`,
		`{event: "x", get properties() { throw new Error("boom") }}`,
		`Object.assign(Object.create({inherited: 1}), {event: "x"})`,
		`Object.defineProperty({event: "x"}, "hidden", {value: 1, enumerable: false})`,
		`[1]`, `new Number(1)`, `function() {}`, `{toJSON() { return undefined }}`, `{toJSON() { return null }}`,
		`JSON.parse('{"event":"x","properties":{"__proto__":{"a":1}}}')`,
		`{event: "x", properties: {r: typeof JSON.rawJSON === "function" ? JSON.rawJSON("12") : 12}}`,
		`{event: "x", properties: {long: "y".repeat(1 << 20)}}`,
	} {
		fresh := func() goja.Value {
			// E gives a result the fields the envelope needs, so that
			// the values get as far as the comparison.
			f, err := in.vm.RunString(`(function(e) {
				function E(o) { if (!("distinct_id" in o)) o.distinct_id = "d"; if (!("timestamp" in o)) o.timestamp = "2026-11-20T10:00:00Z"; return o }
				var r = (` + expr + `);
				return r && typeof r === "object" && Object.getPrototypeOf(r) === Object.prototype && !("toJSON" in r) ? E(r) : r })`)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			call, _ := goja.AssertFunction(f)
			arg, _ := jsEvent(in.vm, ev)
			v, err := call(goja.Undefined(), arg)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			return v
		}
		a, ea := in.viaText(fresh(), ev)
		b, eb := in.viaReader(fresh(), ev)
		sameOutcome(t, expr, a, b, ea, eb)
		// The values themselves, before the envelope's checks.
		var want any
		sf, _ := goja.AssertFunction(in.vm.Get("JSON").ToObject(in.vm).Get("stringify"))
		text, err := sf(goja.Undefined(), fresh())
		_, rerr := in.readFn(goja.Undefined(), fresh()) // read alone: result lets go of readOut
		if err == nil && rerr == nil && json.Unmarshal([]byte(text.String()), &want) == nil && in.readOK && !reflect.DeepEqual(want, in.readOut) {
			t.Fatalf("%s:\ntext   %#v\nreader %#v", expr, want, in.readOut)
		}
		if ea == nil {
			ok++
		}
	}
	if ok < 15 {
		t.Fatalf("only %d results were accepted: the comparison is too weak", ok)
	}
}

// TestInputMatchesParse: jsEvent builds what JSON.parse of the marshalled
// event gives, key order and all, or says it cannot.
func TestInputMatchesParse(t *testing.T) {
	in := bridge(t)
	ev := sample("in")
	ev.Properties = map[string]any{"__proto__": map[string]any{"a": json.Number("1")}, "b": []any{json.Number("12345678901234567890"), nil, true, "s"},
		"$unset": []string{"x"}, "2": "two", "10": 1.5, "z": map[string]any{}, "nil": map[string]any(nil)}
	ev.Set = map[string]any{"plan": "pro"}
	check := func(ev Event, built bool) {
		t.Helper()
		o, ok := jsEvent(in.vm, ev)
		if ok != built {
			t.Fatalf("built %v, want %v", ok, built)
		}
		if !ok {
			return
		}
		text, _ := json.Marshal(ev)
		p, err := in.parse(goja.Undefined(), in.vm.ToValue(string(text)))
		if err != nil {
			t.Fatal(err)
		}
		if a, b := in.stringify(t, p), in.stringify(t, o); a != b {
			t.Fatalf("JSON.parse %s\njsEvent    %s", a, b)
		}
		proto, _ := in.vm.RunString(`(function(o) { return o.properties === null || Object.getPrototypeOf(o.properties) === Object.prototype })`)
		f, _ := goja.AssertFunction(proto)
		if v, _ := f(goja.Undefined(), o); !v.ToBoolean() {
			t.Fatal("a __proto__ key set the prototype")
		}
	}
	check(ev, true)
	check(Event{Event: "x", TeamID: 7}, true)
	bad := sample("in")
	bad.Properties = map[string]any{"n": json.Number("1e400")}
	check(bad, false)
	bad.Properties = map[string]any{"s": "\xff"}
	check(bad, false)
}

// FuzzJSBridge: any JSON object as properties crosses in as JSON.parse
// would build it and back as stringify and decodeResult would read it.
func FuzzJSBridge(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"__proto__":{"x":[1,2,{"y":null}]}}`, `{"n":1e400}`, `{"s":"\u2028\ud800"}`, `{"k":-0,"big":123456789012345678901234}`} {
		f.Add([]byte(s))
	}
	in := bridge(f)
	f.Fuzz(func(t *testing.T, text []byte) {
		var props map[string]any
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if dec.Decode(&props) != nil || props == nil {
			return
		}
		ev := sample("in")
		ev.Properties = props
		o, ok := jsEvent(in.vm, ev)
		raw, err := json.Marshal(ev)
		if err != nil {
			if ok {
				t.Fatalf("built an event json.Marshal refuses: %v", err)
			}
			return
		}
		p, perr := in.parse(goja.Undefined(), in.vm.ToValue(string(raw)))
		if ok && perr != nil {
			t.Fatalf("built an event JSON.parse refuses: %v", perr)
		}
		if !ok {
			return
		}
		if a, b := in.stringify(t, p), in.stringify(t, o); a != b {
			t.Fatalf("JSON.parse %s\njsEvent    %s", a, b)
		}
		x, ex := in.viaText(p, ev)
		y, ey := in.viaReader(o, ev)
		sameOutcome(t, string(text), x, y, ex, ey)
	})
}

// TestIsolation: a step sees only the previous step's result, never the
// caller's maps (a plugin mutating its input changes nothing outside),
// and an object a plugin kept from an earlier event is not the next
// event's.
func TestIsolation(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	keeper := Step{ConfigID: 1, Order: 1, Filename: "index.js", Source: `exports.processEvent = function(e, meta) {
		if (meta.global.last) { meta.global.last.properties.leaked = true; meta.global.last.event = "leaked" }
		meta.global.last = e
		e.properties.old = "mutated"; e.properties.nested.x = 2
		return {event: e.event, distinct_id: e.distinct_id, timestamp: e.timestamp, properties: {first: e.properties.old}}
	}`}
	second := Step{ConfigID: 2, Order: 2, Filename: "index.js", Source: `exports.processEvent = function(e) {
		e.properties.seen = Object.keys(e.properties).join(","); return e }`}
	for i := range 2 {
		ev := sample("pageview")
		ev.Properties["nested"] = map[string]any{"x": 1.0}
		res := r.Run(context.Background(), []Step{keeper, second}, ev)
		if res.Event == nil || res.Steps[0].Outcome != OutcomeOK || res.Steps[1].Outcome != OutcomeOK {
			t.Fatalf("event %d: %+v", i, res.Steps)
		}
		if ev.Properties["old"] != "v" || ev.Properties["nested"].(map[string]any)["x"] != 1.0 {
			t.Fatalf("event %d: the caller's event was mutated: %v", i, ev.Properties)
		}
		if got := res.Event.Properties; got["seen"] != "first" || got["leaked"] != nil || res.Event.Event != "pageview" {
			t.Fatalf("event %d: %v %q", i, got, res.Event.Event)
		}
	}
}
