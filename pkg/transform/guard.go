package transform

import (
	"errors"
	"fmt"
	"runtime/metrics"
)

// ErrMemory is a call whose process heap grew past Limits.MaxHeapGrowth.
var ErrMemory = errors.New("processEvent allocated past its memory limit")

// guardPrelude replaces the built-ins that allocate in one native step
// (goja's Interrupt acts only between JavaScript instructions, so
// 'x'.repeat(1<<30) ran 5 s and took 1.1 GB before the time limit could
// act). Each replacement checks the size it is asked for against the
// per-call budget and throws a RangeError (a throw the plugin can catch)
// before the original runs. The originals stay only in this closure, and
// the prototypes' constructor properties point at the replacements, so
// plugin code cannot reach the unbounded versions. Formatted with the
// budget in string units (UTF-16 code units, 2 bytes each), array
// elements (16 bytes each) and bytes.
const guardPrelude = `(function(){
var MAXS = %d, MAXE = %d, MAXB = %d;
function tooBig(what, n) { throw new RangeError(what + " of " + n + " is over the sandbox's allocation limit") }
function len(n) { n = Math.trunc(Number(n)); return n > 0 ? n : 0 }
function put(o, k, f) { Object.defineProperty(o, k, {value: f, writable: true, configurable: true, enumerable: false}) }
var SP = String.prototype, repeat = SP.repeat, padStart = SP.padStart, padEnd = SP.padEnd;
put(SP, "repeat", function repeat_(n) { var s = String(this), c = len(n); if (s.length * c > MAXS) tooBig("a string length", s.length * c); return repeat.call(s, n) });
put(SP, "padStart", function padStart_(n, f) { if (len(n) > MAXS) tooBig("a string length", len(n)); return padStart.call(this, n, f) });
put(SP, "padEnd", function padEnd_(n, f) { if (len(n) > MAXS) tooBig("a string length", len(n)); return padEnd.call(this, n, f) });
var A = Array, AP = A.prototype, fill = AP.fill, join = AP.join, from = A.from;
function Array_() {
	if (arguments.length === 1 && typeof arguments[0] === "number" && arguments[0] > MAXE) tooBig("an array length", arguments[0]);
	return Reflect.construct(A, arguments, new.target || A);
}
Object.getOwnPropertyNames(A).forEach(function(k) { if (k !== "prototype" && k !== "length" && k !== "name") put(Array_, k, A[k]) });
Object.defineProperty(Array_, "prototype", {value: AP});
put(AP, "constructor", Array_);
put(Array_, "from", function from_(items) { if (items != null && !(Symbol.iterator in Object(items)) && len(items.length) > MAXE) tooBig("an array length", len(items.length)); return from.apply(this, arguments) });
put(AP, "fill", function fill_(v, start, end) {
	var n = len(Object(this).length), s = start === undefined ? 0 : Math.trunc(Number(start)) || 0, e = end === undefined ? n : Math.trunc(Number(end)) || 0;
	s = s < 0 ? Math.max(n + s, 0) : Math.min(s, n); e = e < 0 ? Math.max(n + e, 0) : Math.min(e, n);
	if (e - s > MAXE) tooBig("an array fill", e - s);
	return fill.apply(this, arguments);
});
put(AP, "join", function join_(sep) {
	var o = Object(this), n = len(o.length);
	if (n > MAXE) tooBig("an array length", n);
	sep = sep === undefined ? "," : String(sep);
	// Each element is converted once, as join would, and summed before
	// the native join builds the result.
	var parts = [], total = n > 0 ? (n - 1) * sep.length : 0;
	for (var i = 0; i < n; i++) { var x = o[i]; x = x == null ? "" : String(x); total += x.length; if (total > MAXS) tooBig("a joined string length", total); parts.push(x) }
	return join.call(parts, sep);
});
function bound(C, per, G) {
	function C_(a, b, c) {
		if (!new.target) throw new TypeError("Constructor " + C.name + " requires 'new'");
		var n = typeof a === "number" ? len(a) : (a !== null && typeof a === "object" && !(a instanceof ArrayBuffer_) && "length" in a) ? len(a.length) : 0;
		if (n * per > MAXB) tooBig("a buffer of bytes", n * per);
		return Reflect.construct(C, Array.prototype.slice.call(arguments), new.target === C_ ? C : new.target);
	}
	Object.getOwnPropertyNames(C).forEach(function(k) { if (k !== "prototype" && k !== "length" && k !== "name") put(C_, k, C[k]) });
	Object.setPrototypeOf(C_, Object.getPrototypeOf(C));
	Object.defineProperty(C_, "prototype", {value: C.prototype});
	put(C.prototype, "constructor", C_);
	put(G, C.name, C_);
	return C_;
}
var G = this, ArrayBuffer_ = ArrayBuffer;
put(G, "Array", Array_);
ArrayBuffer_ = bound(ArrayBuffer, 1, G);
[Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array].forEach(function(C) { bound(C, C.BYTES_PER_ELEMENT, G) });
if (typeof DataView === "function") bound(DataView, 0, G);
})();`

// guards is the guard prelude for the limits.
func guards(l Limits) string {
	return fmt.Sprintf(guardPrelude, l.MaxAllocBytes/2, l.MaxAllocBytes/16, l.MaxAllocBytes)
}

// heapMetric is the Go heap's bytes in live and not yet swept objects:
// cheap to read (no stop of the world, unlike ReadMemStats).
const heapMetric = "/memory/classes/heap/objects:bytes"

func heapBytes(s []metrics.Sample) uint64 {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
