package plugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// A 200 MiB file in an unpacked plugin of a mirror folder is refused
// (400) without being read, and the refused install stores nothing.
func TestInstallFromMirrorFolderWithHugeFile(t *testing.T) {
	mirror := t.TempDir()
	for name, body := range map[string]string{
		"index.json":                  `[]`,
		"github/o/big/tags.json":      `["v1"]`,
		"github/o/big/v1/plugin.json": `{"name":"big"}`,
		"github/o/big/v1/index.ts":    "export function processEvent(e) { return e }",
	} {
		p := filepath.Join(mirror, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(filepath.Join(mirror, "github/o/big/v1/index.ts"), 200<<20); err != nil {
		t.Fatal(err)
	}
	src, err := repository.NewDir(mirror)
	if err != nil {
		t.Fatal(err)
	}
	e := newSvcWith(t, plugin.Options{Source: src})
	ctx := context.Background()
	in, _ := plugin.DecodePluginInput([]byte(`{"url":"https://github.com/o/big"}`))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = e.svc.Create(ctx, e.actor, in)
	runtime.ReadMemStats(&after)
	if pe, ok := err.(*plugin.Error); !ok || pe.Kind != plugin.KindInvalid || pe.Attr != "url" {
		t.Fatalf("huge file: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Fatalf("refusing a 200 MiB file allocated %d MiB", n>>20)
	}
	for _, bucket := range []string{plugin.BucketPlugins, plugin.BucketURLs} {
		kv, err := e.js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if keys, err := kv.Keys(ctx); !errors.Is(err, jetstream.ErrNoKeysFound) {
			t.Fatalf("%s holds %v %v", bucket, keys, err)
		}
	}
	obs, err := e.js.ObjectStore(ctx, plugin.ObjectSources)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := obs.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatalf("objects %v %v", objs, err)
	}
}
