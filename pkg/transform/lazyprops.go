package transform

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/personhub/personhub/pkg/event"
)

// lazyProps is an event's properties as processEvent gets them in the
// ingester: a goja dynamic object over the envelope's properties text.
// A property is decoded when the plugin reads it, and the result's
// properties are that text again, with only the properties the plugin
// set, deleted or could have changed (an object or array it read)
// written anew. Decoding every property into a Go map, building every
// one as a JavaScript value and reading every one back was most of a
// trivial step's cost (the transformations figure, docs/performance.md). To the plugin it is the
// plain object jsEvent builds (TestLazyPropsArePlain): keys in the same
// order, the same values, the same prototype. What a dynamic object
// cannot be (frozen, sealed, an accessor or non-writable property, a
// symbol key) throws a TypeError naming a dynamic object, and the call is
// made again on plain objects (instance.call). A plugin that catches that
// TypeError itself is not run again, and goes on with what the plain
// object would have refused (docs/plugins.md).
type lazyProps struct {
	vm      *goja.Runtime
	entries []propEntry
	// src is the text the entries came from (trimmed), n0 their number;
	// while no entry was deleted and none of them changed, the text
	// stays src with the new ones appended (text). dups: src repeats a
	// key, so it must be written anew.
	src     []byte
	n0      int
	deleted bool
	dups    bool
	// The first init entries are the given ones still there, in the
	// text's order; sorted: that order is the keys' (a plain object
	// lists them sorted, then the added ones).
	init   int
	sorted bool
	// ev, for the event itself (newLazyEvent), is the event it stands
	// for: returned untouched but for its properties, it is read without
	// walking it (jsReader.prop).
	ev *Event
}

// propEntry is one property: its text (or Go value) until the plugin
// reads or sets it.
type propEntry struct {
	key string
	raw []byte     // the value's JSON text; nil: gov, or set by the plugin
	gov any        // the value as jsValue takes it, when raw is nil
	val goja.Value // the value, once read or set
	// dirty: val may differ from raw (set, or an object the plugin may
	// have changed): written from val.
	dirty bool
}

// propsText is the JSON text of a lazyProps as the reader found it.
type propsText []byte

// MarshalJSON writes the text: a lazy object inside another value.
func (t propsText) MarshalJSON() ([]byte, error) { return t, nil }

// decoded is the text as a map, as FromEnvelope decodes properties.
func (t propsText) decoded() map[string]any {
	m, _ := event.DecodeObject(t)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// newLazyProps reads the keys of an object's text. The plugin sees them
// sorted and without repeats (the last one kept): the order and values
// jsEvent gives the same object decoded into a map. Without repeats they
// stay in the text's order (sorting them for every event cost a sixth of
// the construction; Keys sorts them when asked). false when the text
// holds what only the eager path treats right (a number beyond float64,
// which JSON.parse refuses) or is not an object the scanner reads.
func newLazyProps(vm *goja.Runtime, raw []byte) (*lazyProps, bool) {
	lp := &lazyProps{vm: vm, src: bytes.TrimSpace(raw), sorted: true}
	if len(lp.src) == 0 || string(lp.src) == "null" {
		lp.src = []byte("{}")
		return lp, true
	}
	// At least one entry per member (a colon each): growing the slice
	// copied it, a tenth of the construction.
	lp.entries = make([]propEntry, 0, min(bytes.Count(lp.src, []byte{':'}), 64))
	overflow := false
	ok := event.Members(raw, func(k string, v []byte) {
		if n := len(lp.entries); n > 0 && lp.entries[n-1].key >= k {
			lp.sorted = false
		}
		// Strings cannot overflow: only the other values are looked at.
		overflow = overflow || v[0] != '"' && mayOverflow(v)
		lp.entries = append(lp.entries, propEntry{key: k, raw: v})
	})
	if !ok || overflow {
		return nil, false
	}
	if !lp.sorted && repeats(lp.entries) {
		// Stable: of repeated keys the last stays last, and is kept.
		slices.SortStableFunc(lp.entries, func(a, b propEntry) int { return strings.Compare(a.key, b.key) })
		out := lp.entries[:0]
		for i, e := range lp.entries {
			if i+1 < len(lp.entries) && lp.entries[i+1].key == e.key {
				continue
			}
			out = append(out, e)
		}
		lp.entries, lp.dups, lp.sorted = out, true, true
	}
	lp.n0, lp.init = len(lp.entries), len(lp.entries)
	return lp, true
}

// repeats reports whether a key appears twice.
func repeats(entries []propEntry) bool {
	if len(entries) > 32 {
		seen := make(map[string]bool, len(entries))
		for _, e := range entries {
			if seen[e.key] {
				return true
			}
			seen[e.key] = true
		}
		return false
	}
	for i := range entries {
		for j := i + 1; j < len(entries); j++ {
			if entries[i].key == entries[j].key {
				return true
			}
		}
	}
	return false
}

// newLazyEvent is the event object jsEvent builds, as a dynamic object
// with ev's properties a lazyProps: fields in the same order, each made a
// JavaScript value when read. false as newLazyProps, or when a field
// needs the text path (jsEvent).
func newLazyEvent(vm *goja.Runtime, ev *Event) (*goja.Object, bool) {
	props, ok := newLazyProps(vm, ev.text)
	if !ok {
		return nil, false
	}
	lp := &lazyProps{vm: vm, ev: ev, entries: make([]propEntry, 0, 8), sorted: true}
	for _, s := range [...]string{ev.Event, ev.DistinctID, ev.Timestamp, ev.UUID} {
		if !utf8.ValidString(s) {
			return nil, false
		}
	}
	lp.entries = append(lp.entries, propEntry{key: "event", gov: ev.Event}, propEntry{key: "distinct_id", gov: ev.DistinctID},
		propEntry{key: "properties", val: vm.NewDynamicObject(props)})
	if ev.Timestamp != "" {
		lp.entries = append(lp.entries, propEntry{key: "timestamp", gov: ev.Timestamp})
	}
	lp.entries = append(lp.entries, propEntry{key: "uuid", gov: ev.UUID}, propEntry{key: "team_id", gov: json.Number(strconv.FormatUint(ev.TeamID, 10))})
	for _, f := range [...]struct {
		key string
		m   map[string]any
	}{{"$set", ev.Set}, {"$set_once", ev.SetOnce}} {
		if len(f.m) > 0 {
			if !convertible(f.m) {
				return nil, false // the text path (jsEvent)
			}
			lp.entries = append(lp.entries, propEntry{key: f.key, gov: f.m})
		}
	}
	lp.n0, lp.init = len(lp.entries), len(lp.entries)
	return vm.NewDynamicObject(lp), true
}

// convertible reports whether jsValue converts v (walking it, building
// nothing).
func convertible(v any) bool {
	switch v := v.(type) {
	case nil, bool:
		return true
	case string:
		return utf8.ValidString(v)
	case json.Number:
		_, err := strconv.ParseFloat(string(v), 64)
		return err == nil
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0)
	case map[string]any:
		for k, x := range v {
			if !utf8.ValidString(k) || !convertible(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range v {
			if !convertible(x) {
				return false
			}
		}
		return true
	case []string:
		for _, x := range v {
			if !utf8.ValidString(x) {
				return false
			}
		}
		return true
	}
	return false
}

// untouched reports whether the plugin neither set, added nor deleted a
// property, nor read an object it could have changed.
func (lp *lazyProps) untouched() bool {
	if lp.deleted || len(lp.entries) != lp.n0 {
		return false
	}
	for _, e := range lp.entries {
		if e.dirty {
			return false
		}
	}
	return true
}

// props is the lazyProps of an event's properties, while they are the
// ones it was given.
func (lp *lazyProps) props() *lazyProps {
	if i := lp.find("properties"); i >= 0 {
		if o, ok := lp.entries[i].val.(*goja.Object); ok && o.ExportType() == lazyType {
			p, _ := o.Export().(*lazyProps)
			return p
		}
	}
	return nil
}

// mayOverflow reports whether raw may hold a number strconv.ParseFloat
// refuses: one with an exponent, or of 309 digits and more (beyond
// float64 either way). Only numbers are looked at, not strings.
func mayOverflow(raw []byte) bool {
	inString, escaped, run := false, false, 0
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString, run = true, 0
		case (c == 'e' || c == 'E') && run > 0:
			return true // an exponent (true and false have no digits before)
		case '0' <= c && c <= '9':
			if run++; run >= 309 {
				return true
			}
		case c == '.':
		default:
			run = 0
		}
	}
	return false
}

// arrayIndex reports whether k is an array index, which plain objects
// list first, in ascending order (ECMAScript OrdinaryOwnPropertyKeys,
// as goja does): canonical digits below 2^32-1.
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || len(k) > 1 && k[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(k[i]-'0')
	}
	return n, n < 1<<32-1
}

func (lp *lazyProps) find(key string) int {
	for i := range lp.entries {
		if lp.entries[i].key == key {
			return i
		}
	}
	return -1
}

// Get decodes the property the first time it is read.
func (lp *lazyProps) Get(key string) goja.Value {
	i := lp.find(key)
	if i < 0 {
		return nil
	}
	e := &lp.entries[i]
	if e.val == nil {
		v, err := e.gov, error(nil)
		if e.raw != nil {
			v, err = event.DecodeValue(e.raw)
		}
		jv, ok := jsValue(lp.vm, v)
		if err != nil || !ok {
			// newLazyProps let through only what converts.
			panic(lp.vm.NewTypeError("transform: property %q cannot be read", key))
		}
		e.val = jv
		_, isObj := jv.(*goja.Object)
		e.dirty = isObj
	}
	return e.val
}

// Set sets or adds a property; a new one comes last, as on a plain object.
func (lp *lazyProps) Set(key string, val goja.Value) bool {
	if i := lp.find(key); i >= 0 {
		lp.entries[i].val, lp.entries[i].raw, lp.entries[i].gov, lp.entries[i].dirty = val, nil, nil, true
		return true
	}
	lp.entries = append(lp.entries, propEntry{key: key, val: val, dirty: true})
	return true
}

func (lp *lazyProps) Has(key string) bool { return lp.find(key) >= 0 }

func (lp *lazyProps) Delete(key string) bool {
	if i := lp.find(key); i >= 0 {
		lp.entries = slices.Delete(lp.entries, i, i+1)
		lp.deleted = true
		if i < lp.init {
			lp.init--
		}
	}
	return true
}

// Keys are in a plain object's order: array indexes ascending, then the
// other keys in the order they were added.
func (lp *lazyProps) Keys() []string {
	entries := lp.entries
	if !lp.sorted {
		entries = slices.Clone(entries)
		slices.SortFunc(entries[:lp.init], func(a, b propEntry) int { return strings.Compare(a.key, b.key) })
	}
	keys := make([]string, 0, len(entries))
	var idx []string
	for _, e := range entries {
		if _, ok := arrayIndex(e.key); ok {
			idx = append(idx, e.key)
		} else {
			keys = append(keys, e.key)
		}
	}
	if idx == nil {
		return keys
	}
	slices.SortFunc(idx, func(a, b string) int {
		x, _ := arrayIndex(a)
		y, _ := arrayIndex(b)
		return cmp.Compare(x, y)
	})
	return append(idx, keys...)
}

// text is the properties as JSON text. While the plugin changed or
// deleted none of the properties it was given, that is their text as
// received with the ones it added appended; otherwise json.Marshal's text
// of the map the reader would have read from a plain object (keys
// sorted), in which a property the plugin did not change keeps its text
// as received. value reads a changed one as the reader does (false: left
// out, as JSON.stringify leaves out undefined and functions).
func (lp *lazyProps) text(value func(key string, v goja.Value) (any, bool)) (propsText, error) {
	kept := !lp.deleted && !lp.dups
	for i := 0; kept && i < lp.n0; i++ {
		kept = !lp.entries[i].dirty
	}
	var b bytes.Buffer
	order := make([]int, 0, len(lp.entries))
	if kept {
		b.Grow(len(lp.src) + 32*(len(lp.entries)-lp.n0))
		b.Write(lp.src[:len(lp.src)-1])
		for i := lp.n0; i < len(lp.entries); i++ {
			order = append(order, i)
		}
	} else {
		b.WriteByte('{')
		for i := range lp.entries {
			order = append(order, i)
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(lp.entries[a].key, lp.entries[b].key) })
	}
	first := !kept || lp.n0 == 0
	for _, i := range order {
		e := lp.entries[i]
		text := e.raw
		if e.dirty {
			v, ok := value(e.key, e.val)
			if !ok {
				continue
			}
			var err error
			if text, err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeKey(&b, e.key)
		b.Write(text)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeKey writes key and a colon as json.Marshal writes a map key: most
// keys need no escaping, and are written without it.
func writeKey(b *bytes.Buffer, key string) {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			k, _ := json.Marshal(key)
			b.Write(k)
			b.WriteByte(':')
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(key)
	b.WriteString(`":`)
}
