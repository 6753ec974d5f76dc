package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// filterByAttachment is a plugin in the shape of PostHog's filter-out: it
// reads a JSON file of filters from meta.attachments in setupPlugin (the
// contents are a Buffer, which JSON.parse reads as text) and drops the
// events whose property matches one.
const filterByAttachment = `export function setupPlugin({ attachments, global }: any) {
  global.filters = attachments.filters ? JSON.parse(attachments.filters.contents) : []
}
export function processEvent(event: any, { global }: any) {
  for (const f of global.filters) {
    if (event.properties[f.property] === f.value) return null
  }
  return event
}`

const filterManifest = `{"name":"filter by file","main":"index.ts","config":[
  {"key":"filters","name":"Filters","type":"attachment"},
  {"key":"note","name":"Note","type":"string"}]}`

// tool runs a client program (curl, python3) and returns its output; the
// test is skipped where the program is missing.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed", name)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// statusAndBody splits curl's output written with -w '\n%{http_code}'.
func statusAndBody(t *testing.T, out string) (int, map[string]any) {
	t.Helper()
	i := strings.LastIndex(out, "\n")
	var code int
	fmt.Sscan(out[i+1:], &code)
	var m map[string]any
	_ = json.Unmarshal([]byte(out[:i]), &m)
	return code, m
}

// TestPluginConfigAttachments: a filter-out shaped plugin installed
// through the API, its filters file uploaded as curl -F and Python's
// requests send it, events through /batch/: the stored events are those
// the file keeps; a replaced file applies to the events after it, and a
// replay into a new database gives the same events. Hostile forms get a
// 400 or 413 naming the field, never a 500.
func TestPluginConfigAttachments(t *testing.T) {
	e := newTransformEnv(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := e.call(201, "POST", "/api/organizations/@current/pipeline_transformations/", `{"plugin_type":"source","name":"filter"}`)
	files, _ := json.Marshal(map[string]string{"index.ts": filterByAttachment, "plugin.json": filterManifest})
	e.call(200, "PATCH", fmt.Sprintf("/api/organizations/@current/pipeline_transformations/%v/update_source/", p["id"]), string(files))
	configs := fmt.Sprintf("%s/api/projects/%d/plugin_configs/", e.apiURL, e.projectA.ID)
	auth := "Authorization: Bearer " + e.keyAll

	// Create with curl -F: config as JSON text, enabled as text, the file.
	f1 := write("filters.json", `[{"property":"$host","value":"localhost:8000"}]`)
	code, c := statusAndBody(t, tool(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", auth, "-F", "plugin="+fmt.Sprint(p["id"]),
		"-F", "enabled=true", "-F", `config={"note":"internal traffic"}`, "-F", "add_attachment[filters]=@"+f1+";type=application/json", configs))
	if code != 201 {
		t.Fatalf("curl create: %d %v", code, c)
	}
	cfg := c["config"].(map[string]any)
	shown, _ := cfg["filters"].(map[string]any)
	if cfg["note"] != "internal traffic" || shown["saved"] != true || shown["name"] != "filters.json" || shown["type"] != "application/json" ||
		shown["size"] != 47.0 || len(fmt.Sprint(shown["uid"])) != 64 {
		t.Fatalf("config as shown: %v", cfg)
	}
	id := c["id"].(float64)
	if got := e.call(200, "GET", fmt.Sprintf("/api/projects/%d/plugin_configs/%v/", e.projectA.ID, id), ""); !strings.Contains(fmt.Sprint(got["config"]), "saved:true") {
		t.Fatalf("GET shows %v", got["config"])
	}

	_, stop := e.runIngester(e.store, "ingester")
	ev := func(name, host string) string {
		return fmt.Sprintf(`{"event":%q,"distinct_id":"u1","properties":{"$host":%q}}`, name, host)
	}
	e.capture(ev("a", "localhost:8000"), ev("b", "example.com"))

	// Replace the file with Python's requests (its own boundary and
	// quoting), as a PATCH.
	f2 := write("filters2.json", `[{"property":"$host","value":"example.com"}]`)
	script := `import requests, sys
r = requests.patch(sys.argv[1], headers={"Authorization": sys.argv[2]},
    data={"config": '{"note": "v2"}'},
    files={"add_attachment[filters]": ("filters2.json", open(sys.argv[3], "rb"), "application/json")})
print(r.text)
print(r.status_code, end="")`
	patch := fmt.Sprintf("%s%v/", configs, id)
	code, c = statusAndBody(t, tool(t, "python3", "-c", script, patch, auth[len("Authorization: "):], f2))
	if code != 200 || c["config"].(map[string]any)["filters"].(map[string]any)["name"] != "filters2.json" {
		t.Fatalf("python patch: %d %v", code, c)
	}
	e.capture(ev("c", "localhost:8000"), ev("d", "example.com"))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	stop()
	first := storedEvents(t, e.store, e.projectA.ID)
	want := []string{`b u1 {"$host":"example.com"}`, `c u1 {"$host":"localhost:8000"}`}
	if !slices.Equal(first, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(first, "\n"), strings.Join(want, "\n"))
	}
	replayStore := testenv.ClickHouse(t)
	e.runIngester(replayStore, "replay")
	testenv.WaitCommitted(t, replayStore, "replay", e.lastSeq(), 30*time.Second)
	if again := storedEvents(t, replayStore, e.projectA.ID); !slices.Equal(again, first) {
		t.Fatalf("replay:\n%s\nfirst run:\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}

	// Hostile forms: a clear 4xx naming the field, never a 500.
	big := write("big.json", strings.Repeat(" ", 1<<20+1))
	huge := write("huge.bin", strings.Repeat("x", 7<<20))
	for _, h := range []struct {
		args []string
		code int
		attr string
	}{
		{[]string{"-F", "add_attachment[filters]=@" + big}, 400, "add_attachment[filters]"},
		{[]string{"-F", "add_attachment[filters]=@" + huge}, 413, "body"},
		{[]string{"-F", "add_attachment[nope]=@" + f1}, 400, "add_attachment[nope]"},
		{[]string{"-F", "colour=blue"}, 400, "colour"},
		{[]string{"-F", "add_attachment[filters]=not a file"}, 400, "add_attachment[filters]"},
		{[]string{"-F", "enabled=perhaps"}, 400, "enabled"},
		{[]string{"-F", "config={broken"}, 400, "config"},
		{[]string{"-H", "Content-Type: multipart/form-data", "--data-binary", "x"}, 400, "body"},
		{[]string{"-H", "Content-Type: multipart/form-data; boundary=zz", "--data-binary", "--zz\r\nno header line\r\n\r\n"}, 400, "body"},
	} {
		args := append([]string{"-sS", "-w", "\n%{http_code}", "-X", "PATCH", "-H", auth}, h.args...)
		code, body := statusAndBody(t, tool(t, "curl", append(args, patch)...))
		if code != h.code || body["attr"] != h.attr {
			t.Errorf("%v: %d %v, want %d attr %s", h.args, code, body, h.code, h.attr)
		}
	}
	// Removal (curl -F remove_attachment[KEY]=true), and JSON bodies work
	// unchanged.
	code, c = statusAndBody(t, tool(t, "curl", "-sS", "-w", "\n%{http_code}", "-X", "PATCH", "-H", auth, "-F", "remove_attachment[filters]=true", patch))
	if _, held := c["config"].(map[string]any)["filters"]; code != 200 || held {
		t.Fatalf("removal: %d %v", code, c)
	}
	if got := e.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/plugin_configs/%v/", e.projectA.ID, id), `{"config":{"note":"json"}}`); got["config"].(map[string]any)["note"] != "json" {
		t.Fatalf("JSON PATCH: %v", got)
	}
}
