package httpapi

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPluginAuthAndOrganization(t *testing.T) {
	e := newPluginEnv(t)
	list := e.pt(e.orgA, "")
	wantError(t, e.call("GET", "", list, ""), 401, "authentication_error", "not_authenticated")
	m := wantError(t, e.call("GET", e.keyAPerson, list, ""), 403, "authentication_error", "permission_denied")
	if m["detail"] != "API key missing required scope 'plugin:read'" {
		t.Fatalf("detail %v", m["detail"])
	}
	if r := e.call("GET", e.keyARead, list, ""); r.status != 200 {
		t.Fatalf("read key: %d %s", r.status, r.body)
	}
	m = wantError(t, e.call("POST", e.keyARead, list, `{"plugin_type":"source","name":"x"}`), 403, "authentication_error", "permission_denied")
	if !strings.Contains(m["detail"].(string), "plugin:write") {
		t.Fatalf("detail %v", m["detail"])
	}
	// Another organization in the path looks exactly like an unknown one.
	other := e.call("GET", e.keyA, e.pt(e.orgB, ""), "")
	unknown := e.call("GET", e.keyA, e.pt("0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00", ""), "")
	wantError(t, other, 404, "invalid_request", "not_found")
	if string(other.body) != string(unknown.body) {
		t.Fatalf("%s != %s", other.body, unknown.body)
	}
	for _, path := range []string{"repository/", "unused/", "exports_unsubscribe_configs/", "activity/", "1/", "1/source/"} {
		wantError(t, e.call("GET", e.keyA, e.pt(e.orgB, path), ""), 404, "invalid_request", "not_found")
	}
	// @current is the key's organization.
	id := e.sourceTransformation(e.keyA, "@current", "cur")
	if p := e.ok(200, "GET", e.keyA, e.pt(e.orgA, fmt.Sprint(id)+"/"), ""); p["organization_id"] != e.orgA || p["organization_name"] != "A" {
		t.Fatalf("%v", p)
	}
	wantError(t, e.call("GET", e.keyA, e.pt(e.orgA, "abc/"), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("PUT", e.keyA, e.pt(e.orgA, fmt.Sprint(id)+"/"), "{}"), 405, "invalid_request", "method_not_allowed")
}

func TestPluginInstallFromArchives(t *testing.T) {
	e := newPluginEnv(t)
	// Unpinned GitHub URL: the newest tag (v2, a zip) is installed.
	p := e.install(e.keyA, e.orgA, `{"plugin_type":"custom","url":"https://github.com/acme/dropper?private_token=s3cret"}`)
	if p["name"] != "Dropper 2" || p["tag"] != "v2" || p["latest_tag"] != "v2" || p["description"] != "about Dropper 2" ||
		p["url"] != "https://github.com/acme/dropper" || p["plugin_type"] != "custom" || p["is_global"] != false {
		t.Fatalf("installed: %v", p)
	}
	if got := pluginJSONText(p["capabilities"]); got != `{"jobs":[],"methods":["processEvent","setupPlugin"],"scheduled_tasks":[]}` {
		t.Fatalf("capabilities %s", got)
	}
	if pluginJSONText(p["public_jobs"]) != `{"replay":{}}` || !strings.Contains(pluginJSONText(p["config_schema"]), `"secret":true`) {
		t.Fatalf("schema/jobs: %v", p)
	}
	for _, k := range []string{"id", "plugin_type", "name", "description", "url", "icon", "config_schema", "tag", "latest_tag",
		"is_global", "organization_id", "organization_name", "capabilities", "metrics", "public_jobs"} {
		if _, ok := p[k]; !ok {
			t.Fatalf("plugin lacks %q: %v", k, p)
		}
	}
	id := fmt.Sprint(p["id"])
	src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"/source/?include=status"), "")
	files := src["files"].(map[string]any)
	if len(files) != 3 || files["index.ts"] == nil || files["plugin.json"] == nil || files["frontend.tsx"] == nil {
		t.Fatalf("files: %v", files)
	}
	if st := src["status"].(map[string]any)["frontend.tsx"].(map[string]any); st["status"] != "TRANSPILED" || st["error"] != nil {
		t.Fatalf("status: %v", src["status"])
	}
	// Duplicates: the same URL, ignoring the query string, or a trailing slash.
	for _, url := range []string{"https://github.com/acme/dropper", "https://github.com/acme/dropper/?x=1", "https://GITHUB.com/acme/dropper"} {
		e.wantErr(e.call("POST", e.keyB, e.pt(e.orgB, ""), `{"url":"`+url+`"}`), 400, `Plugin from URL "`+url, "url")
	}
	// Pinned (tar.gz), GitLab (zip, CommonJS), npm (package/, main).
	pinned := e.install(e.keyB, e.orgB, `{"plugin_type":"custom","url":"https://github.com/acme/dropper/tree/v1"}`)
	if pinned["tag"] != "v1" || pinned["name"] != "Dropper" {
		t.Fatalf("pinned: %v", pinned)
	}
	gl := e.install(e.keyA, e.orgA, `{"url":"https://gitlab.com/group/sub/proj/-/tree/v1"}`)
	if gl["name"] != "GitLab one" || gl["tag"] != "v1" || !strings.Contains(pluginJSONText(gl["capabilities"]), "processEvent") {
		t.Fatalf("gitlab: %v", gl)
	}
	npm := e.install(e.keyA, e.orgA, `{"plugin_type":"custom","url":"https://www.npmjs.com/package/@acme/plugin-x"}`)
	if npm["name"] != "npm one" || npm["tag"] != "1.0.1" || !strings.Contains(pluginJSONText(npm["capabilities"]), "processEvent") {
		t.Fatalf("npm: %v", npm)
	}
	// Repository: only URLs of the index.
	repo := e.install(e.keyA, e.orgA, `{"plugin_type":"repository","url":"https://github.com/acme/exporter"}`)
	if repo["plugin_type"] != "repository" || repo["name"] != "Exporter" {
		t.Fatalf("repository: %v", repo)
	}
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"repository","url":"https://github.com/acme/siteapp"}`), 400, "not in the plugin repository index", "url")

	for body, detail := range map[string]string{
		`{"plugin_type":"custom","url":"https://example.com/x/y"}`:                 "Must be a GitHub/GitLab repository or npm package URL!",
		`{"plugin_type":"custom","url":"file:/etc"}`:                               "Must be a GitHub/GitLab repository or npm package URL!",
		`{"plugin_type":"custom","url":"https://github.com/acme/nomanifest"}`:      "Could not find plugin.json in the plugin",
		`{"plugin_type":"custom","url":"https://github.com/acme/evil"}`:            "Invalid plugin archive: refused entry \"../../escape.sh\"",
		`{"plugin_type":"custom","url":"https://github.com/acme/linky/tree/v1"}`:   "links are not allowed",
		`{"plugin_type":"custom","url":"https://github.com/acme/unknown"}`:         "Could not find the versions of https://github.com/acme/unknown",
		`{"plugin_type":"custom","url":"https://github.com/acme/dropper/tree/v9"}`: "Could not find the archive",
		`{"plugin_type":"custom"}`:                                                 "This field is required.",
	} {
		e.wantErr(e.call("POST", e.keyRoot, e.pt(e.orgRoot, ""), body), 400, detail, "url")
	}
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"wasm"}`), 400, "not a valid choice", "plugin_type")
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{}`), 400, "required", "plugin_type")
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"source"}`), 400, "required", "name")
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `not json`), 400, "JSON value", "body")
	// An archive larger than 20 MiB is refused before it is read whole.
	e.mirrorFile("github/acme/huge/v1.tar.gz", strings.Repeat("x", 20<<20+1))
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"url":"https://github.com/acme/huge/tree/v1"}`), 400, "larger than 20 MiB", "url")
}

func TestPluginLocal(t *testing.T) {
	e := newPluginEnv(t)
	writePluginFile(t, e.localDir, "mine/plugin.json", `{"config":[{"key":"a"}]}`)
	writePluginFile(t, e.localDir, "mine/index.ts", transformTS)
	writePluginFile(t, e.localDir, "mine/site.ts", "export function inject() {}")
	p := e.install(e.keyA, e.orgA, `{"plugin_type":"local","url":"file:mine"}`)
	if p["name"] != "mine" || p["url"] != "file:mine" || p["tag"] != nil || !strings.Contains(pluginJSONText(p["capabilities"]), "processEvent") {
		t.Fatalf("local: %v", p)
	}
	src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, fmt.Sprint(p["id"])+"/source/"), "")
	if len(src) != 3 || src["site.ts"] != "export function inject() {}" {
		t.Fatalf("source: %v", src)
	}
	// An absolute path inside the folder works; outside, or through a
	// link out of it, it does not.
	writePluginFile(t, e.localDir, "named/plugin.json", `{"name":"Named"}`)
	if p := e.install(e.keyA, e.orgA, `{"plugin_type":"local","url":"file:`+filepath.Join(e.localDir, "named")+`"}`); p["name"] != "Named" {
		t.Fatalf("absolute: %v", p)
	}
	outside := t.TempDir()
	writePluginFile(t, outside, "plugin.json", `{"name":"outside"}`)
	if err := os.Symlink(outside, filepath.Join(e.localDir, "link")); err != nil {
		t.Fatal(err)
	}
	for url, detail := range map[string]string{
		"file:missing":           "Could not load plugin.json from: missing/plugin.json",
		"file:../x":              "inside the local plugins folder",
		"file:" + outside:        "inside the local plugins folder",
		"file:mine/../../x":      "inside the local plugins folder",
		"file:link":              "Could not load plugin.json from: link/plugin.json",
		"https://github.com/a/b": "must be file:",
	} {
		e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"local","url":"`+url+`"}`), 400, detail, "url")
	}
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"local","url":"file:mine"}`), 400, `Plugin from URL "file:mine" already installed!`, "url")
}

func TestPluginVisibilityAndOwnership(t *testing.T) {
	e := newPluginEnv(t)
	a := e.sourceTransformation(e.keyA, e.orgA, "a-private")
	b := e.sourceTransformation(e.keyB, e.orgB, "b-private")
	g := e.ok(201, "POST", e.keyRoot, e.pt(e.orgRoot, ""), `{"plugin_type":"source","name":"global","is_global":true,"capabilities":{"methods":["processEvent"]}}`)
	gid := int(g["id"].(float64))
	if g["is_global"] != true {
		t.Fatalf("%v", g)
	}
	listed := func(key, org string) []int {
		return pluginIDs(t, e.ok(200, "GET", key, e.pt(org, ""), "")["results"])
	}
	if got := listed(e.keyA, e.orgA); !slices.Equal(got, []int{a, gid}) {
		t.Fatalf("A sees %v", got)
	}
	if got := listed(e.keyB, e.orgB); !slices.Equal(got, []int{b, gid}) {
		t.Fatalf("B sees %v", got)
	}
	// Another organization's private plugin: 404 for every route.
	bp := fmt.Sprint(b) + "/"
	for _, c := range [][2]string{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"GET", "source/"}, {"PATCH", "update_source/"}, {"GET", "check_for_updates/"}, {"POST", "upgrade/"}} {
		wantError(t, e.call(c[0], e.keyA, e.pt(e.orgA, bp+c[1]), `{}`), 404, "invalid_request", "not_found")
	}
	// A global plugin of another organization: readable, not writable.
	gp := fmt.Sprint(gid) + "/"
	e.ok(200, "GET", e.keyA, e.pt(e.orgA, gp), "")
	e.ok(200, "GET", e.keyA, e.pt(e.orgA, gp+"source/"), "")
	for _, c := range [][2]string{{"PATCH", ""}, {"DELETE", ""}, {"PATCH", "update_source/"}, {"GET", "check_for_updates/"}, {"POST", "upgrade/"}} {
		e.wantErr(e.call(c[0], e.keyA, e.pt(e.orgA, gp+c[1]), `{"name":"x"}`), 403, "This plugin installation is managed by another organization", "")
	}
	// A configures the global plugin; once Root makes it local, A still
	// sees it (configured) and B no longer does.
	e.ok(201, "POST", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA), fmt.Sprintf(`{"plugin":%d,"enabled":true}`, gid))
	e.ok(200, "PATCH", e.keyRoot, e.pt(e.orgRoot, gp), `{"is_global":false}`)
	if got := listed(e.keyA, e.orgA); !slices.Equal(got, []int{a, gid}) {
		t.Fatalf("A sees %v", got)
	}
	if got := listed(e.keyB, e.orgB); !slices.Equal(got, []int{b}) {
		t.Fatalf("B sees %v", got)
	}
	wantError(t, e.call("GET", e.keyB, e.pt(e.orgB, gp), ""), 404, "invalid_request", "not_found")
	// B cannot configure A's private plugin.
	e.wantErr(e.call("POST", e.keyB, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectB), fmt.Sprintf(`{"plugin":%d}`, a)), 400, "object does not exist", "plugin")
}

func TestPluginGlobalRule(t *testing.T) {
	e := newPluginEnv(t)
	// Only Root may set is_global, true or false, on create or PATCH.
	for _, v := range []string{"true", "false"} {
		e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"source","name":"x","is_global":`+v+`}`), 403, "This organization can't manage global plugins!", "")
	}
	a := fmt.Sprint(e.sourceTransformation(e.keyA, e.orgA, "a")) + "/"
	e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, a), `{"is_global":false}`), 403, "This organization can't manage global plugins!", "")
	g := fmt.Sprint(e.sourceTransformation(e.keyRoot, e.orgRoot, "g")) + "/"
	if p := e.ok(200, "PATCH", e.keyRoot, e.pt(e.orgRoot, g), `{"is_global":true}`); p["is_global"] != true {
		t.Fatalf("%v", p)
	}
	e.wantErr(e.call("DELETE", e.keyRoot, e.pt(e.orgRoot, g), ""), 400, "This plugin is marked as global! Make it local before uninstallation", "")
	e.ok(200, "PATCH", e.keyRoot, e.pt(e.orgRoot, g), `{"is_global":false}`)
	e.ok(204, "DELETE", e.keyRoot, e.pt(e.orgRoot, g), "")
	wantError(t, e.call("GET", e.keyRoot, e.pt(e.orgRoot, g), ""), 404, "invalid_request", "not_found")
}

func TestPluginListFilterAndPaging(t *testing.T) {
	e := newPluginEnv(t)
	var want []int
	for i := range 5 {
		want = append(want, e.sourceTransformation(e.keyA, e.orgA, fmt.Sprint("t", i)))
	}
	exp := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/exporter"}`)
	expID := fmt.Sprint(exp["id"]) + "/"
	src := e.install(e.keyA, e.orgA, `{"plugin_type":"source","name":"no code yet"}`)
	// Not a transformation: absent from the list, 404 on every {id} route.
	for _, c := range [][2]string{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"GET", "source/"}, {"PATCH", "update_source/"}, {"GET", "check_for_updates/"}, {"POST", "upgrade/"}} {
		wantError(t, e.call(c[0], e.keyA, e.pt(e.orgA, expID+c[1]), `{}`), 404, "invalid_request", "not_found")
	}
	// A source plugin without code yet is listed (it was created here and
	// gets its code through update_source).
	want = append(want, int(src["id"].(float64)))
	m := e.ok(200, "GET", e.keyA, e.pt(e.orgA, "?limit=2&offset=2"), "")
	if m["count"].(float64) != 6 || !slices.Equal(pluginIDs(t, m["results"]), want[2:4]) {
		t.Fatalf("page: %v", m)
	}
	if !strings.Contains(m["next"].(string), "offset=4") || !strings.Contains(m["previous"].(string), "offset=0") {
		t.Fatalf("links: %v %v", m["next"], m["previous"])
	}
	if m := e.ok(200, "GET", e.keyA, e.pt(e.orgA, "?limit=2&offset=4"), ""); m["next"] != nil || !slices.Equal(pluginIDs(t, m["results"]), want[4:]) {
		t.Fatalf("last page: %v", m)
	}
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, "?limit=0"), ""), 400, "limit", "limit")
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, "?offset=-1"), ""), 400, "offset", "offset")
	// unused/ lists every plugin of the organization without an enabled
	// config, transformations or not.
	if got := e.okList("GET", e.keyA, e.pt(e.orgA, "unused/")); len(got) != 7 {
		t.Fatalf("unused %v", got)
	}
}

func TestPluginPatch(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/dropper/tree/v1","icon":"data:x"}`)
	id := fmt.Sprint(p["id"]) + "/"
	got := e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id), `{"name":"Renamed","description":null,"metrics":{"m":1},
		"capabilities":{"methods":["processEvent"],"jobs":["j"]},"config_schema":{"k":{"secret":true}},"tag":"mine",
		"id":999,"url":"https://github.com/x/y","latest_tag":"zz","organization_id":"o","organization_name":"n"}`)
	if got["name"] != "Renamed" || got["description"] != nil || got["id"] != p["id"] || got["url"] != p["url"] ||
		got["latest_tag"] != "v1" || got["organization_id"] != e.orgA || got["tag"] != "mine" || got["icon"] != "data:x" ||
		pluginJSONText(got["capabilities"]) != `{"jobs":["j"],"methods":["processEvent"],"scheduled_tasks":[]}` {
		t.Fatalf("patched: %v", got)
	}
	if again := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), ""); pluginJSONText(again) != pluginJSONText(got) {
		t.Fatalf("read back %v", again)
	}
	for body, attr := range map[string]string{
		`{"plugin_type":"source"}`: "plugin_type",
		`{"name":""}`:              "name",
		`{"is_global":"no"}`:       "is_global",
		`{"capabilities":[1]}`:     "capabilities",
		`{"config_schema":5}`:      "config_schema",
		`{"public_jobs":"x"}`:      "public_jobs",
		`{"description":{"a":1}}`:  "description",
	} {
		e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, id), body), 400, "", attr)
	}
	e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, id), `{"icon":"`+strings.Repeat("i", 2<<20)+`"}`), 413, "larger than 1 MiB", "body")
}

func TestPluginDelete(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/dropper"}`)
	id := fmt.Sprint(p["id"])
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+id+`,"enabled":true}`)
	e.ok(204, "DELETE", e.keyA, e.pt(e.orgA, id+"/"), "")
	wantError(t, e.call("GET", e.keyA, e.pt(e.orgA, id+"/"), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("GET", e.keyA, e.pt(e.orgA, id+"/source/"), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("GET", e.keyA, cfgs+fmt.Sprint(c["id"])+"/", ""), 404, "invalid_request", "not_found")
	if m := e.ok(200, "GET", e.keyA, cfgs, ""); m["count"].(float64) != 0 {
		t.Fatalf("configs after uninstall: %v", m)
	}
	wantError(t, e.call("DELETE", e.keyA, e.pt(e.orgA, id+"/"), ""), 404, "invalid_request", "not_found")
	// The URL is free again.
	again := e.install(e.keyB, e.orgB, `{"url":"https://github.com/acme/dropper"}`)
	if fmt.Sprint(again["id"]) == id {
		t.Fatalf("id reused: %v", again)
	}
}
