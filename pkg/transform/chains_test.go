package transform

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

// logEntry is a message of a project's log: a chain command (refs) or an
// event.
type logEntry struct {
	seq   uint64
	refs  []Ref
	event *Event
}

// replay folds log in order the way the ingester will: a chain command
// sets the chain, an event runs the chain in force at its position. Each
// call is a fresh process (tracker, runtime, version cache).
func replay(t *testing.T, ctx context.Context, js *testenv.NATS, log []logEntry) []*Event {
	t.Helper()
	vs, err := OpenVersions(ctx, js.JS)
	if err != nil {
		t.Fatal(err)
	}
	chains, rt := NewChains(), New(Limits{Timeout: testTimeout}, nil, nil)
	var out []*Event
	for _, e := range log {
		if e.event == nil {
			chains.Set(7, e.seq, e.refs)
			continue
		}
		refs, _ := chains.At(7, e.seq)
		steps, err := Resolve(ctx, vs, refs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rt.Run(ctx, steps, *e.event).Event)
	}
	return out
}

// TestReplayAfterConfigChange: the chain an event gets is the one set by
// the last chain command before it in the log, so a replay (new process,
// versions read back from the store) gives the original run's events even
// though the config changed in between.
func TestReplayAfterConfigChange(t *testing.T) {
	ctx := context.Background()
	n, vs := natsVersions(t)
	src := `export function processEvent(e, {config}) { e.properties.tag = config.tag; return e }`
	v1, err := vs.Put(ctx, Version{Filename: "index.ts", Source: src, Config: map[string]any{"tag": "one"}})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := vs.Put(ctx, Version{Filename: "index.ts", Source: src, Config: map[string]any{"tag": "two"}})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := vs.Put(ctx, Version{Filename: "index.ts", Source: src, Config: map[string]any{"tag": "one"}}); again != v1 || v1 == v2 {
		t.Fatalf("hashes %s %s %s", v1, again, v2)
	}
	ev := func(name string) *Event { e := sample(name); return &e }
	log := []logEntry{
		{seq: 1, event: ev("before")},
		{seq: 2, refs: []Ref{{ConfigID: 5, Order: 1, Version: v1}}},
		{seq: 3, event: ev("during one")},
		{seq: 4, refs: []Ref{{ConfigID: 5, Order: 1, Version: v2}}},
		{seq: 5, event: ev("during two")},
		{seq: 2, refs: []Ref{{ConfigID: 5, Order: 1, Version: v1}}}, // a redelivery: ignored
		{seq: 6, event: ev("still two")},
		{seq: 7, refs: nil}, // disabled
		{seq: 8, event: ev("after")},
	}
	tags := func(evs []*Event) string {
		var s []string
		for _, e := range evs {
			tag, _ := e.Properties["tag"].(string)
			s = append(s, e.Event+"="+tag)
		}
		return strings.Join(s, ",")
	}
	first := tags(replay(t, ctx, n, log))
	if want := "before=,during one=one,during two=two,still two=two,after="; first != want {
		t.Fatalf("first run %s, want %s", first, want)
	}
	if second := tags(replay(t, ctx, n, log)); second != first {
		t.Fatalf("replay %s, first run %s", second, first)
	}
}

func TestVersionTamperingAndRefs(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	vs, err := OpenVersions(ctx, n.JS)
	if err != nil {
		t.Fatal(err)
	}
	h, err := vs.Put(ctx, Version{Filename: "index.js", Source: "exports.processEvent = e => e"})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := n.JS.ObjectStore(ctx, ObjectVersions)
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(Version{Filename: "index.js", Source: "exports.processEvent = e => null"})
	if _, err := obj.PutBytes(ctx, h, bad); err != nil {
		t.Fatal(err)
	}
	fresh, _ := OpenVersions(ctx, n.JS)
	if _, err := fresh.Get(ctx, h); err == nil || !strings.Contains(err.Error(), "another hash") {
		t.Fatalf("tampered version read: %v", err)
	}
	if _, err := ParseRefs([]byte(`[{"plugin_config_id":1,"version":"` + h + `"}]`)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `[{"plugin_config_id":0,"version":"` + h + `"}]`, `[{"plugin_config_id":1,"version":"../x"}]`} {
		if _, err := ParseRefs([]byte(s)); err == nil {
			t.Fatalf("accepted %s", s)
		}
	}
}

// natsVersions starts a JetStream server and opens the version store on it.
func natsVersions(tb testing.TB) (*testenv.NATS, *Versions) {
	tb.Helper()
	n := testenv.StartNATS(tb, "")
	vs, err := OpenVersions(context.Background(), n.JS)
	if err != nil {
		tb.Fatal(err)
	}
	return n, vs
}
