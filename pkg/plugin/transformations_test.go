package plugin_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

// TestProcessEventBatchIsATransformation: code that exports only
// processEventBatch (as PostHog's taxonomy plugin does) lists it in
// capabilities.methods and can be enabled; the runtime calls it an event
// at a time (pkg/transform TestProcessEventBatch).
func TestProcessEventBatchIsATransformation(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.emptySource(t)
	src := "export async function processEventBatch(events) { return events }"
	if _, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{"index.ts": &src}); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Get(ctx, e.actor, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Capabilities.Methods, []string{"processEventBatch"}) || !got.IsTransformation() {
		t.Fatalf("capabilities %+v", got.Capabilities)
	}
	if _, err := e.svc.CreateConfig(ctx, e.actor, 1, enabled(p.ID, true)); err != nil {
		t.Fatal(err)
	}
}

// TestNothingToRunCannotBeEnabled: a plugin whose code exports nothing
// that runs (or that has no code yet) gets a 400 on enabling, naming the
// reason, instead of an enabled config that is never called; a disabled
// config can still be made and configured, and enabled once there is
// code.
func TestNothingToRunCannotBeEnabled(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.emptySource(t)
	_, err := e.svc.CreateConfig(ctx, e.actor, 1, enabled(p.ID, true))
	assertInvalid(t, err, "enabled", "processEvent")
	c, err := e.svc.CreateConfig(ctx, e.actor, 1, enabled(p.ID, false))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.PatchConfig(ctx, e.actor, 1, c.ID, enabled(0, true))
	assertInvalid(t, err, "enabled", "processEvent")
	src := "export function processEvent(e) { return e }"
	if _, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{"index.ts": &src}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PatchConfig(ctx, e.actor, 1, c.ID, enabled(0, true)); err != nil {
		t.Fatal(err)
	}
}

// TestUnprovidedImportsAreRefusedAtInstall: an entry file that imports a
// module the runtime does not give is refused when it is uploaded, the
// error naming the module, not at its first event.
func TestUnprovidedImportsAreRefusedAtInstall(t *testing.T) {
	e := newSvc(t)
	ctx := context.Background()
	p := e.emptySource(t)
	for src, module := range map[string]string{
		"import fs from 'fs'\nexport function processEvent(e) { fs.readFileSync('x'); return e }": `"fs"`,
		"const UA = require('ua-parser-js')\nexports.processEvent = (e) => e":                     `"ua-parser-js"`,
		"import { helper } from './lib'\nexport function processEvent(e) { return helper(e) }":    `"./lib"`,
	} {
		_, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{"index.ts": &src})
		assertInvalid(t, err, "index.ts", module)
	}
	ok := "import { createHash } from 'crypto'\nimport { URL } from 'node:url'\nimport { RetryError } from '@posthog/plugin-scaffold'\n" +
		"export function processEvent(e) { if (!e) throw new RetryError('x'); e.properties.h = createHash('md5').update(new URL('http://a/').host).digest('hex'); return e }"
	if _, err := e.svc.UpdateSource(ctx, e.actor, p.ID, map[string]*string{"index.ts": &ok}); err != nil {
		t.Fatal(err)
	}
}

// emptySource is a source plugin with no code yet.
func (e *svcEnv) emptySource(t *testing.T) plugin.Plugin {
	t.Helper()
	return e.create(t, `{"plugin_type":"source","name":"empty"}`)
}

func enabled(pluginID uint64, on bool) plugin.ConfigInput {
	in := plugin.ConfigInput{Enabled: plugin.Field[bool]{Set: true, Value: on}}
	if pluginID != 0 {
		in.Plugin = plugin.Field[uint64]{Set: true, Value: pluginID}
	}
	return in
}

func assertInvalid(t *testing.T, err error, attr, mention string) {
	t.Helper()
	var pe *plugin.Error
	if !errors.As(err, &pe) || pe.Kind != plugin.KindInvalid || pe.Attr != attr || !strings.Contains(pe.Detail, mention) {
		t.Fatalf("want an invalid %s naming %s, got %v", attr, mention, err)
	}
}
