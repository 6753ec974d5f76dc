package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/plugin/archive/archivetest"
	"github.com/personhub/personhub/pkg/plugin/repository"
	"github.com/personhub/personhub/pkg/testenv"
)

// pluginEnv is a running API with plugins over real JetStream and
// ClickHouse, a local archive mirror served over HTTP, a local plugins
// folder, and three organizations: A (projects a, a2), B (project b) and
// Root (may manage global plugins).
type pluginEnv struct {
	t          *testing.T
	url        string
	nats       *testenv.NATS
	svc        *plugin.Service
	mirror     string // folder served by the mirror
	mirrorURL  string
	localDir   string
	orgA, orgB string
	orgRoot    string
	projectA   uint64
	projectA2  uint64
	projectB   uint64
	keyA       string // org A, *
	keyARead   string // org A, plugin:read
	keyAPerson string // org A, person:read only
	keyAWrite  string // org A, plugin:write only
	keyB       string // org B, *
	keyRoot    string // org Root, *
}

func newPluginEnv(t *testing.T) *pluginEnv {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	cp, err := controlplane.Open(ctx, n.JS, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	e := &pluginEnv{t: t, nats: n, mirror: t.TempDir(), localDir: t.TempDir()}
	org := func(name string) string {
		o, err := cp.CreateOrganization(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return o.ID
	}
	project := func(org, name string) uint64 {
		p, err := cp.CreateProject(ctx, org, name)
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	key := func(org string, scopes ...string) string {
		secret, _, err := cp.CreateKey(ctx, org, "key "+scopes[0], scopes)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	e.orgA, e.orgB, e.orgRoot = org("A"), org("B"), org("Root")
	e.projectA, e.projectA2, e.projectB = project(e.orgA, "a"), project(e.orgA, "a2"), project(e.orgB, "b")
	e.keyA, e.keyARead, e.keyAPerson = key(e.orgA, "*"), key(e.orgA, "plugin:read"), key(e.orgA, "person:read")
	e.keyAWrite = key(e.orgA, "plugin:write")
	e.keyB, e.keyRoot = key(e.orgB, "*"), key(e.orgRoot, "*")

	e.writeMirror()
	mirror := httptest.NewServer(http.FileServer(http.Dir(e.mirror)))
	t.Cleanup(mirror.Close)
	e.mirrorURL = mirror.URL
	src, err := repository.NewHTTP(mirror.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e.svc, err = plugin.Open(ctx, n.JS, plugin.Options{Source: src, LocalDir: e.localDir,
		GlobalOrganizations: []string{e.orgRoot}, Activity: activity.New(store.Conn())}, cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{}, Deps{Store: store, Keys: cp, Log: log, Reg: reg, Ready: store.Ping, Plugins: e.svc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(checkedHandler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// Plugin code of the mirror's archives.
const (
	transformTS = "export function processEvent(event: any, { config }: any) { return event }\n"
	exportTS    = "export async function onEvent(event: any) {}\n"
	secretConf  = `[{"key":"url","name":"URL","type":"string"},{"key":"token","name":"Token","type":"string","secret":true}]`
)

// writeMirror lays out the archive mirror: tar.gz and zip archives,
// tag listings and the index.
func (e *pluginEnv) writeMirror() {
	manifest := func(name, extra string) string {
		return `{"name":"` + name + `","description":"about ` + name + `","config":` + secretConf + extra + `}`
	}
	e.mirrorFile("index.json", `[
 {"name":"Dropper","url":"https://github.com/acme/dropper","description":"drops","icon":"","verified":true,"maintainer":"acme","type":"transformation"},
 {"name":"Exporter","url":"https://github.com/acme/exporter","description":"exports","icon":"","verified":false,"maintainer":"acme","type":"data_out"}]`)
	e.mirrorFile("github/acme/dropper/tags.json", `["v2","v1"]`)
	e.mirrorFile("github/acme/dropper/v1.tar.gz", string(archivetest.TarGz(
		archivetest.Entry{Name: "dropper-v1/", Dir: true},
		archivetest.Entry{Name: "dropper-v1/plugin.json", Body: manifest("Dropper", "")},
		archivetest.Entry{Name: "dropper-v1/index.ts", Body: transformTS},
		archivetest.Entry{Name: "dropper-v1/README.md", Body: "readme"})))
	e.mirrorFile("github/acme/dropper/v2.zip", string(archivetest.Zip(
		archivetest.Entry{Name: "dropper-v2/plugin.json", Body: manifest("Dropper 2", `,"publicJobs":{"replay":{}}`)},
		archivetest.Entry{Name: "dropper-v2/index.ts", Body: transformTS + "export function setupPlugin() {}\n"},
		archivetest.Entry{Name: "dropper-v2/frontend.tsx", Body: "export const scene = () => <div>hi</div>\n"})))
	e.mirrorFile("github/acme/exporter/tags.json", `["v1"]`)
	e.mirrorFile("github/acme/exporter/v1.tar.gz", string(archivetest.TarGz(archivetest.Files(
		"exporter-v1/plugin.json", manifest("Exporter", ""), "exporter-v1/index.ts", exportTS)...)))
	e.mirrorFile("github/acme/siteapp/tags.json", `["v1"]`)
	e.mirrorFile("github/acme/siteapp/v1.tar.gz", string(archivetest.TarGz(archivetest.Files(
		"plugin.json", `{"name":"Site app"}`, "site.ts", "export function inject() {}")...)))
	e.mirrorFile("github/acme/nomanifest/tags.json", `["v1"]`)
	e.mirrorFile("github/acme/nomanifest/v1.tar.gz", string(archivetest.TarGz(archivetest.Files("x/index.ts", transformTS)...)))
	e.mirrorFile("github/acme/evil/tags.json", `["v1"]`)
	e.mirrorFile("github/acme/evil/v1.tar.gz", string(archivetest.TarGz(
		archivetest.Entry{Name: "plugin.json", Body: "{}"}, archivetest.Entry{Name: "../../escape.sh", Body: "x"})))
	e.mirrorFile("github/acme/linky/v1.zip", string(archivetest.Zip(
		archivetest.Entry{Name: "plugin.json", Body: "{}"}, archivetest.Entry{Name: "index.ts", Symlink: "/etc/passwd"})))
	e.mirrorFile("gitlab/group/sub/proj/v1.zip", string(archivetest.Zip(archivetest.Files(
		"proj-v1/plugin.json", `{"name":"GitLab one"}`, "proj-v1/index.js", "exports.processEvent = (e) => e")...)))
	// A plugin.json whose config has an element that is not a field: at
	// v2 of schemas (installed at v1, upgraded to v2), in the only tag of
	// oddschema.
	oddConfig := `[{"key":"token","secret":true},{"key":"other","secret":"no"}]`
	e.mirrorFile("github/acme/schemas/tags.json", `["v2","v1"]`)
	e.mirrorFile("github/acme/schemas/v1.tar.gz", string(mustTarGz("plugin.json", manifest("Schemas", ""), "index.ts", transformTS)))
	e.mirrorFile("github/acme/schemas/v2.tar.gz", string(mustTarGz("plugin.json", `{"name":"Schemas 2","config":`+oddConfig+`}`, "index.ts", transformTS)))
	e.mirrorFile("github/acme/oddschema/tags.json", `["v1"]`)
	e.mirrorFile("github/acme/oddschema/v1.tar.gz", string(mustTarGz("plugin.json", `{"name":"Odd","config":`+oddConfig+`}`, "index.ts", transformTS)))
	e.mirrorFile("npm/@acme/plugin-x/tags.json", `["1.0.1","1.0.0"]`)
	e.mirrorFile("npm/@acme/plugin-x/1.0.1.tar.gz", string(archivetest.TarGz(archivetest.Files(
		"package/plugin.json", `{"name":"npm one","main":"dist/main.js"}`, "package/dist/main.js", "export const processEvent = (e) => e")...)))
}

// mustTarGz is a tar.gz of name/body pairs.
func mustTarGz(pairs ...string) []byte { return archivetest.TarGz(archivetest.Files(pairs...)...) }

func (e *pluginEnv) mirrorFile(name, body string) { writePluginFile(e.t, e.mirror, name, body) }

func writePluginFile(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stored lists what the plugin store holds: plugin records, URL claims
// and source objects, so a test can check that a refused request wrote
// nothing.
func (e *pluginEnv) stored() []string {
	e.t.Helper()
	ctx := context.Background()
	var out []string
	for _, bucket := range []string{plugin.BucketPlugins, plugin.BucketURLs, plugin.BucketConfigs} {
		kv, err := e.nats.JS.KeyValue(ctx, bucket)
		if err != nil {
			e.t.Fatal(err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		for k := range keys.Keys() {
			entry, err := kv.Get(ctx, k)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s/%s@%d", bucket, k, entry.Revision()))
		}
	}
	obs, err := e.nats.JS.ObjectStore(ctx, plugin.ObjectSources)
	if err != nil {
		e.t.Fatal(err)
	}
	objs, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		e.t.Fatal(err)
	}
	for _, o := range objs {
		out = append(out, plugin.ObjectSources+"/"+o.Name)
	}
	slices.Sort(out)
	return out
}

// unchanged checks that the store holds what it held before.
func (e *pluginEnv) unchanged(before []string) {
	e.t.Helper()
	if after := e.stored(); !slices.Equal(before, after) {
		e.t.Fatalf("the store changed:\nbefore %v\nafter  %v", before, after)
	}
}

// pt is a pipeline_transformations path of an organization.
func (e *pluginEnv) pt(org, rest string) string {
	return "/api/organizations/" + org + "/pipeline_transformations/" + rest
}

func (e *pluginEnv) call(method, key, path, body string) response {
	e.t.Helper()
	return request(e.t, method, e.url+path, key, body)
}

// ok calls and checks the status, returning the decoded object.
func (e *pluginEnv) ok(status int, method, key, path, body string) map[string]any {
	e.t.Helper()
	r := e.call(method, key, path, body)
	if r.status != status {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	if status == http.StatusNoContent {
		return nil
	}
	return r.json(e.t)
}

// okList calls and expects 200 with a JSON array.
func (e *pluginEnv) okList(method, key, path string) []any {
	e.t.Helper()
	r := e.call(method, key, path, "")
	var out []any
	if r.status != 200 || json.Unmarshal(r.body, &out) != nil {
		e.t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	return out
}

// install creates a plugin in org (key) and returns it.
func (e *pluginEnv) install(key, org, body string) map[string]any {
	e.t.Helper()
	return e.ok(201, "POST", key, e.pt(org, ""), body)
}

// sourceTransformation creates a source plugin that is a transformation.
func (e *pluginEnv) sourceTransformation(key, org, name string) int {
	e.t.Helper()
	p := e.install(key, org, `{"plugin_type":"source","name":"`+name+`","capabilities":{"methods":["processEvent"]}}`)
	return int(p["id"].(float64))
}

// wantErr checks an error status and detail (and attr when given).
func (e *pluginEnv) wantErr(r response, status int, detail, attr string) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	m := r.json(e.t)
	for _, k := range []string{"type", "code", "detail", "attr"} {
		if _, ok := m[k]; !ok {
			e.t.Fatalf("error body lacks %q: %s", k, r.body)
		}
	}
	if d, _ := m["detail"].(string); !strings.Contains(d, detail) {
		e.t.Fatalf("detail %q, want %q", d, detail)
	}
	if attr != "" && m["attr"] != attr {
		e.t.Fatalf("attr %v, want %s", m["attr"], attr)
	}
}

func pluginIDs(t *testing.T, list any) []int {
	t.Helper()
	var out []int
	for _, x := range list.([]any) {
		switch v := x.(type) {
		case float64:
			out = append(out, int(v))
		case map[string]any:
			out = append(out, int(v["id"].(float64)))
		}
	}
	return out
}

func pluginJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
