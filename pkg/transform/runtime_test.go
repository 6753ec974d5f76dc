package transform

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func shipped(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../plugin/repository/builtin/github/personhub/" + name + "/v1.0.0/index.ts")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testTimeout is the call limit of tests that are about what a call
// does, not its time, in place of the 100 ms default: a first call on a
// loaded machine took 178 ms. The tests of the limit set their own.
const testTimeout = 10 * time.Second

// newRuntime: a runtime for tests, with testTimeout unless limits has a
// Timeout.
func newRuntime(t *testing.T, limits Limits) (*Runtime, *prometheus.Registry) {
	if limits.Timeout == 0 {
		limits.Timeout = testTimeout
	}
	reg := prometheus.NewRegistry()
	return New(limits, slog.New(slog.NewTextHandler(io.Discard, nil)), reg), reg
}

func sample(name string) Event {
	return Event{Event: name, DistinctID: "d1", UUID: "0190c6c5-0000-7000-8000-000000000001", TeamID: 7,
		Timestamp: "2026-11-20T10:00:00Z", Properties: map[string]any{"old": "v", "keep": 1.0}}
}

func TestShippedPlugins(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	chain := []Step{
		// Given out of order: rename (order 2) must run after drop (order 1).
		{ConfigID: 11, PluginID: 2, Order: 2, Filename: "index.ts", Source: shipped(t, "plugin-property-rename"), Config: map[string]any{"from": "old", "to": "new"}},
		{ConfigID: 10, PluginID: 1, Order: 1, Filename: "index.ts", Source: shipped(t, "plugin-drop-events"), Config: map[string]any{"events": "spam, junk"}},
	}
	res := r.Run(context.Background(), chain, sample("pageview"))
	if res.Event == nil || res.Event.Properties["new"] != "v" || res.Event.Properties["old"] != nil || res.Event.Properties["keep"] != 1.0 {
		t.Fatalf("renamed: %+v", res.Event)
	}
	if len(res.Steps) != 2 || res.Steps[0].ConfigID != 10 || res.Steps[1].ConfigID != 11 || res.Steps[1].Outcome != OutcomeOK {
		t.Fatalf("steps: %+v", res.Steps)
	}
	res = r.Run(context.Background(), chain, sample("junk"))
	if res.Event != nil || res.Steps[0].Outcome != OutcomeDropped || res.Steps[1].Outcome != OutcomeSkipped {
		t.Fatalf("dropped: %+v", res)
	}
	if s := r.Stats(10); s.In != 2 || s.Dropped != 1 || s.Failed != 0 || s.Time <= 0 {
		t.Fatalf("drop stats %+v", s)
	}
	if s := r.Stats(11); s.In != 1 || s.Dropped != 0 {
		t.Fatalf("rename stats %+v", s)
	}
}

func TestFailuresKeepTheEvent(t *testing.T) {
	r, reg := newRuntime(t, Limits{Timeout: 50 * time.Millisecond})
	add := Step{ConfigID: 3, Order: 9, Filename: "index.js", Source: `exports.processEvent = (e) => { e.properties.seen = true; return e }`}
	cases := map[string]string{
		"loops":     `export function processEvent(e) { while (true) {} }`,
		"throws":    `export function processEvent(e, {config}) { throw new Error("boom " + config.k) }`,
		"recurses":  `function f(n) { return f(n + 1) } export function processEvent(e) { return f(0) }`,
		"string":    `export function processEvent(e) { return "nope" }`,
		"team":      `export function processEvent(e) { e.team_id = 8; return e }`,
		"uuid":      `export function processEvent(e) { return {...e, uuid: "other"} }`,
		"noevent":   `export function processEvent(e) { return {properties: {}} }`,
		"rejects":   `export async function processEvent(e) { throw new Error("async boom") }`,
		"requires":  `const fs = require("fs"); export function processEvent(e) { return e }`,
		"fetches":   `export function processEvent(e) { fetch("http://example.com"); return e }`,
		"noprocess": `export function onEvent(e) {}`,
		"syntax":    `export function processEvent(e) {`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			bad := Step{ConfigID: 1, Order: 1, Filename: "index.ts", Source: src, Config: map[string]any{"k": "secret"}}
			start := time.Now()
			res := r.Run(context.Background(), []Step{bad, add}, sample("pageview"))
			if time.Since(start) > 2*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
			if res.Steps[0].Outcome != OutcomeFailed || res.Steps[0].Error == "" {
				t.Fatalf("step: %+v", res.Steps[0])
			}
			if res.Event == nil || res.Event.Properties["seen"] != true || res.Event.TeamID != 7 || res.Event.UUID != sample("").UUID || res.Event.Properties["old"] != "v" {
				t.Fatalf("event: %+v", res.Event)
			}
		})
	}
	if s := r.Stats(1); s.Failed != uint64(len(cases)) || s.In != uint64(len(cases)) {
		t.Fatalf("stats %+v", s)
	}
	if got := testutil.ToFloat64(r.events.WithLabelValues("1", OutcomeFailed)); got != float64(len(cases)) {
		t.Fatalf("metric %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "transformation_events_total"); err != nil || n != 2 {
		t.Fatalf("gathered %d %v", n, err)
	}
}

func TestDropAndAsyncAndDeterminism(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	src := `export async function processEvent(e) {
		if (e.event === "undef") return undefined
		e.properties.now = Date.now(); e.properties.r = Math.random(); e.$set = {plan: "pro"}; return e }`
	s := Step{ConfigID: 1, Order: 0, Filename: "index.ts", Source: src}
	if res := r.Run(context.Background(), []Step{s}, sample("undef")); res.Event != nil || res.Steps[0].Outcome != OutcomeDropped {
		t.Fatalf("undefined: %+v", res)
	}
	a := r.Run(context.Background(), []Step{s}, sample("x")).Event
	dry, err := r.DryRun(context.Background(), []Step{s}, sample("x"))
	if err != nil {
		t.Fatal(err)
	}
	b := dry.Event
	if a == nil || b == nil || a.Properties["now"] != float64(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).UnixMilli()) ||
		a.Properties["r"] != b.Properties["r"] || a.Set["plan"] != "pro" {
		t.Fatalf("a %+v b %+v", a, b)
	}
	if r.Stats(1).In != 2 {
		t.Fatalf("dry run counted: %+v", r.Stats(1))
	}
}

func TestSetupAndConfigVersion(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	src := `export function setupPlugin({config, global}) { global.tag = config.tag.toUpperCase() }
		export function processEvent(e, {global}) { e.properties.tag = global.tag; return e }`
	s := Step{ConfigID: 1, Filename: "index.ts", Source: src, Config: map[string]any{"tag": "a"}}
	if got := r.Run(context.Background(), []Step{s}, sample("x")).Event.Properties["tag"]; got != "A" {
		t.Fatalf("tag %v", got)
	}
	s.Config = map[string]any{"tag": "b"}
	if got := r.Run(context.Background(), []Step{s}, sample("x")).Event.Properties["tag"]; got != "B" {
		t.Fatalf("after config change: %v", got)
	}
	s.Config = map[string]any{}
	res := r.Run(context.Background(), []Step{s}, sample("x"))
	if res.Steps[0].Outcome != OutcomeFailed || !strings.Contains(res.Steps[0].Error, "setupPlugin") {
		t.Fatalf("setup failure: %+v", res.Steps[0])
	}
}
