package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

func TestPluginSource(t *testing.T) {
	e := newPluginEnv(t)
	id := fmt.Sprint(e.sourceTransformation(e.keyA, e.orgA, "editor")) + "/"
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 0 {
		t.Fatalf("new plugin has files: %v", src)
	}
	update := func(body string) map[string]any {
		t.Helper()
		return e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), body)
	}
	// The index file's exports decide the capabilities; plugin.json the
	// name and config_schema; the answer is the whole resulting map.
	got := update(`{"index.ts":"export async function processEvent(e) { return e }\nexport const runEveryHour = () => {}","plugin.json":"{\"name\":\"From JSON\",\"config\":[{\"key\":\"k\",\"secret\":true}]}"}`)
	if len(got) != 2 || !strings.Contains(got["index.ts"].(string), "processEvent") {
		t.Fatalf("files: %v", got)
	}
	p := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), "")
	if p["name"] != "From JSON" || pluginJSONText(p["config_schema"]) != `[{"key":"k","secret":true}]` ||
		pluginJSONText(p["capabilities"]) != `{"jobs":[],"methods":["processEvent"],"scheduled_tasks":["runEveryHour"]}` {
		t.Fatalf("plugin: %v", p)
	}
	// Transpiled files: success and failure, with statuses on request.
	got = e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id+"update_source/?include=status"),
		`{"frontend.tsx":"export const scene = () => <b>ok</b>","site.ts":"export function inject( {"}`)
	status := got["status"].(map[string]any)
	if st := status["frontend.tsx"].(map[string]any); st["status"] != "TRANSPILED" || st["error"] != nil {
		t.Fatalf("frontend: %v", st)
	}
	if st := status["site.ts"].(map[string]any); st["status"] != "ERROR" || !strings.HasPrefix(st["error"].(string), "site.ts:1:") {
		t.Fatalf("site: %v", st)
	}
	if _, ok := status["index.ts"]; ok || len(got["files"].(map[string]any)) != 4 {
		t.Fatalf("statuses %v files %v", status, got["files"])
	}
	// Without include=status the answer is {filename: source}.
	plain := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), "")
	if len(plain) != 4 || plain["site.ts"] != "export function inject( {" {
		t.Fatalf("plain: %v", plain)
	}
	// An index that does not parse is marked, and the capabilities stay.
	got = e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id+"update_source/?include=status"), `{"index.ts":"export function processEvent( {"}`)
	if st := got["status"].(map[string]any)["index.ts"].(map[string]any); st["status"] != "ERROR" {
		t.Fatalf("index status: %v", got["status"])
	}
	if p := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), ""); !strings.Contains(pluginJSONText(p["capabilities"]), "processEvent") {
		t.Fatalf("capabilities lost: %v", p)
	}
	// null deletes.
	got = update(`{"site.ts":null,"frontend.tsx":null,"never-there.js":null}`)
	if len(got) != 2 || got["site.ts"] != nil {
		t.Fatalf("after delete: %v", got)
	}
	// Bad input: 400s, nothing changes.
	for body, attr := range map[string]string{
		`{"plugin.json":"{not json"}`:                       "plugin.json",
		`{"plugin.json":"{\"name\":5}"}`:                    "plugin.json",
		`{"../evil.ts":"x"}`:                                "../evil.ts",
		`{"/abs.ts":"x"}`:                                   "/abs.ts",
		`{"a b.ts":"x"}`:                                    "a b.ts",
		`{"index.ts":5}`:                                    "index.ts",
		`{"big.ts":"` + strings.Repeat("x", 1<<20+1) + `"}`: "big.ts",
		`[]`: "",
	} {
		r := e.call("PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), body)
		e.wantErr(r, 400, "", attr)
	}
	e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), `{"x.ts":"`+strings.Repeat("x", 8<<20)+`"}`), 413, "larger than 8 MiB", "body")
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, id+"source/?include=everything"), ""), 400, "include", "include")
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf(`"f%d.js":"1"`, i))
	}
	e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), "{"+strings.Join(many, ",")+"}"), 400, "at most 32 source files", "")
	if p := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), ""); p["name"] != "From JSON" {
		t.Fatalf("changed by a refused update: %v", p)
	}
	// Code without processEvent: no longer a transformation, so gone
	// from this API.
	update(`{"index.ts":"export function onEvent(e) {}"}`)
	wantError(t, e.call("GET", e.keyA, e.pt(e.orgA, id), ""), 404, "invalid_request", "not_found")
}

func TestPluginUpdatesAndUpgrade(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/dropper/tree/v1"}`)
	id := fmt.Sprint(p["id"]) + "/"
	if p["tag"] != "v1" || p["latest_tag"] != "v1" {
		t.Fatalf("%v", p)
	}
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 2 {
		t.Fatalf("v1 files: %v", src)
	}
	checked := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"check_for_updates/"), "")["plugin"].(map[string]any)
	if checked["latest_tag"] != "v2" || checked["tag"] != "v1" || checked["name"] != "Dropper" {
		t.Fatalf("checked: %v", checked)
	}
	up := e.ok(200, "POST", e.keyA, e.pt(e.orgA, id+"upgrade/"), "")
	if up["tag"] != "v2" || up["latest_tag"] != "v2" || up["name"] != "Dropper 2" || up["description"] != "about Dropper 2" ||
		pluginJSONText(up["public_jobs"]) != `{"replay":{}}` || !strings.Contains(pluginJSONText(up["capabilities"]), "setupPlugin") ||
		up["url"] != "https://github.com/acme/dropper/tree/v1" {
		t.Fatalf("upgraded: %v", up)
	}
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 3 || src["frontend.tsx"] == nil {
		t.Fatalf("v2 files: %v", src)
	}
	// The mirror gets v3 (a tar.gz without a top folder, with a logo): found and installed.
	e.mirrorFile("github/acme/dropper/tags.json", `["v3","v2","v1"]`)
	e.mirrorFile("github/acme/dropper/v3.tar.gz", string(mustTarGz(
		"plugin.json", `{"name":"Dropper 3","config":[]}`, "index.ts", transformTS, "logo.png", "\x89PNG")))
	if c := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"check_for_updates/"), "")["plugin"].(map[string]any); c["latest_tag"] != "v3" || c["tag"] != "v2" {
		t.Fatalf("check v3: %v", c)
	}
	up = e.ok(200, "POST", e.keyA, e.pt(e.orgA, id+"upgrade/"), "")
	if up["tag"] != "v3" || up["name"] != "Dropper 3" || !strings.HasPrefix(up["icon"].(string), "data:image/png;base64,") || pluginJSONText(up["config_schema"]) != "[]" {
		t.Fatalf("v3: %v", up)
	}
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 2 || src["frontend.tsx"] != nil {
		t.Fatalf("v3 files: %v", src)
	}
	// A broken newest version leaves the plugin as it was.
	e.mirrorFile("github/acme/dropper/tags.json", `["v4","v3"]`)
	e.mirrorFile("github/acme/dropper/v4.tar.gz", string(mustTarGz("index.ts", transformTS)))
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, id+"upgrade/"), ""), 400, "Could not find plugin.json in the plugin", "url")
	if got := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), ""); got["tag"] != "v3" || got["name"] != "Dropper 3" {
		t.Fatalf("after failed upgrade: %v", got)
	}
	// Source and local plugins: no URL to check; upgrade is a no-op.
	s := fmt.Sprint(e.sourceTransformation(e.keyA, e.orgA, "src")) + "/"
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, s+"check_for_updates/"), ""), 400, "Only plugins installed from a URL", "plugin_type")
	before := e.ok(200, "GET", e.keyA, e.pt(e.orgA, s), "")
	if after := e.ok(200, "POST", e.keyA, e.pt(e.orgA, s+"upgrade/"), ""); pluginJSONText(after) != pluginJSONText(before) {
		t.Fatalf("source upgrade changed %v -> %v", before, after)
	}
	writePluginFile(t, e.localDir, "loc/plugin.json", `{"name":"loc"}`)
	writePluginFile(t, e.localDir, "loc/index.js", "export function processEvent(e) { return e }")
	l := fmt.Sprint(e.install(e.keyA, e.orgA, `{"plugin_type":"local","url":"file:loc"}`)["id"]) + "/"
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, l+"check_for_updates/"), ""), 400, "Only plugins installed from a URL", "")
	e.ok(200, "POST", e.keyA, e.pt(e.orgA, l+"upgrade/"), "")
}

func TestPluginRepository(t *testing.T) {
	e := newPluginEnv(t)
	r := e.okList("GET", e.keyARead, e.pt(e.orgA, "repository/"))
	if len(r) != 2 {
		t.Fatalf("%v", r)
	}
	first := r[0].(map[string]any)
	for _, k := range []string{"name", "url", "description", "icon", "verified", "maintainer", "type"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("entry lacks %s: %v", k, first)
		}
	}
	if first["name"] != "Dropper" || first["verified"] != true || first["type"] != "transformation" {
		t.Fatalf("%v", first)
	}
}
