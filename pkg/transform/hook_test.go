package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/ingest"
)

// slowTS takes a few hundred milliseconds on event "slow" (a counted loop:
// Date.now() is the event's time), and tags every event.
const slowTS = `export function processEvent(e) {
  if (e.event === 'slow') { let x = 0; for (let i = 0; i < 5000000; i++) { x += i } }
  e.properties.ran = true
  return e
}`

// hookLog is a project's log: a chain command at seq 1, then events.
func hookLog(t *testing.T, version string, names ...string) []ingest.HookInput {
	t.Helper()
	refs, _ := json.Marshal([]Ref{{ConfigID: 3, PluginID: 1, Order: 1, Version: version}})
	msgs := []string{fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-000000000000","event":%q,"distinct_id":"$transformations","timestamp":"2026-11-20T10:00:00Z","properties":{%q:%s}}`,
		event.SetTransformations, event.PropTransformations, refs)}
	for i, n := range names {
		msgs = append(msgs, fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-%012d","event":%q,"distinct_id":"d","timestamp":"2026-11-20T10:00:00Z","properties":{}}`, i+1, n))
	}
	var out []ingest.HookInput
	for i, m := range msgs {
		ev, err := event.Parse([]byte(m))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ingest.HookInput{Input: fold.Input{ProjectID: 7, Seq: uint64(i + 1), Event: ev}, Command: i == 0})
	}
	return out
}

// ran lists, per folded event, whether the plugin's change is in it.
func ran(out []fold.Input) string {
	s := ""
	for _, in := range out {
		if bytes := string(in.Event.PropertiesRaw); len(bytes) > 0 && bytes != "{}" {
			s += in.Event.Event + "+ "
		} else {
			s += in.Event.Event + "- "
		}
	}
	return s
}

// TestInterruptionsAreFactsOfTheLog: a step interrupted by its time limit
// is recorded and applied, not re-run, by a later process, even one whose
// limit it would meet; a step that ran in time is re-run by a later
// process with a much larger limit, even one whose own limit it would
// miss; and the chain of a restart comes from the record.
func TestInterruptionsAreFactsOfTheLog(t *testing.T) {
	ctx := context.Background()
	n, vs := natsVersions(t)
	v, err := vs.Put(ctx, Version{Filename: "index.ts", Source: slowTS})
	if err != nil {
		t.Fatal(err)
	}
	process := func(timeout time.Duration) *Hook {
		h, err := NewHook(ctx, n.JS, New(Limits{Timeout: timeout}, slog.New(slog.DiscardHandler), nil), 1, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	log := hookLog(t, v, "fast", "slow", "fast")
	// tight is well above a fast event's time (tens of microseconds, but
	// the machine may be loaded) and well below the slow one's.
	const tight = 50 * time.Millisecond

	// First run, tight limit: the slow event times out (kept unchanged).
	out, err := process(tight).Transform(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := ran(out); got != "fast+ slow- fast+ " {
		t.Fatalf("first run: %s", got)
	}
	// A process with a generous limit folds the same range again: the
	// recorded timeout applies.
	out, err = process(10*time.Second).Transform(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := ran(out); got != "fast+ slow- fast+ " {
		t.Fatalf("refold with a larger limit: %s", got)
	}

	// More of the log: a slow event first run with a generous limit runs
	// in time; a later process with a tight limit re-runs it with 100x.
	more := hookLog(t, v, "fast", "slow", "fast", "slow")[4:]
	out, err = process(10*time.Second).Transform(ctx, more)
	if err != nil {
		t.Fatal(err)
	}
	if got := ran(out); got != "slow+ " {
		t.Fatalf("first run of seq 5: %s", got)
	}
	// A restart knows the chain from the record (no chain command in
	// this range) and both outcomes.
	all := hookLog(t, v, "fast", "slow", "fast", "slow")[1:]
	out, err = process(tight).Transform(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if got := ran(out); got != "fast+ slow- fast+ slow+ " {
		t.Fatalf("restart with a tight limit: %s", got)
	}
	// Beyond the mark the limit applies as it is, and is recorded.
	beyond := hookLog(t, v, "fast", "slow", "fast", "slow", "slow")[5:]
	h := process(tight)
	if out, err = h.Transform(ctx, beyond); err != nil || ran(out) != "slow- " {
		t.Fatalf("beyond the mark: %s %v", ran(out), err)
	}
	if st := h.rt.Stats(3); st.Failed != 1 || st.In != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestProjectsInOneBatch: events of several projects interleaved in a
// batch run each through its own project's chain (on all cores), and come
// out in stream order, dropped ones left out.
func TestProjectsInOneBatch(t *testing.T) {
	ctx := context.Background()
	n, vs := natsVersions(t)
	src := `export function processEvent(e, {config}) { if (e.event === 'drop') return null; e.properties.tag = config.tag; return e }`
	var in []ingest.HookInput
	seq := uint64(0)
	add := func(project uint64, body string, command bool) {
		seq++
		ev, err := event.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, ingest.HookInput{Input: fold.Input{ProjectID: project, Seq: seq, Event: ev}, Command: command})
	}
	for p := uint64(1); p <= 4; p++ {
		v, err := vs.Put(ctx, Version{Filename: "index.js", Source: src, Config: map[string]any{"tag": fmt.Sprint(p)}})
		if err != nil {
			t.Fatal(err)
		}
		add(p, fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-1%011d","event":%q,"distinct_id":"$transformations","timestamp":"2026-11-20T10:00:00Z","properties":{%q:[{"plugin_config_id":%d,"order":1,"version":%q}]}}`,
			p, event.SetTransformations, event.PropTransformations, p, v), true)
	}
	var want []string
	for i := range 200 {
		p := uint64(i%4 + 1)
		name := "e"
		if i%5 == 0 {
			name = "drop"
		} else {
			want = append(want, fmt.Sprintf("%d:%d:%d", p, seq+1, p))
		}
		add(p, fmt.Sprintf(`{"uuid":"0190c6c5-0000-7000-8000-2%011d","event":%q,"distinct_id":"d","timestamp":"2026-11-20T10:00:00Z"}`, i, name), false)
	}
	h, err := NewHook(ctx, n.JS, New(Limits{Timeout: testTimeout}, slog.New(slog.DiscardHandler), nil), 1, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Transform(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out {
		var props map[string]any
		if err := json.Unmarshal(o.Event.PropertiesRaw, &props); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%d:%v", o.ProjectID, o.Seq, props["tag"]))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// TestPassesOnlyWhatTransformPasses: the ingester skips Transform for a
// batch Passes answers true for, so it must answer true only where
// Transform returns the inputs as they are: never with a chain command
// in the batch, never for an event a chain is in force for (another
// project's events pass, and so do the project's own before its chain).
func TestPassesOnlyWhatTransformPasses(t *testing.T) {
	ctx := context.Background()
	n, vs := natsVersions(t)
	v, err := vs.Put(ctx, Version{Filename: "index.ts", Source: slowTS})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHook(ctx, n.JS, New(Limits{Timeout: 10 * time.Second}, slog.New(slog.DiscardHandler), nil), 1, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := hookLog(t, v, "fast", "fast")
	inputs := func(in []ingest.HookInput) []fold.Input {
		var out []fold.Input
		for _, x := range in {
			out = append(out, x.Input)
		}
		return out
	}
	other := inputs(log[1:])
	for k := range other {
		other[k].ProjectID = 8
	}
	if !h.Passes(other) || !h.Passes(inputs(log[1:])) {
		t.Fatal("events without a chain in force do not pass")
	}
	if h.Passes(inputs(log)) {
		t.Fatal("a batch holding a chain command passes")
	}
	// The chain, from seq 1 on, transforms the project's events.
	out, err := h.Transform(ctx, log)
	if err != nil || ran(out) != "fast+ fast+ " {
		t.Fatalf("transform: %s %v", ran(out), err)
	}
	if h.Passes(inputs(log[1:])) || h.Passes(append(other, inputs(log[2:])...)) {
		t.Fatal("events with a chain in force pass")
	}
	if !h.Passes(other) {
		t.Fatal("another project's events do not pass once a chain is set")
	}
	out, err = h.Transform(ctx, hookInputs(other))
	if err != nil || ran(out) != "fast- fast- " {
		t.Fatalf("another project's events: %s %v", ran(out), err)
	}
}

func hookInputs(in []fold.Input) []ingest.HookInput {
	out := make([]ingest.HookInput, len(in))
	for k := range in {
		out[k] = ingest.HookInput{Input: in[k]}
	}
	return out
}
