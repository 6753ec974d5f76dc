package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/testenv"
)

type svcEnv struct {
	svc   *plugin.Service
	js    jetstream.JetStream
	actor plugin.Actor
	local string
}

func newSvc(t *testing.T) *svcEnv { return newSvcWith(t, plugin.Options{}) }

// newSvcWith opens a service with opts and a local plugins folder.
func newSvcWith(t *testing.T, opts plugin.Options) *svcEnv {
	t.Helper()
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	cp, err := controlplane.Open(ctx, n.JS, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	org, err := cp.CreateOrganization(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	opts.LocalDir = local
	svc, err := plugin.Open(ctx, n.JS, opts, cp, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return &svcEnv{svc: svc, js: n.JS, actor: plugin.Actor{OrganizationID: org.ID, KeyID: "k", KeyLabel: "key"}, local: local}
}

func (e *svcEnv) sourcePlugin(t *testing.T) plugin.Plugin {
	t.Helper()
	return e.create(t, `{"plugin_type":"source","name":"t","capabilities":{"methods":["processEvent"]}}`)
}

// create makes a plugin from the JSON of a POST.
func (e *svcEnv) create(t *testing.T, body string) plugin.Plugin {
	t.Helper()
	in, err := plugin.DecodePluginInput([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.svc.Create(context.Background(), e.actor, in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Concurrent PATCHes of different fields all take effect: each is applied
// to the latest revision and retried on conflict.
func TestConcurrentPatches(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.sourcePlugin(t)
	bodies := []string{`{"name":"renamed"}`, `{"description":"d"}`, `{"icon":"i"}`, `{"tag":"t1"}`,
		`{"metrics":{"m":1}}`, `{"public_jobs":{"j":{}}}`, `{"config_schema":[{"key":"k"}]}`}
	for round := range 3 {
		var wg sync.WaitGroup
		for _, b := range bodies {
			wg.Go(func() {
				in, err := plugin.DecodePluginInput([]byte(b))
				if err == nil {
					_, err = e.svc.Patch(ctx, e.actor, p.ID, in)
				}
				if err != nil {
					t.Errorf("round %d %s: %v", round, b, err)
				}
			})
		}
		wg.Wait()
	}
	got, err := e.svc.Get(ctx, e.actor, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "renamed" || *got.Description != "d" || *got.Icon != "i" || *got.Tag != "t1" ||
		string(got.Metrics) != `{"m":1}` || string(got.PublicJobs) != `{"j":{}}` || string(got.ConfigSchema) != `[{"key":"k"}]` {
		t.Fatalf("lost a change: %+v", got)
	}
}

// Concurrent update_source calls on different files all survive.
func TestConcurrentSourceUpdates(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.sourcePlugin(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			src := fmt.Sprintf("export const v%d = %d", i, i)
			if _, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{fmt.Sprintf("lib/f%d.ts", i): &src}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := e.svc.Source(ctx, e.actor, p.ID)
	if err != nil || len(b) != 8 {
		t.Fatalf("%d files, %v", len(b), err)
	}
	// Replaced sets of files are swept; the current one stays.
	if n, err := e.svc.SweepSources(ctx, 0); err != nil || n != 7 {
		t.Fatalf("swept %d, %v", n, err)
	}
	obs, err := e.js.ObjectStore(ctx, plugin.ObjectSources)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := obs.List(ctx)
	if err != nil || len(objs) != 1 {
		t.Fatalf("objects: %d %v", len(objs), err)
	}
}

// Concurrent config PATCHes of different keys merge.
func TestConcurrentConfigPatches(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.sourcePlugin(t)
	c, err := e.svc.CreateConfig(ctx, e.actor, 1, plugin.ConfigInput{Plugin: plugin.Field[uint64]{Set: true, Value: p.ID}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			in, _ := plugin.DecodeConfigInput(fmt.Appendf(nil, `{"config":{"k%d":"v"}}`, i))
			if _, err := e.svc.PatchConfig(ctx, e.actor, 1, c.ID, in); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := e.svc.GetConfig(ctx, e.actor, 1, c.ID)
	if err != nil || len(got.Config) != 10 {
		t.Fatalf("%v %v", got.Config, err)
	}
}

// Two installs of the same URL at once: exactly one wins.
func TestDuplicateInstallRace(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	dir := filepath.Join(e.local, "p")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.json"), []byte(`{"name":"p"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in, _ := plugin.DecodePluginInput([]byte(`{"plugin_type":"local","url":"file:p"}`))
	var mu sync.Mutex
	var ok, dup int
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, err := e.svc.Create(ctx, e.actor, in)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else if pe, isPE := err.(*plugin.Error); isPE && pe.Kind == plugin.KindInvalid {
				dup++
			} else {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok != 1 || dup != 5 {
		t.Fatalf("%d installed, %d refused", ok, dup)
	}
}

// Every change is published on PLUGIN_EVENTS after it is stored.
func TestEvents(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.sourcePlugin(t)
	in, _ := plugin.DecodePluginInput([]byte(`{"name":"n2"}`))
	if _, err := e.svc.Patch(ctx, e.actor, p.ID, in); err != nil {
		t.Fatal(err)
	}
	src := "export function processEvent(e) { return e }"
	if _, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{"index.ts": &src}); err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.CreateConfig(ctx, e.actor, 7, plugin.ConfigInput{Plugin: plugin.Field[uint64]{Set: true, Value: p.ID}, Enabled: plugin.Field[bool]{Set: true, Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctx, e.actor, p.ID); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.OrderedConsumer(ctx, plugin.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{plugin.KindInstalled, plugin.KindUpdated, plugin.KindSourceChanged, plugin.KindConfigCreated, plugin.KindUninstalled}
	var kinds []string
	for range want {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var ev plugin.Event
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		if msg.Subject() != plugin.Subject(e.actor.OrganizationID, ev.Kind) || msg.Headers().Get(jetstream.MsgIDHeader) != ev.ID {
			t.Fatalf("subject %s, msg id %s for %+v", msg.Subject(), msg.Headers().Get(jetstream.MsgIDHeader), ev)
		}
		if ev.PluginID != p.ID || ev.KeyID != "k" {
			t.Fatalf("event %+v", ev)
		}
		if ev.Kind == plugin.KindConfigCreated && (ev.PluginConfigID != c.ID || ev.ProjectID != 7) {
			t.Fatalf("config event %+v", ev)
		}
		if ev.Kind == plugin.KindSourceChanged && !slices.Equal(ev.Files, []string{"index.ts"}) {
			t.Fatalf("files %v", ev.Files)
		}
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	// The uninstalled plugin's configs went with it.
	if _, err := e.svc.GetConfig(ctx, e.actor, 7, c.ID); !plugin.IsNotFound(err) {
		t.Fatalf("config after uninstall: %v", err)
	}
}

// Without a configured source, the builtin index and its unpacked
// plugins install with no network at all.
func TestBuiltinRepositoryInstall(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	entries, err := e.svc.Repository(ctx)
	if err != nil || len(entries) != 3 {
		t.Fatalf("%v %v", entries, err)
	}
	in, _ := plugin.DecodePluginInput([]byte(`{"plugin_type":"repository","url":"https://github.com/personhub/plugin-drop-events"}`))
	p, err := e.svc.Create(ctx, e.actor, in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Drop events" || *p.Tag != "v1.0.0" || !p.IsTransformation() || len(p.SecretKeys) != 0 {
		t.Fatalf("%+v", p)
	}
	b, err := e.svc.Source(ctx, e.actor, p.ID)
	if err != nil || len(b) != 2 {
		t.Fatalf("%v %v", b, err)
	}
}
