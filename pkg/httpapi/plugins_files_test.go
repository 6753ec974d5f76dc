package httpapi

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Files of a local plugin that are no regular files (a FIFO blocks a
// reader until a writer comes), too large, or links out of the folder are
// refused with 400, promptly and with bounded memory; a refused create
// stores nothing (no record, no URL claim, no source object).
func TestPluginLocalFilesRefused(t *testing.T) {
	e := newPluginEnv(t)
	fifo := func(name string) {
		p := filepath.Join(e.localDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo("fifo/plugin.json")
	writePluginFile(t, e.localDir, "fifoindex/plugin.json", `{"name":"f"}`)
	fifo("fifoindex/index.ts")
	writePluginFile(t, e.localDir, "big/plugin.json", `{"name":"big"}`)
	writePluginFile(t, e.localDir, "big/index.ts", "")
	if err := os.Truncate(filepath.Join(e.localDir, "big/index.ts"), 200<<20); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "index.ts")
	writePluginFile(t, filepath.Dir(outside), "index.ts", transformTS)
	writePluginFile(t, e.localDir, "escape/plugin.json", `{"name":"escape"}`)
	if err := os.Symlink(outside, filepath.Join(e.localDir, "escape/index.ts")); err != nil {
		t.Fatal(err)
	}
	before := e.stored()
	for dir, detail := range map[string]string{
		"fifo":      "plugin.json of the plugin is not a regular file",
		"fifoindex": "index.ts of the plugin is not a regular file",
		"big":       "index.ts is larger than 1024 KiB",
		"escape":    "Could not read index.ts",
	} {
		done := make(chan response, 1)
		var stats [2]runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&stats[0])
		go func() {
			done <- e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"local","url":"file:`+dir+`"}`)
		}()
		select {
		case r := <-done:
			runtime.ReadMemStats(&stats[1])
			e.wantErr(r, 400, detail, "url")
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer after 10 s", dir)
		}
		if n := stats[1].TotalAlloc - stats[0].TotalAlloc; n > 16<<20 {
			t.Fatalf("%s: the refusal allocated %d MiB", dir, n>>20)
		}
	}
	// A record too large to store (JSON writes '<' as six bytes) is
	// refused before the URL is claimed and the files are stored.
	icon := strings.Repeat("<", 200_000)
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"url":"https://github.com/acme/dropper","icon":"`+icon+`"}`), 400, "too large to store", "")
	e.unchanged(before)
	if l := e.ok(200, "GET", e.keyA, e.pt(e.orgA, ""), ""); l["count"].(float64) != 0 {
		t.Fatalf("list: %v", l)
	}
}
