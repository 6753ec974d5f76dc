package transform

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// peakHeap samples the process heap until the returned stop is called,
// which answers the highest growth over the heap at the start.
func peakHeap(t *testing.T) func() uint64 {
	t.Helper()
	runtime.GC()
	s := []metrics.Sample{{Name: heapMetric}}
	base := heapBytes(s)
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: heapMetric}}
		for {
			if h := heapBytes(s); h > base && h-base > peak.Load() {
				peak.Store(h - base)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); <-stopped; return peak.Load() }
}

// TestAllocationAttacks: each large-allocation attack of the review ends
// as a failed step (a throw, a timeout or the heap limit), and the
// process heap grows by far less than the attack asks for (the review
// measured 1.1 GB for the first one).
func TestAllocationAttacks(t *testing.T) {
	const bound = 400 << 20
	attacks := map[string]string{
		"repeat":        `'x'.repeat(1<<30)`,
		"repeat loop":   `var s = 'xxxxxxxx'; for (;;) s = s.repeat(2)`,
		"concat loop":   `var s = 'xxxxxxxx'; for (;;) s = s + s + '.'`,
		"padStart":      `''.padStart(1<<30, 'ab')`,
		"padEnd":        `'a'.padEnd(1<<30)`,
		"Array fill":    `Array(1<<28).fill(0)`,
		"new Array":     `new Array(1<<28).fill({})`,
		"ctor fill":     `[].constructor(1<<28).fill(1)`,
		"length fill":   `var a = []; a.length = 1<<28; a.fill(1)`,
		"generic fill":  `Array.prototype.fill.call({length: 1<<28}, 1)`,
		"Array.from":    `Array.from({length: 1<<28})`,
		"ArrayBuffer":   `new ArrayBuffer(1<<30)`,
		"Float64Array":  `new Float64Array(1<<27)`,
		"Uint8 of like": `new Uint8Array({length: 1<<30})`,
		"join":          `Array(1000).fill('x'.repeat(1<<22)).join('')`,
		"join holes":    `var a = []; a[1<<27] = 1; a.join('abcdefgh')`,
		"push loop":     `var a = []; for (;;) a.push({a: 1, b: 'x'})`,
	}
	for name, attack := range attacks {
		t.Run(name, func(t *testing.T) {
			r, _ := newRuntime(t, Limits{Timeout: 2 * time.Second, MaxHeapGrowth: 128 << 20})
			s := Step{ConfigID: 1, Filename: "index.js", Source: `exports.processEvent = function(e) { ` + attack + `; return e }`}
			stop := peakHeap(t)
			res, err := r.DryRun(context.Background(), []Step{s}, sample("x"))
			grew := stop()
			if err != nil {
				t.Fatal(err)
			}
			if st := res.Steps[0]; st.Outcome != OutcomeFailed || st.Error == "" {
				t.Fatalf("attack answered %+v", st)
			}
			if grew > bound {
				t.Fatalf("heap grew by %d MiB (error %q)", grew>>20, res.Steps[0].Error)
			}
			t.Logf("%s: %s; heap +%d MiB", name, res.Steps[0].Error, grew>>20)
		})
	}
}

// TestGuardsKeepBuiltins: the bounded replacements behave as the
// originals below the limit, throw a catchable RangeError above it, and
// cannot be bypassed through a prototype's constructor.
func TestGuardsKeepBuiltins(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	src := `exports.processEvent = function(e) {
		var p = e.properties, caught = 0
		p.rep = 'ab'.repeat(3); p.ps = '5'.padStart(3, '0'); p.pe = 'a'.padEnd(3, '-')
		p.arr = Array(3).fill(7).join('|'); p.arr2 = Array(1, 2).join(); p.of = Array.of(1, 2).length
		p.from = Array.from('abc').join(''); p.isArr = Array.isArray(new Array(2)) && [] instanceof Array && [].constructor === Array
		p.join = [1, null, undefined, 'x'].join(); p.mapped = [1, 2].map(function(x) { return x * 2 }).join()
		p.u8 = new Uint8Array([1, 2, 300]).join(); p.buf = new ArrayBuffer(8).byteLength; p.view = new Uint8Array(new ArrayBuffer(4), 1).length
		p.f64 = new Float64Array(2) instanceof Float64Array && Float64Array.BYTES_PER_ELEMENT === 8
		try { 'x'.repeat(1<<30) } catch (err) { if (err instanceof RangeError) caught++ }
		try { [].constructor(1<<30) } catch (err) { if (err instanceof RangeError) caught++ }
		try { new Uint8Array(1).constructor(1<<30) } catch (err) { if (err instanceof TypeError) caught++ }
		try { new (new Uint8Array(1).constructor)(1<<30) } catch (err) { if (err instanceof RangeError) caught++ }
		p.caught = caught
		return e }`
	res := r.Run(context.Background(), []Step{{ConfigID: 1, Filename: "index.js", Source: src}}, sample("x"))
	if res.Event == nil {
		t.Fatalf("%+v", res.Steps)
	}
	want := map[string]any{"rep": "ababab", "ps": "005", "pe": "a--", "arr": "7|7|7", "arr2": "1,2", "of": 2.0, "from": "abc",
		"isArr": true, "join": "1,,,x", "mapped": "2,4", "u8": "1,2,44", "buf": 8.0, "view": 3.0, "f64": true, "caught": 4.0}
	for k, v := range want {
		if res.Event.Properties[k] != v {
			t.Errorf("%s = %v, want %v", k, res.Event.Properties[k], v)
		}
	}
}

// TestConfigProtoKey: a config key "__proto__" reaches the plugin as a
// value (an object literal would have set meta.config's prototype).
func TestConfigProtoKey(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	src := `exports.processEvent = function(e, meta) { e.properties.p = meta.config["__proto__"]; e.properties.own = Object.keys(meta.config).join(); return e }`
	res := r.Run(context.Background(), []Step{{ConfigID: 1, Filename: "index.js", Source: src, Config: map[string]any{"__proto__": "v", "a": "b"}}}, sample("x"))
	if res.Event == nil || res.Event.Properties["p"] != "v" || res.Event.Properties["own"] != "__proto__,a" {
		t.Fatalf("%+v %+v", res.Event, res.Steps)
	}
}

// TestForget: a deleted config's instance and counts are dropped.
func TestForget(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	s := Step{ConfigID: 9, Filename: "index.js", Source: `exports.processEvent = function(e) { return e }`}
	r.Run(context.Background(), []Step{s}, sample("x"))
	if r.Stats(9).In != 1 {
		t.Fatal("not counted")
	}
	r.Forget(9)
	r.mu.Lock()
	n := len(r.slots) + len(r.stats)
	r.mu.Unlock()
	if n != 0 || r.Stats(9).In != 0 {
		t.Fatalf("kept %d entries", n)
	}
}

// TestDryRunBusy: beyond MaxDryRuns at once, ErrBusy at once (no queue).
func TestDryRunBusy(t *testing.T) {
	r, _ := newRuntime(t, Limits{MaxDryRuns: 2, Timeout: time.Second})
	var started sync.WaitGroup
	started.Add(2)
	slow := Step{ConfigID: 1, Filename: "index.js", Source: `exports.processEvent = function(e) { for (;;) {} }`}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			_, _ = r.DryRun(context.Background(), []Step{slow}, sample("x"))
		}()
	}
	started.Wait()
	// Both slots are taken once both runs are inside their step.
	deadline := time.Now().Add(5 * time.Second)
	for len(r.dryRuns) < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_, err := r.DryRun(context.Background(), []Step{slow}, sample("x"))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("third run: %v", err)
	}
	wg.Wait()
	if _, err := r.DryRun(context.Background(), nil, sample("x")); err != nil {
		t.Fatalf("after: %v", err)
	}
}
