package httpapi

import (
	"fmt"
	"slices"
	"testing"
)

// TestPluginSourceLifeCycle: a source plugin created through
// pipeline_transformations/ (no code yet) is reachable through every {id}
// route of that resource, gets its code through update_source, is enabled
// through plugin_configs/ and is deleted through the same resource.
func TestPluginSourceLifeCycle(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"plugin_type":"source","name":"My transformation"}`)
	id := fmt.Sprint(p["id"]) + "/"
	if got := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), ""); got["name"] != "My transformation" {
		t.Fatalf("retrieve: %v", got)
	}
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 0 {
		t.Fatalf("source before code: %v", src)
	}
	if ids := pluginIDs(t, e.ok(200, "GET", e.keyA, e.pt(e.orgA, ""), "")["results"]); !slices.Contains(ids, int(p["id"].(float64))) {
		t.Fatalf("not listed: %v", ids)
	}
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"),
		`{"plugin.json":"{\"name\":\"Tagger\",\"config\":[{\"key\":\"tag\"}]}","index.ts":"export function processEvent(event: any, {config}: any) { event.properties.tag = config.tag; return event }"}`)
	got := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id), "")
	if got["name"] != "Tagger" || pluginJSONText(got["capabilities"]) != `{"jobs":[],"methods":["processEvent"],"scheduled_tasks":[]}` {
		t.Fatalf("after update_source: %v", got)
	}
	if src := e.ok(200, "GET", e.keyA, e.pt(e.orgA, id+"source/"), ""); len(src) != 2 {
		t.Fatalf("source: %v", src)
	}
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%v,"enabled":true,"config":{"tag":"x"}}`, p["id"]))
	if c["enabled"] != true {
		t.Fatalf("config: %v", c)
	}
	if unused := e.okList("GET", e.keyA, e.pt(e.orgA, "unused/")); slices.Contains(unused, p["id"]) {
		t.Fatalf("enabled plugin listed unused: %v", unused)
	}
	r := e.call("DELETE", e.keyA, e.pt(e.orgA, id), "")
	if r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, e.call("GET", e.keyA, e.pt(e.orgA, id), ""), 404, "invalid_request", "not_found")
}
