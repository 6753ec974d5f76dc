package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/plugin/code"
)

// Limits bound every call into a plugin.
type Limits struct {
	// Timeout bounds one processEvent (or setupPlugin) call; goja's
	// Interrupt stops the JavaScript at the next instruction. Default
	// 100 ms.
	Timeout time.Duration
	// MaxCallDepth bounds JavaScript call depth (unbounded recursion is a
	// stack overflow error, not a Go stack of gigabytes). Default 1000.
	MaxCallDepth int
	// MaxEventBytes bounds the JSON of a result. Default 1 MiB, the
	// JetStream message limit.
	MaxEventBytes int
	// MaxAllocBytes bounds what one call of a large-allocation built-in
	// (String repeat/padStart/padEnd, Array(n), fill, join, Array.from,
	// ArrayBuffer and typed arrays) may build: over it, a RangeError.
	// Default 16 MiB.
	MaxAllocBytes int
	// MaxHeapGrowth bounds how far the process heap may grow during one
	// call before the call is interrupted (ErrMemory), sampled every
	// HeapSample. Default 256 MiB, every 2 ms.
	MaxHeapGrowth uint64
	HeapSample    time.Duration
	// MaxDryRuns bounds the dry runs under way at once (Runtime.DryRun).
	// Default 2.
	MaxDryRuns int
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = 100 * time.Millisecond
	}
	if l.MaxCallDepth <= 0 {
		l.MaxCallDepth = 1000
	}
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = 1 << 20
	}
	if l.MaxAllocBytes <= 0 {
		l.MaxAllocBytes = 16 << 20
	}
	if l.MaxHeapGrowth == 0 {
		l.MaxHeapGrowth = 256 << 20
	}
	if l.MaxDryRuns <= 0 {
		l.MaxDryRuns = 2
	}
	if l.HeapSample <= 0 {
		l.HeapSample = 2 * time.Millisecond
	}
	return l
}

// ErrTimeout is a call that ran past Limits.Timeout.
var ErrTimeout = errors.New("processEvent ran past its time limit")

// ErrNoProcessEvent is a plugin whose code exports neither processEvent
// nor processEventBatch.
var ErrNoProcessEvent = errors.New("the plugin exports no processEvent or processEventBatch function")

// prelude runs before the plugin's code. The runtime has no
// network and no file system to begin with (goja provides only ECMAScript
// built-ins); console is a no-op so that plugins that log do not throw.
const prelude = `var console = {log: function(){}, info: function(){}, warn: function(){}, error: function(){}, debug: function(){}};`

// instance is one plugin config's loaded code: its own goja runtime (so
// one plugin's globals and memory are not another's), its processEvent
// and its meta. Not safe for concurrent use; the Runtime serializes
// calls.
type instance struct {
	vm      *goja.Runtime
	process goja.Callable
	// parse is JSON.parse, looked up once: compiling a script per event
	// cost 100 µs. It reads the config, and events jsEvent cannot build.
	parse goja.Callable
	// readFn calls reader.read on its argument from inside the runtime
	// (so a getter's throw or an interrupt unwinds as in JSON.stringify),
	// leaving the value in readOut and readOK.
	reader  *jsReader
	readFn  goja.Callable
	readOut any
	readOK  bool
	meta    goja.Value
	limits  Limits
	dog     *watchdog  // the runtime's
	watch   watched    // this instance's call, when one is under way
	event   Event      // the event being processed: the time source reads it
	rng     *rand.Rand // Math.random, re-seeded from each event's uuid
}

var promiseType = reflect.TypeOf((*goja.Promise)(nil))

// compile transpiles and compiles a plugin's entry file once; programs are
// shared by instances (goja programs are immutable).
func compile(filename, src string) (*goja.Program, error) {
	js, err := code.Transpile(filename, src)
	if err != nil {
		return nil, err
	}
	wrapped := "(function(){var exports = {}; var module = {exports: exports};\n" + js + "\nreturn module.exports;})()"
	return goja.Compile(filename, wrapped, false)
}

// batchAsEvent calls a plugin's processEventBatch with one event, as
// PostHog's legacy transformations do: the first event of the array it
// returns (or resolves to) is the event's result, an empty array drops
// the event, anything else than an array is an error.
const batchAsEvent = `(function(batch){
function first(out){
  if (!Array.isArray(out)) throw new TypeError('processEventBatch must return an array of events, not ' + (out === null ? 'null' : typeof out));
  return out.length ? out[0] : null;
}
return function(event, meta){ var out = batch([event], meta); return out && typeof out.then === 'function' ? out.then(first) : first(out); };
})`

// eventAtATime wraps an exported processEventBatch (batchAsEvent); false
// when v is no function.
func (in *instance) eventAtATime(v goja.Value) (goja.Callable, bool) {
	if _, ok := goja.AssertFunction(v); !ok {
		return nil, false
	}
	wrap, err := in.vm.RunString(batchAsEvent)
	if err != nil {
		return nil, false
	}
	mk, _ := goja.AssertFunction(wrap)
	fn, err := mk(goja.Undefined(), v)
	if err != nil {
		return nil, false
	}
	return goja.AssertFunction(fn)
}

// newInstance runs the program in a fresh runtime, builds meta from the
// config (secrets included: the plugin needs them; they are never logged),
// its attachments and the geoip database (nil: none), and runs
// setupPlugin(meta) when exported, all under the time limit.
func newInstance(prog *goja.Program, config map[string]any, atts map[string]plugin.AttachmentFile, limits Limits, dog *watchdog, geo *geoip.DB) (*instance, error) {
	in := &instance{vm: goja.New(), limits: limits, dog: dog}
	in.seed("")
	vm := in.vm
	vm.SetMaxCallStackSize(limits.MaxCallDepth)
	// Determinism: Date.now() is the event's timestamp and Math.random is
	// seeded by the event's uuid, so a replay computes the same values.
	vm.SetTimeSource(func() time.Time { return in.eventTime() })
	vm.SetRandSource(in.randSource)
	if config == nil {
		config = map[string]any{} // meta.config is always an object, as PostHog's
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	var exports goja.Value
	err = in.bounded(func() error {
		if _, err := vm.RunString(guards(limits)); err != nil {
			return err
		}
		if err := in.enableGlobals(); err != nil {
			return err
		}
		if _, err := vm.RunString(prelude); err != nil {
			return err
		}
		// Before the plugin's code: what the reader calls must be the
		// realm's own.
		if in.reader, err = newReader(vm); err != nil {
			return err
		}
		in.readFn, _ = goja.AssertFunction(vm.ToValue(func(c goja.FunctionCall) goja.Value {
			in.readOut, in.readOK = in.reader.read(c.Argument(0), limits.MaxEventBytes)
			return goja.Undefined()
		}))
		v, err := vm.RunProgram(prog)
		exports = v
		return err
	})
	if err != nil {
		return nil, err
	}
	obj := exports.ToObject(vm)
	process, ok := goja.AssertFunction(obj.Get("processEvent"))
	if !ok {
		if process, ok = in.eventAtATime(obj.Get("processEventBatch")); !ok {
			return nil, ErrNoProcessEvent
		}
	}
	in.process = process
	jsonObj := vm.Get("JSON").ToObject(vm)
	in.parse, _ = goja.AssertFunction(jsonObj.Get("parse"))
	meta := vm.NewObject()
	// JSON.parse, not an object literal: in a literal a "__proto__" key
	// sets the prototype and the config value is lost.
	parsed, err := in.parse(goja.Undefined(), vm.ToValue(string(cfg)))
	if err != nil {
		return nil, err
	}
	_ = meta.Set("config", parsed)
	_ = meta.Set("global", vm.NewObject())
	_ = meta.Set("attachments", in.attachments(atts))
	_ = meta.Set("geoip", in.geoipMeta(geo))
	// PostHog's legacy transformations log through meta.logger; its
	// methods do nothing here, as console's (prelude).
	_ = meta.Set("logger", vm.Get("console"))
	in.meta = meta
	if setup, ok := goja.AssertFunction(obj.Get("setupPlugin")); ok {
		if err := in.bounded(func() error { return settle(setup(goja.Undefined(), meta)) }); err != nil {
			return nil, fmt.Errorf("setupPlugin: %w", err)
		}
	}
	return in, nil
}

// settle turns a call's result into its error: a rejected promise is an
// error (goja runs promise jobs before the outermost call returns, so an
// async function without real waiting has settled).
func settle(v goja.Value, err error) error {
	if err != nil {
		return err
	}
	if p, ok := v.Export().(*goja.Promise); ok && p.State() == goja.PromiseStateRejected {
		return fmt.Errorf("rejected: %v", p.Result())
	}
	return nil
}

// bounded runs f with the time and heap limits armed (watchdog).
func (in *instance) bounded(f func() error) error { return in.boundedBy(in.limits, f) }

func (in *instance) boundedBy(l Limits, f func() error) error {
	in.dog.arm(&in.watch, in.vm, l)
	err := f()
	in.dog.disarm(&in.watch)
	in.vm.ClearInterrupt()
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if v, ok := ie.Value().(error); ok && errors.Is(v, ErrMemory) {
			return ErrMemory
		}
		return ErrTimeout
	}
	return err
}

func (in *instance) eventTime() time.Time {
	if t, err := time.Parse(time.RFC3339Nano, in.event.Timestamp); err == nil {
		return t
	}
	return time.Unix(0, 0).UTC()
}

func (in *instance) randSource() float64 { return in.rng.Float64() }

// seed restarts Math.random's sequence from the event's uuid.
func (in *instance) seed(uuid string) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uuid))
	in.rng = rand.New(rand.NewPCG(h.Sum64(), 0))
}

// call calls processEvent(event, meta) with the time limit timeout (0:
// Limits.Timeout). A nil event with a nil error is a drop. A call whose
// plugin did to the lazy properties what only a plain object allows is
// made again with plain properties (lazyProps).
func (in *instance) call(ev Event, timeout time.Duration) (*Event, error) {
	out, err := in.callOnce(ev, timeout)
	if err != nil && ev.text != nil && ev.Properties == nil && strings.Contains(err.Error(), "ynamic object") {
		return in.callOnce(ev.materialized(), timeout)
	}
	return out, err
}

func (in *instance) callOnce(ev Event, timeout time.Duration) (*Event, error) {
	lim := in.limits
	if timeout > 0 {
		lim.Timeout = timeout
	}
	in.event = ev
	in.seed(ev.UUID)
	var res Event
	var dropped bool
	err := in.boundedBy(lim, func() error {
		arg, err := in.argument(ev)
		if err != nil {
			return err
		}
		v, err := in.process(goja.Undefined(), arg, in.meta)
		if err != nil {
			return err
		}
		// ExportType first: Export of a plain object copies it whole.
		if o, ok := v.(*goja.Object); ok && o.ExportType() == promiseType {
			p, _ := o.Export().(*goja.Promise)
			switch p.State() {
			case goja.PromiseStateRejected:
				return fmt.Errorf("rejected: %v", p.Result())
			case goja.PromiseStatePending:
				return fmt.Errorf("%w: a promise that never settled", ErrShape)
			}
			v = p.Result()
		}
		if goja.IsNull(v) || goja.IsUndefined(v) {
			dropped = true
			return nil
		}
		if _, ok := v.(*goja.Object); !ok {
			return ErrShape
		}
		if _, err := in.readFn(goja.Undefined(), v); err != nil {
			return err
		}
		res, err = in.result(ev)
		return err
	})
	if err != nil || dropped {
		return nil, err
	}
	return &res, nil
}

// argument is processEvent's event: built directly (jsEvent), or through
// JSON text when the event holds what only the text path treats right.
func (in *instance) argument(ev Event) (goja.Value, error) {
	if o, ok := jsEvent(in.vm, ev); ok {
		return o, nil
	}
	text, err := json.Marshal(ev.materialized())
	if err != nil {
		return nil, err
	}
	return in.parse(goja.Undefined(), in.vm.ToValue(string(text)))
}

// result checks what read (called from readFn) found, as decodeResult
// checks the text JSON.stringify would have written.
func (in *instance) result(ev Event) (Event, error) {
	rd := in.reader
	// Nothing of this result stays reachable from the instance.
	defer func() { in.readOut, rd.stack, rd.keys = nil, rd.stack[:0], rd.keys[:0] }()
	if rd.over {
		return ev, fmt.Errorf("%w: result over the %d byte limit", ErrShape, in.limits.MaxEventBytes)
	}
	if e, ok := in.readOut.(*Event); ok {
		return checkResult(*e, true, true, ev) // jsReader.event
	}
	m, ok := in.readOut.(map[string]any)
	if !in.readOK || !ok {
		return ev, ErrShape
	}
	out, hasTeam, hasUUID, err := eventFromJSON(m, rd.keys)
	if err != nil {
		return ev, fmt.Errorf("%w: %v", ErrShape, err)
	}
	return checkResult(out, hasTeam, hasUUID, ev)
}
