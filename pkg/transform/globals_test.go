package transform

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// runOne runs src (a plugin's index.js) on one event and returns the
// result's properties, failing the test when the step did not succeed.
func runOne(t *testing.T, src string, ev Event) map[string]any {
	t.Helper()
	r, _ := newRuntime(t, Limits{})
	res := r.Run(context.Background(), []Step{{ConfigID: 1, PluginID: 1, Filename: "index.js", Source: src, Config: map[string]any{}}}, ev)
	if len(res.Steps) != 1 || res.Steps[0].Outcome != OutcomeOK || res.Event == nil {
		t.Fatalf("step: %+v (event %+v)", res.Steps, res.Event)
	}
	return res.Event.Properties
}

// TestModernGlobals: the globals PostHog's plugin VM gives a
// transformation, each checked against what Node answers for the same
// call (the expected values are Node's, written out).
func TestModernGlobals(t *testing.T) {
	props := runOne(t, `
exports.processEvent = function(event) {
  var p = event.properties;
  var u = new URL('https://Example.com:8080/a/b/../c?utm_source=x&q=1#frag');
  p.host = u.host; p.path = u.pathname; p.src = u.searchParams.get('utm_source');
  u.searchParams.delete('utm_source'); p.href = u.toString();
  var q = new URLSearchParams('a=1&b=2&a=3'); p.all = q.getAll('a').join(','); p.qs = q.toString();
  p.enc = Array.prototype.join.call(new TextEncoder().encode('é€'), ',');
  p.dec = new TextDecoder().decode(new Uint8Array([104, 105, 0xe2, 0x82, 0xac]));
  p.b64 = btoa('hello'); p.unb64 = atob('aGVsbG8=');
  var src = {a: [1, {b: 2}], d: new Date(0), m: new Map([['k', 1]])}; src.self = src;
  var c = structuredClone(src);
  p.clone = c !== src && c.a[1].b === 2 && c.a[1] !== src.a[1] && c.d.getTime() === 0 && c.m.get('k') === 1 && c.self === c;
  try { structuredClone({f: function(){}}); p.cloneFn = 'no error'; } catch (e) { p.cloneFn = e.name; }
  p.buf = Buffer.from('hi').toString('base64');
  return event;
}`, sample("pageview"))
	want := map[string]any{
		"host": "example.com:8080", "path": "/a/c", "src": "x", "href": "https://example.com:8080/a/c?q=1#frag",
		"all": "1,3", "qs": "a=1&b=2&a=3", "enc": "195,169,226,130,172", "dec": "hi€",
		"b64": "aGVsbG8=", "unb64": "hello", "clone": true, "cloneFn": "DataCloneError", "buf": "aGk=",
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s = %#v, want %#v", k, props[k], v)
		}
	}
}

// TestRequire: require() gives crypto, url and @posthog/plugin-scaffold
// (also as ES imports, which esbuild turns into require), node:crypto
// too; any other name throws naming it, and no file is ever read.
func TestRequire(t *testing.T) {
	props := runOne(t, `
import { createHash, createHmac } from 'crypto'
import { RetryError } from '@posthog/plugin-scaffold'
const url = require('url')
const nodeCrypto = require('node:crypto')
export function processEvent(event) {
  const p = event.properties
  p.md5 = createHash('md5').update('abc').digest('hex')
  p.sha256 = nodeCrypto.createHash('sha256').update('a').update('bc').digest('base64')
  p.hmac = createHmac('sha256', 'key').update('msg').digest('hex')
  p.raw = createHash('sha1').update('x').digest().length
  p.urlOK = new url.URL('http://a.b/c').pathname === '/c' && typeof url.URLSearchParams === 'function'
  const e = new RetryError('later')
  p.retry = e instanceof Error && e instanceof RetryError && e.name === 'RetryError' && e.message === 'later'
  for (const name of ['fs', 'child_process', '/etc/passwd', './other', 'left-pad']) {
    try { require(name); p[name] = 'loaded' } catch (err) { p[name] = String(err).includes("'" + name + "'") }
  }
  return event
}`, sample("pageview"))
	sum := sha256.Sum256([]byte("abc"))
	mac := hmac.New(sha256.New, []byte("key"))
	mac.Write([]byte("msg"))
	want := map[string]any{
		"md5": fmt.Sprintf("%x", md5.Sum([]byte("abc"))), "sha256": base64.StdEncoding.EncodeToString(sum[:]),
		"hmac": hex.EncodeToString(mac.Sum(nil)), "raw": int64(20), "urlOK": true, "retry": true,
		"fs": true, "child_process": true, "/etc/passwd": true, "./other": true, "left-pad": true,
	}
	for k, v := range want {
		if fmt.Sprint(props[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %#v, want %#v", k, props[k], v)
		}
	}
}

// TestRandomnessIsPerEvent: crypto.randomUUID, randomBytes and
// Math.random give the same values for the same event (a replay) and
// other values for another event.
func TestRandomnessIsPerEvent(t *testing.T) {
	src := `const crypto = require('crypto')
exports.processEvent = (event) => {
  event.properties.u = crypto.randomUUID()
  event.properties.b = crypto.randomBytes(12).toString('hex')
  event.properties.r = Math.random()
  return event
}`
	a, b := runOne(t, src, sample("x")), runOne(t, src, sample("x"))
	other := sample("x")
	other.UUID = "0190c6c5-0000-7000-8000-000000000002"
	c := runOne(t, src, other)
	for _, k := range []string{"u", "b", "r"} {
		if a[k] != b[k] || a[k] == c[k] {
			t.Errorf("%s: %v, %v (same event), %v (another)", k, a[k], b[k], c[k])
		}
	}
	if u := a["u"].(string); len(u) != 36 || u[14] != '4' || !strings.ContainsAny(u[19:20], "89ab") {
		t.Errorf("randomUUID %q is not a version 4 uuid", u)
	}
}

// TestProcessEventBatch: a plugin that exports only processEventBatch
// (sync or async) runs an event at a time: the first event of the array
// it returns is the result, an empty array drops the event, and anything
// but an array fails it.
func TestProcessEventBatch(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	step := func(src string) []Step {
		return []Step{{ConfigID: 1, PluginID: 1, Filename: "index.js", Source: src, Config: map[string]any{}}}
	}
	res := r.Run(context.Background(), step(`exports.processEventBatch = (batch) => batch.map(e => { e.properties.n = batch.length; return e })`), sample("a"))
	if res.Event == nil || fmt.Sprint(res.Event.Properties["n"]) != "1" {
		t.Fatalf("sync: %+v", res)
	}
	res = r.Run(context.Background(), step(`exports.processEventBatch = async (batch) => batch.filter(e => e.event !== 'drop')`), sample("drop"))
	if res.Event != nil || res.Steps[0].Outcome != OutcomeDropped {
		t.Fatalf("async drop: %+v", res)
	}
	res = r.Run(context.Background(), step(`exports.processEventBatch = (batch) => batch[0]`), sample("a"))
	if res.Steps[0].Outcome != OutcomeFailed || !strings.Contains(res.Steps[0].Error, "must return an array") {
		t.Fatalf("not an array: %+v", res.Steps)
	}
}

// TestBufferIsBounded: Buffer's allocations are held to the sandbox's
// budget before they happen, as the built-ins are.
func TestBufferIsBounded(t *testing.T) {
	props := runOne(t, `exports.processEvent = (event) => {
  for (const f of [() => Buffer.alloc(1 << 30), () => Buffer.allocUnsafe(1 << 30), () => Buffer.concat([], 1 << 30)]) {
    try { f(); event.properties.r = (event.properties.r || '') + 'allocated;' } catch (e) { event.properties.r = (event.properties.r || '') + e.name + ';' }
  }
  event.properties.small = Buffer.alloc(16).length
  return event
}`, sample("x"))
	if props["r"] != "RangeError;RangeError;RangeError;" || fmt.Sprint(props["small"]) != "16" {
		t.Fatalf("got %v", props)
	}
}

// TestFailedSetupIsNotRebuiltPerEvent: a config whose setupPlugin throws
// fails each event at once with that error; its runtime is built once
// per version, not once per event (a bundle's top level and setup ran for
// every event before). meta.config is an object even for a config of
// none.
func TestFailedSetupIsNotRebuiltPerEvent(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	steps := []Step{{ConfigID: 5, PluginID: 1, Filename: "index.js", Source: `exports.setupPlugin = ({ config }) => { if (!config.ok) throw new Error('no ok') }
exports.processEvent = (e) => e`}}
	for range 20 {
		res := r.Run(context.Background(), steps, sample("x"))
		if res.Steps[0].Outcome != OutcomeFailed || !strings.Contains(res.Steps[0].Error, "no ok") {
			t.Fatalf("step %+v", res.Steps[0])
		}
	}
	builds := func() float64 { return testutil.ToFloat64(r.builds.WithLabelValues("5")) }
	if n := builds(); n != 1 {
		t.Fatalf("%v builds for 20 events of one failing version, want 1", n)
	}
	steps[0].Config = map[string]any{"ok": true} // a new version builds again
	if res := r.Run(context.Background(), steps, sample("x")); res.Steps[0].Outcome != OutcomeOK {
		t.Fatalf("step %+v", res.Steps[0])
	}
	if n := builds(); n != 2 {
		t.Fatalf("%v builds, want 2", n)
	}
}
