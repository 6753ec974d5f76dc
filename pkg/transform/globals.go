package transform

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/buffer"
	"github.com/dop251/goja_nodejs/require"
	"github.com/dop251/goja_nodejs/url"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/plugin/code"
)

// The globals and modules of a modern JavaScript runtime that PostHog's
// plugin VM gives a transformation and plugins use (docs/plugins.md,
// "Compatibility"). URL, URLSearchParams and Buffer are goja_nodejs's
// (Node's semantics, maintained beside goja); require() loads only the
// modules of code.RuntimeModules, never a file; the rest is written here.
// Everything a plugin could draw randomness from is the instance's
// generator, seeded per event (instance.seed), so a replay computes the
// same values.

// enableGlobals installs the globals and require() in the instance's
// runtime, before the plugin's code runs.
func (in *instance) enableGlobals() error {
	vm := in.vm
	reg := require.NewRegistry(require.WithLoader(func(path string) ([]byte, error) {
		// No file is ever read: a plugin is one file, and the server's
		// files are not the plugin's to load.
		return nil, require.ModuleFileDoesNotExistError
	}))
	reg.RegisterNativeModule("crypto", in.cryptoModule)
	reg.RegisterNativeModule("node:crypto", in.cryptoModule)
	reg.RegisterNativeModule("@posthog/plugin-scaffold", scaffoldModule)
	reg.Enable(vm)
	url.Enable(vm)
	buffer.Enable(vm)
	// require() of a name the runtime does not give says so by name (the
	// install refuses such code first: pkg/plugin checkImports).
	req, _ := goja.AssertFunction(vm.Get("require"))
	err := vm.Set("require", func(c goja.FunctionCall) goja.Value {
		name := c.Argument(0).String()
		if !provided(name) {
			panic(vm.NewGoError(fmt.Errorf("cannot find module '%s': a transformation can require %s", name, strings.Join(code.RuntimeModules, ", "))))
		}
		v, err := req(goja.Undefined(), c.Argument(0))
		if err != nil {
			panic(err)
		}
		return v
	})
	if err != nil {
		return err
	}
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"atob":               in.atob,
		"btoa":               in.btoa,
		"__personhub_utf8":   in.utf8Encode,
		"__personhub_decode": in.utf8Decode,
	} {
		if err := vm.Set(name, fn); err != nil {
			return err
		}
	}
	_, err = vm.RunString(globalsJS)
	if err != nil {
		return err
	}
	if err := in.enableIntl(); err != nil {
		return err
	}
	_, err = vm.RunString(fmt.Sprintf(bufferGuard, in.limits.MaxAllocBytes))
	return err
}

// bufferGuard adds Buffer.allocUnsafe and bounds what Buffer allocates in one native step, as the
// guard prelude bounds the built-ins (guard.go): a size over the
// per-call budget (formatted in) throws a RangeError before the Go side
// allocates.
const bufferGuard = `(function(B, MAXB){
// Node's allocUnsafe(Slow) may return zeroed memory; goja_nodejs has only alloc.
['allocUnsafe', 'allocUnsafeSlow'].forEach(function(k){ if (typeof B[k] !== 'function') Object.defineProperty(B, k, {value: function(n){ return B.alloc(n); }, writable: true, configurable: true}); });
function check(n){ n = Math.trunc(Number(n)); if (n > MAXB) throw new RangeError("a buffer of bytes of " + n + " is over the sandbox's allocation limit"); }
['alloc', 'allocUnsafe', 'allocUnsafeSlow'].forEach(function(k){
  var f = B[k];
  if (typeof f === 'function') Object.defineProperty(B, k, {value: function(n){ check(n); return f.apply(B, arguments); }, writable: true, configurable: true});
});
var concat = B.concat;
Object.defineProperty(B, 'concat', {value: function(list, total){ if (total !== undefined) check(total); return concat.apply(B, arguments); }, writable: true, configurable: true});
})(Buffer, %d);`

// provided reports whether require(name) loads a module of the runtime.
func provided(name string) bool {
	return len(code.Unprovided([]string{name})) == 0
}

// globalsJS defines what is simplest in JavaScript itself: TextEncoder
// and TextDecoder (UTF-8, as Node's) over two Go helpers, which it then
// hides, and structuredClone (the HTML algorithm's types that events
// carry: primitives, arrays, plain objects, Date, RegExp, Map, Set,
// typed arrays; cycles kept; a function or symbol throws DataCloneError).
const globalsJS = `(function(g){
var enc = g.__personhub_utf8, dec = g.__personhub_decode;
delete g.__personhub_utf8; delete g.__personhub_decode;
function TextEncoder(){ if (!(this instanceof TextEncoder)) throw new TypeError("Class constructor TextEncoder cannot be invoked without 'new'"); }
Object.defineProperty(TextEncoder.prototype, 'encoding', {get: function(){ return 'utf-8'; }});
TextEncoder.prototype.encode = function(s){ return new Uint8Array(enc(s === undefined ? '' : String(s))); };
TextEncoder.prototype.encodeInto = function(s, dest){ var b = this.encode(s), n = Math.min(b.length, dest.length); dest.set(b.subarray(0, n)); return {read: String(s).length, written: n}; };
function TextDecoder(label, opts){
  if (!(this instanceof TextDecoder)) throw new TypeError("Class constructor TextDecoder cannot be invoked without 'new'");
  var l = label === undefined ? 'utf-8' : String(label).toLowerCase().trim();
  if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') throw new RangeError('The "' + label + '" encoding is not supported');
  this.fatal = !!(opts && opts.fatal); this.ignoreBOM = !!(opts && opts.ignoreBOM);
}
Object.defineProperty(TextDecoder.prototype, 'encoding', {get: function(){ return 'utf-8'; }});
TextDecoder.prototype.decode = function(b){
  if (b === undefined) return '';
  var s = dec(b, this.fatal);
  if (!this.ignoreBOM && s.charCodeAt(0) === 0xFEFF) s = s.slice(1);
  return s;
};
g.TextEncoder = TextEncoder; g.TextDecoder = TextDecoder;
function DataCloneError(msg){ var e = new Error(msg); e.name = 'DataCloneError'; return e; }
g.structuredClone = function(value){
  var seen = new Map();
  function clone(v){
    var t = typeof v;
    if (t === 'function') throw DataCloneError((v.name ? v.name : 'function') + ' could not be cloned.');
    if (t === 'symbol') throw DataCloneError('Symbol could not be cloned.');
    if (v === null || t !== 'object') return v;
    if (seen.has(v)) return seen.get(v);
    var out;
    if (Array.isArray(v)) { out = new Array(v.length); seen.set(v, out); for (var i = 0; i < v.length; i++) if (i in v) out[i] = clone(v[i]); return out; }
    if (v instanceof Date) { out = new Date(v.getTime()); seen.set(v, out); return out; }
    if (v instanceof RegExp) { out = new RegExp(v.source, v.flags); seen.set(v, out); return out; }
    if (v instanceof Map) { out = new Map(); seen.set(v, out); v.forEach(function(x, k){ out.set(clone(k), clone(x)); }); return out; }
    if (v instanceof Set) { out = new Set(); seen.set(v, out); v.forEach(function(x){ out.add(clone(x)); }); return out; }
    if (ArrayBuffer.isView(v)) { out = new v.constructor(v); seen.set(v, out); return out; }
    if (v instanceof ArrayBuffer) { out = v.slice(0); seen.set(v, out); return out; }
    if (v instanceof Error) { out = new Error(v.message); out.name = v.name; seen.set(v, out); return out; }
    out = {}; seen.set(v, out);
    Object.keys(v).forEach(function(k){ out[k] = clone(v[k]); });
    return out;
  }
  if (arguments.length === 0) throw new TypeError("Failed to execute 'structuredClone': 1 argument required, but only 0 present.");
  return clone(value);
};
})(this);`

// utf8Encode returns the UTF-8 bytes of a string as an ArrayBuffer (lone
// surrogates become U+FFFD, as TextEncoder's).
func (in *instance) utf8Encode(c goja.FunctionCall) goja.Value {
	return in.vm.ToValue(in.vm.NewArrayBuffer([]byte(c.Argument(0).String())))
}

// utf8Decode reads an ArrayBuffer or a view of one as UTF-8; invalid
// bytes become U+FFFD, or throw a TypeError when fatal.
func (in *instance) utf8Decode(c goja.FunctionCall) goja.Value {
	b, ok := bytesOf(in.vm, c.Argument(0))
	if !ok {
		panic(in.vm.NewTypeError(`The "input" argument must be an instance of ArrayBuffer or ArrayBufferView`))
	}
	if c.Argument(1).ToBoolean() && !utf8.Valid(b) {
		panic(in.vm.NewTypeError("The encoded data was not valid for encoding utf-8"))
	}
	return in.vm.ToValue(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// bytesOf reads the bytes of an ArrayBuffer, a typed array, a DataView or
// a Buffer.
func bytesOf(vm *goja.Runtime, v goja.Value) ([]byte, bool) {
	switch x := v.Export().(type) {
	case goja.ArrayBuffer:
		return x.Bytes(), true
	case []byte:
		return x, true
	}
	o, ok := v.(*goja.Object)
	if !ok {
		return nil, false
	}
	buf, ok := o.Get("buffer").Export().(goja.ArrayBuffer)
	if !ok {
		return nil, false
	}
	off, n := o.Get("byteOffset").ToInteger(), o.Get("byteLength").ToInteger()
	all := buf.Bytes()
	if off < 0 || n < 0 || off+n > int64(len(all)) {
		return nil, false
	}
	return all[off : off+n], true
}

// btoa encodes a string of Latin-1 characters as base64, as the web's.
func (in *instance) btoa(c goja.FunctionCall) goja.Value {
	s := c.Argument(0).String()
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			panic(in.domError("InvalidCharacterError", "Invalid character"))
		}
		b = append(b, byte(r))
	}
	return in.vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

// atob decodes base64 (ASCII whitespace ignored, padding optional) to a
// string of Latin-1 characters, as the web's.
func (in *instance) atob(c goja.FunctionCall) goja.Value {
	s := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' {
			return -1
		}
		return r
	}, c.Argument(0).String())
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(strings.TrimSuffix(s, "="), "=")
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(s)%4 == 1 {
		panic(in.domError("InvalidCharacterError", "The string to be decoded is not correctly encoded."))
	}
	r := make([]rune, len(b))
	for i, x := range b {
		r[i] = rune(x)
	}
	return in.vm.ToValue(string(r))
}

func (in *instance) domError(name, msg string) *goja.Object {
	e := in.vm.NewGoError(fmt.Errorf("%s", msg))
	_ = e.Set("name", name)
	_ = e.Set("message", msg)
	return e
}

// cryptoModule is require('crypto'): Node's hashing (createHash,
// createHmac with md5, sha1, sha256, sha384, sha512), and randomUUID,
// randomBytes and getRandomValues from the instance's per-event generator
// (deterministic: a replay draws the same values; not for secrets).
func (in *instance) cryptoModule(vm *goja.Runtime, module *goja.Object) {
	exports := module.Get("exports").(*goja.Object)
	_ = exports.Set("createHash", func(c goja.FunctionCall) goja.Value {
		h := newHash(vm, c.Argument(0).String(), nil)
		return in.hashObject(h)
	})
	_ = exports.Set("createHmac", func(c goja.FunctionCall) goja.Value {
		key := buffer.DecodeBytes(vm, c.Argument(1), goja.Undefined())
		h := newHash(vm, c.Argument(0).String(), key)
		return in.hashObject(h)
	})
	_ = exports.Set("getHashes", func(goja.FunctionCall) goja.Value {
		return vm.ToValue([]string{"md5", "sha1", "sha256", "sha384", "sha512"})
	})
	_ = exports.Set("randomUUID", func(goja.FunctionCall) goja.Value {
		var b [16]byte
		in.fill(b[:])
		u, _ := uuid.FromBytes(b[:])
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		return vm.ToValue(u.String())
	})
	_ = exports.Set("randomBytes", func(c goja.FunctionCall) goja.Value {
		n := c.Argument(0).ToInteger()
		if n < 0 || n > 1<<16 {
			panic(vm.NewTypeError("The \"size\" argument must be from 0 to 65536"))
		}
		b := make([]byte, n)
		in.fill(b)
		return buffer.WrapBytes(vm, b)
	})
	_ = exports.Set("getRandomValues", func(c goja.FunctionCall) goja.Value {
		b, ok := bytesOf(vm, c.Argument(0))
		if !ok || len(b) > 1<<16 {
			panic(vm.NewTypeError("getRandomValues takes an integer typed array of at most 65536 bytes"))
		}
		in.fill(b)
		return c.Argument(0)
	})
}

// fill draws bytes from the instance's per-event generator.
func (in *instance) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		x := in.rng.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(x >> (8 * j))
		}
	}
}

// newHash is a hash (an HMAC with key) by Node's algorithm name.
func newHash(vm *goja.Runtime, alg string, key []byte) hash.Hash {
	var f func() hash.Hash
	switch strings.ToLower(strings.ReplaceAll(alg, "-", "")) {
	case "md5":
		f = md5.New
	case "sha1":
		f = sha1.New
	case "sha256":
		f = sha256.New
	case "sha384":
		f = sha512.New384
	case "sha512":
		f = sha512.New
	default:
		panic(vm.NewGoError(fmt.Errorf("Digest method not supported: %s", alg)))
	}
	if key != nil {
		return hmac.New(f, key)
	}
	return f()
}

// hashObject is a Hash or Hmac object: update(data[, encoding]) chains,
// digest([encoding]) ends it (hex, base64, base64url, latin1/binary; a
// Buffer without one).
func (in *instance) hashObject(h hash.Hash) goja.Value {
	vm := in.vm
	o := vm.NewObject()
	done := false
	_ = o.Set("update", func(c goja.FunctionCall) goja.Value {
		if done {
			panic(vm.NewGoError(fmt.Errorf("Digest already called")))
		}
		h.Write(buffer.DecodeBytes(vm, c.Argument(0), c.Argument(1)))
		return o
	})
	_ = o.Set("digest", func(c goja.FunctionCall) goja.Value {
		if done {
			panic(vm.NewGoError(fmt.Errorf("Digest already called")))
		}
		done = true
		sum := h.Sum(nil)
		switch enc := c.Argument(0); {
		case goja.IsUndefined(enc):
			return buffer.WrapBytes(vm, sum)
		case enc.String() == "hex":
			return vm.ToValue(hex.EncodeToString(sum))
		default:
			return buffer.EncodeBytes(vm, sum, enc)
		}
	})
	return o
}

// scaffoldModule is require('@posthog/plugin-scaffold'): its runtime
// exports (the rest of the package is TypeScript types). RetryError is
// the error a plugin throws to ask for a retry; a transformation that
// throws it fails the event as any error does.
func scaffoldModule(vm *goja.Runtime, module *goja.Object) {
	v, err := vm.RunString(`(function(){
function RetryError(message){ var e = new Error(message); Object.setPrototypeOf(e, RetryError.prototype); e.name = 'RetryError'; e._attempt = 0; e._maxAttempts = 0; return e; }
RetryError.prototype = Object.create(Error.prototype, {constructor: {value: RetryError, writable: true, configurable: true}});
Object.defineProperty(RetryError.prototype, 'nameWithAttempts', {get: function(){ return this._attempt && this._maxAttempts ? this.name + ' (attempt ' + this._attempt + '/' + this._maxAttempts + ')' : this.name; }});
return {RetryError: RetryError};
})()`)
	if err != nil {
		panic(err)
	}
	module.Set("exports", v)
}
