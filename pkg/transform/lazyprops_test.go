package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/personhub/personhub/pkg/event"
)

// lazySnippets each look at and change e.properties (p) the ways a plugin
// may, and record what they saw in e.event: run on lazy properties and on
// the plain object jsEvent builds, they must see and give the same.
var lazySnippets = []string{
	`seen = Object.keys(p)`,
	`seen = Object.getOwnPropertyNames(p).concat(Reflect.ownKeys(p).map(String))`,
	`seen = Object.entries(p)`,
	`seen = []; for (var k in p) seen.push(k)`,
	`seen = {...p}`,
	`seen = Object.assign({}, p)`,
	`seen = JSON.stringify(p)`,
	`seen = JSON.stringify(p, null, 1)`,
	`seen = [("a" in p), ("missing" in p), ("toString" in p), p.hasOwnProperty("a"), Object.prototype.hasOwnProperty.call(p, "__proto__")]`,
	`seen = [Object.getPrototypeOf(p) === Object.prototype, p instanceof Object, typeof p, Array.isArray(p), String(p), Object.prototype.toString.call(p)]`,
	`seen = [Object.isExtensible(p), Object.isFrozen(p), Object.isSealed(p)]`,
	`seen = Object.getOwnPropertyDescriptor(p, "a")`,
	`seen = Object.getOwnPropertyDescriptors(p)`,
	`seen = [delete p.a, delete p.missing, Object.keys(p)]; p.a = 1; seen.push(Object.keys(p))`,
	`p.z = 1; p.a = 2; p["10"] = 3; p["2"] = 4; seen = Object.keys(p)`,
	`p.obj.x = 2; p.arr.push(3); seen = [p.obj === p.obj, p.arr.length]`,
	`var o = p.obj; delete p.obj; o.y = 1; seen = Object.keys(p)`,
	`p.a = undefined; p.f = function(){}; p.n = NaN; seen = Object.keys(p)`,
	`p.d = new Date(0); p.s = new String("x"); p.t = {toJSON: function(k) { return "key " + k }}; seen = 1`,
	`p.toJSON = function() { return {only: 1} }; seen = 1`,
	`p.self = [1]; seen = [p.big, p.f, p.u, p["é"], p.__proto__]`,
	`p.__proto__ = {inherited: 1}; seen = [p.inherited, Object.keys(p), JSON.stringify(p)]`,
	`Object.setPrototypeOf(p, null); seen = [Object.getPrototypeOf(p), JSON.stringify(p), "toString" in p]`,
	`Object.freeze(p); seen = [Object.isFrozen(p), Object.keys(p)]`,
	`Object.preventExtensions(p); seen = Object.isExtensible(p)`,
	`Object.defineProperty(p, "g", {get: function() { return 7 }, enumerable: true}); seen = [p.g, Object.keys(p)]`,
	`Object.defineProperty(p, "h", {value: 1, enumerable: false}); seen = Object.keys(p)`,
	`p[Symbol.for("s")] = 1; seen = Object.getOwnPropertySymbols(p).length`,
	`Object.defineProperty(p, "a", {value: 9, writable: true, enumerable: true, configurable: true}); seen = p.a`,
	`e.properties = {fresh: 1}; seen = 1`,
	`e.properties = null; seen = 1`,
	`e.$set = p; seen = 1`,
	`e.Properties = {b: 1}; seen = 1`,
	`p.self = p; seen = 1`,
	`var q = p; e = {event: e.event, distinct_id: e.distinct_id, properties: q}; seen = 1`,
	`seen = Object.values(p).length + Object.keys(p).length`,
	`seen = structuredCloneLike(p); function structuredCloneLike(x) { return JSON.parse(JSON.stringify(x)) }`,
	`seen = [Object.keys(e), JSON.stringify(e), Object.entries(e).length, "uuid" in e, e.hasOwnProperty("$set"), typeof e.team_id]`,
	`seen = {...e}; seen.properties = Object.keys(seen.properties)`,
	`seen = Object.getOwnPropertyDescriptors(e).event`,
	`delete e.timestamp; seen = Object.keys(e)`,
	`e.distinct_id = "other"; e.extra = 1; seen = Object.keys(e)`,
	`e.$set = {plan: "x"}; e.$set_once = null; seen = 1`,
	`if (e.$set) e.$set.more = 1; seen = e.$set`,
	`e.team_id = 3; seen = 1`,
	`delete e.uuid; delete e.team_id; seen = 1`,
	`e.Event = "cased"; seen = 1`,
	`Object.freeze(e); seen = Object.isFrozen(e)`,
	`Object.defineProperty(e, "event", {get: function() { return "g" }}); seen = 1`,
	`e.toJSON = function() { return {event: "j", distinct_id: "d2", properties: {}} }; seen = 1`,
	`var copy = Object.assign({}, e); copy.properties.c = 1; e = copy; seen = 1`,
	`e.properties.x = 1; e = JSON.parse(JSON.stringify(e)); seen = 1`,
	`e.event = ""; seen = 1`,
	`throw new Error("boom")`,
	`return null`,
}

var lazyTexts = []string{
	`{"b":1,"a":"x","10":true,"2":null,"__proto__":{"z":1},"obj":{"x":1},"arr":[1,2],"é":"é <&>","big":12345678901234567890,"f":1.50,"u":"\ud800x"}`,
	`{"a":1,"a":2,"A":3, "sp" : [ 1 , {"k" : "v"} ] , "\u0041\u00e9":"\"e1\"", "4294967295": 1, "4294967294": 2, "01": 3}`,
	`{}`,
	`{"$set":{"email":"a@example.com"},"$set_once":{"x":1},"obj":{"x":{"y":[]}},"arr":[]}`,
}

// lazyRun runs one snippet on the properties text, lazily or not, in a
// fresh instance.
func lazyRun(t *testing.T, snippet, text string, lazy bool) (*Event, error) {
	return lazyRunSet(t, snippet, text, nil, lazy)
}

func lazyRunSet(t *testing.T, snippet, text string, set map[string]any, lazy bool) (*Event, error) {
	t.Helper()
	src := `exports.processEvent = function(e) { "use strict"; var seen; var p = e.properties; ` + snippet +
		`; e.event = JSON.stringify(seen === undefined ? null : seen); return e }`
	if strings.Contains(snippet, "__proto__ =") || strings.Contains(snippet, "function structuredCloneLike") {
		src = strings.Replace(src, `"use strict"; `, "", 1) // sloppy mode: the same on both
	}
	prog, err := compile("index.js", src)
	if err != nil {
		t.Fatal(err)
	}
	// A generous limit: the machine is shared, and a timeout here says
	// nothing about laziness.
	in, err := newInstance(prog, nil, nil, Limits{Timeout: 10 * time.Second}.withDefaults(), newWatchdog(time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{Event: "e", DistinctID: "d", UUID: "0190c6c5-0000-7000-8000-000000000001", TeamID: 2, Timestamp: "2026-11-20T10:00:00Z", text: propsText(text), Set: set}
	if !lazy {
		ev = ev.materialized()
	} else if _, ok := newLazyProps(in.vm, ev.text); !ok {
		t.Fatalf("%s: not lazy", text)
	}
	return in.call(ev, 0)
}

// sameJSON reports whether two JSON texts hold the same values (numbers
// as float64: a property the plugin left keeps its text when lazy).
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestLazyPropsArePlain: a plugin sees and gives the same through lazy
// properties as through the plain object (what it reads, key order, the
// prototype, in, delete, spread, JSON.stringify, and what a dynamic
// object cannot do, which runs again on the plain object), and the
// ingester folds the same event.
func TestLazyPropsArePlain(t *testing.T) {
	for i, text := range lazyTexts {
		var set map[string]any
		if i%2 == 1 {
			set = map[string]any{"plan": "pro", "n": map[string]any{"k": json.Number("1")}}
		}
		for _, snippet := range lazySnippets {
			name := fmt.Sprintf("%.30s/%s", text, snippet)
			want, werr := lazyRunSet(t, snippet, text, set, false)
			got, gerr := lazyRunSet(t, snippet, text, set, true)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || (want == nil) != (got == nil) {
				t.Errorf("%s:\nlazy  %v %v\nplain %v %v", name, got, gerr, want, werr)
				continue
			}
			if got == nil {
				continue
			}
			if got.Event != want.Event {
				t.Errorf("%s: saw\nlazy  %s\nplain %s", name, got.Event, want.Event)
			}
			gm, wm := got.materialized(), want.materialized()
			gj, _ := json.Marshal(gm)
			wj, _ := json.Marshal(wm)
			if !sameJSON(gj, wj) {
				t.Errorf("%s: result\nlazy  %s\nplain %s", name, gj, wj)
			}
			gp, gerr := got.Parsed()
			wp, werr := want.Parsed()
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Errorf("%s: parsed: lazy %v, plain %v", name, gerr, werr)
				continue
			}
			if gerr == nil {
				if !sameJSON(gp.PropertiesRaw, wp.PropertiesRaw) {
					t.Errorf("%s: stored\nlazy  %s\nplain %s", name, gp.PropertiesRaw, wp.PropertiesRaw)
				}
				gp.PropertiesRaw, wp.PropertiesRaw = nil, nil
				gj, _ := json.Marshal([]any{gp.Properties, gp.Set, gp.SetOnce, gp.Unset})
				wj, _ := json.Marshal([]any{wp.Properties, wp.Set, wp.SetOnce, wp.Unset})
				if !sameJSON(gj, wj) {
					t.Errorf("%s: folded\nlazy  %s\nplain %s", name, gj, wj)
				}
			}
		}
	}
}

// TestLazyKeepsUntouchedText: what the plugin did not change is stored as
// received (a large integer keeps its digits); what it set is written.
func TestLazyKeepsUntouchedText(t *testing.T) {
	got, err := lazyRun(t, `p.added = 1; p.obj.x = 2; delete p.b`, `{"big":12345678901234567890,"f":1.50,"b":1,"obj":{"x":1}}`, true)
	if err != nil || got == nil {
		t.Fatal(got, err)
	}
	pe, err := got.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"added":1,"big":12345678901234567890,"f":1.50,"obj":{"x":2}}`; string(pe.PropertiesRaw) != want {
		t.Fatalf("stored %s, want %s", pe.PropertiesRaw, want)
	}
}

// TestLazyIsolation is TestIsolation on the ingester's events: a plugin
// keeping the lazy properties of one event and changing them later
// changes neither that event's result nor a later one's.
func TestLazyIsolation(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	keeper := Step{ConfigID: 1, Order: 1, Filename: "index.js", Source: `exports.processEvent = function(e, meta) {
		if (meta.global.last) { meta.global.last.leaked = true; meta.global.lastNested.x = 3 }
		meta.global.last = e.properties; meta.global.lastNested = e.properties.nested
		e.properties.old = "mutated"; e.properties.nested.x = 2
		return e
	}`}
	second := Step{ConfigID: 2, Order: 2, Filename: "index.js", Source: `exports.processEvent = function(e) {
		e.properties.seen = Object.keys(e.properties).join(","); return e }`}
	raw := `{"old":"v","nested":{"x":1}}`
	var first *Event
	for i := range 2 {
		ev := Event{Event: "pageview", DistinctID: "d", UUID: "0190c6c5-0000-7000-8000-000000000001", TeamID: 2, Timestamp: "2026-11-20T10:00:00Z", text: propsText(raw)}
		res := r.RunPlanned(context.Background(), []Step{keeper, second}, ev, nil)
		if res.Event == nil || res.Steps[0].Outcome != OutcomeOK || res.Steps[1].Outcome != OutcomeOK {
			t.Fatalf("event %d: %+v", i, res.Steps)
		}
		if string(ev.text) != raw {
			t.Fatalf("event %d: the caller's event was changed: %s", i, ev.text)
		}
		want := `{"nested":{"x":2},"old":"mutated","seen":"nested,old"}`
		if got := string(res.Event.text); got != want {
			t.Fatalf("event %d: %s, want %s", i, got, want)
		}
		if first == nil {
			first = res.Event
		} else if string(first.text) != want {
			t.Fatalf("the first event's result changed: %s", first.text)
		}
	}
}

// FuzzLazyProps is TestLazyPropsArePlain on any properties text the
// envelope scanner takes, with a snippet chosen by the fuzzer.
func FuzzLazyProps(f *testing.F) {
	for i, text := range lazyTexts {
		f.Add(text, uint8(i*7))
	}
	f.Add(`{"1e5":1e5,"x":[1e400],"y":"\u0000"}`, uint8(3))
	f.Fuzz(func(t *testing.T, text string, pick uint8) {
		ev, err := event.Parse([]byte(`{"uuid":"0190c6c5-0000-7000-8000-000000000001","event":"e","distinct_id":"d","timestamp":"2026-11-20T10:00:00Z","properties":` + text + `}`))
		if err != nil || ev.PropertiesRaw == nil || ev.PropertiesRaw[0] != '{' {
			return
		}
		text = string(ev.PropertiesRaw)
		snippet := lazySnippets[int(pick)%len(lazySnippets)]
		vm := goja.New()
		if _, ok := newLazyProps(vm, []byte(text)); !ok {
			return // the plain path: nothing lazy to compare
		}
		want, werr := lazyRun(t, snippet, text, false)
		got, gerr := lazyRun(t, snippet, text, true)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || (want == nil) != (got == nil) {
			t.Fatalf("%s / %s:\nlazy  %v %v\nplain %v %v", text, snippet, got, gerr, want, werr)
		}
		if got == nil {
			return
		}
		gj, _ := json.Marshal(got.materialized())
		wj, _ := json.Marshal(want.materialized())
		if got.Event != want.Event || !sameJSON(gj, wj) {
			t.Fatalf("%s / %s:\nlazy  %s\nplain %s", text, snippet, gj, wj)
		}
		gp, gerr := got.Parsed()
		wp, werr := want.Parsed()
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || gerr == nil && !sameJSON(gp.PropertiesRaw, wp.PropertiesRaw) {
			t.Fatalf("%s / %s: stored\nlazy  %s %v\nplain %s %v", text, snippet, gp.PropertiesRaw, gerr, wp.PropertiesRaw, werr)
		}
	})
}
