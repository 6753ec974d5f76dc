package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

func TestPluginConfigs(t *testing.T) {
	e := newPluginEnv(t)
	exp := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/exporter"}`)
	pid := fmt.Sprint(exp["id"])
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+pid+`,"enabled":true,"order":2,"config":{"url":"https://hook","token":"s3cret"}}`)
	cid := fmt.Sprint(c["id"])
	for _, k := range []string{"id", "plugin", "enabled", "order", "config", "team_id", "name", "description", "deleted", "created_at", "updated_at"} {
		if _, ok := c[k]; !ok {
			t.Fatalf("config lacks %q: %v", k, c)
		}
	}
	conf := c["config"].(map[string]any)
	if conf["token"] != plugin.SecretMask || conf["url"] != "https://hook" || c["team_id"].(float64) != float64(e.projectA) || c["enabled"] != true {
		t.Fatalf("created: %v", c)
	}
	if strings.Contains(string(e.call("GET", e.keyA, cfgs+cid+"/", "").body), "s3cret") {
		t.Fatal("secret readable")
	}
	// Writing the mask back keeps the stored secret; null removes a key.
	got := e.ok(200, "PATCH", e.keyA, cfgs+cid+"/", `{"config":{"token":"`+plugin.SecretMask+`","url":null,"extra":1},"order":1,"enabled":false}`)
	if got["enabled"] != false || got["order"].(float64) != 1 || len(got["config"].(map[string]any)) != 2 ||
		got["config"].(map[string]any)["extra"] != 1.0 || got["config"].(map[string]any)["token"] != plugin.SecretMask {
		t.Fatalf("patched: %v", got)
	}
	if v := e.storedConfig(cid)["token"]; v != "s3cret" {
		t.Fatalf("stored secret %v", v)
	}
	// Ordering: by order, then id.
	c2 := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+pid+`,"order":0}`)
	if got := pluginIDs(t, e.ok(200, "GET", e.keyA, cfgs, "")["results"]); !slices.Equal(got, []int{int(c2["id"].(float64)), int(c["id"].(float64))}) {
		t.Fatalf("order: %v", got)
	}
	// Another project of the organization, another organization's project.
	if m := e.ok(200, "GET", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA2), ""); m["count"].(float64) != 0 {
		t.Fatalf("a2: %v", m)
	}
	wantError(t, e.call("GET", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/%s/", e.projectA2, cid), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("GET", e.keyB, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("GET", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectB), ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("POST", e.keyARead, cfgs, `{}`), 403, "authentication_error", "permission_denied")
	for body, attr := range map[string]string{
		`{}`:                                   "plugin",
		`{"plugin":"x"}`:                       "plugin",
		`{"plugin":99999}`:                     "plugin",
		`{"plugin":` + pid + `,"enabled":"y"}`: "enabled",
		`{"plugin":` + pid + `,"order":1.5}`:   "order",
		`{"plugin":` + pid + `,"config":[]}`:   "config",
	} {
		e.wantErr(e.call("POST", e.keyA, cfgs, body), 400, "", attr)
	}
	e.wantErr(e.call("PATCH", e.keyA, cfgs+cid+"/", `{"plugin":1}`), 400, "cannot be changed", "plugin")
	e.ok(204, "DELETE", e.keyA, cfgs+cid+"/", "")
	wantError(t, e.call("GET", e.keyA, cfgs+cid+"/", ""), 404, "invalid_request", "not_found")
	wantError(t, e.call("PATCH", e.keyA, cfgs+cid+"/", `{"enabled":true}`), 404, "invalid_request", "not_found")
}

// storedConfig reads a config's values straight from the KV bucket.
func (e *pluginEnv) storedConfig(id string) map[string]any {
	e.t.Helper()
	kv, err := e.nats.JS.KeyValue(context.Background(), plugin.BucketConfigs)
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := kv.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	var c plugin.Config
	if err := json.Unmarshal(entry.Value(), &c); err != nil {
		e.t.Fatal(err)
	}
	return c.Config
}

func TestPluginUnusedAndExportsUnsubscribe(t *testing.T) {
	e := newPluginEnv(t)
	transform := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/dropper"}`)
	exporter := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/exporter"}`)
	site := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/siteapp"}`)
	idle := e.sourceTransformation(e.keyA, e.orgA, "idle")
	disabledOnly := e.sourceTransformation(e.keyA, e.orgA, "disabled only")
	e.sourceTransformation(e.keyB, e.orgB, "b's")
	cfg := func(project uint64, pluginID any, extra string) map[string]any {
		return e.ok(201, "POST", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/", project), fmt.Sprintf(`{"plugin":%v%s}`, pluginID, extra))
	}
	cfg(e.projectA, transform["id"], `,"enabled":true`)
	exp := cfg(e.projectA2, exporter["id"], `,"enabled":true,"config":{"url":"u","token":"s3cret"}`)
	cfg(e.projectA, exporter["id"], `,"enabled":false`)
	cfg(e.projectA, site["id"], `,"enabled":true`)
	cfg(e.projectA, disabledOnly, `,"enabled":false`)
	deleted := cfg(e.projectA, idle, `,"enabled":true`)
	e.ok(204, "DELETE", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/%v/", e.projectA, deleted["id"]), "")

	unused := pluginIDs(t, e.okList("GET", e.keyA, e.pt(e.orgA, "unused/")))
	if !slices.Equal(unused, []int{idle, disabledOnly}) {
		t.Fatalf("unused %v, want [%d %d]", unused, idle, disabledOnly)
	}
	list := e.okList("GET", e.keyA, e.pt(e.orgA, "exports_unsubscribe_configs/"))
	if len(list) != 1 {
		t.Fatalf("exports: %v", list)
	}
	got := list[0].(map[string]any)
	if got["id"] != exp["id"] || got["config"].(map[string]any)["token"] != plugin.SecretMask || got["team_id"].(float64) != float64(e.projectA2) {
		t.Fatalf("export config: %v", got)
	}
	if l := e.okList("GET", e.keyB, e.pt(e.orgB, "exports_unsubscribe_configs/")); len(l) != 0 {
		t.Fatalf("B sees %v", l)
	}
}

func TestPluginActivity(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/dropper/tree/v1"}`)
	id := fmt.Sprint(p["id"]) + "/"
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id), `{"description":"new"}`)
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), `{"extra.ts":"export {}"}`)
	e.ok(200, "POST", e.keyA, e.pt(e.orgA, id+"upgrade/"), "")
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+fmt.Sprint(p["id"])+`,"enabled":true,"config":{"token":"a"}}`)
	e.ok(200, "PATCH", e.keyA, cfgs+fmt.Sprint(c["id"])+"/", `{"enabled":false,"config":{"token":"b"}}`)
	e.ok(204, "DELETE", e.keyA, e.pt(e.orgA, id), "")

	want := []string{"uninstalled", "config_updated", "disabled", "enabled", "upgraded", "source_changed", "updated", "installed"}
	m := e.ok(200, "GET", e.keyA, e.pt(e.orgA, "activity/?limit=100"), "")
	var got []string
	for _, r := range m["results"].([]any) {
		entry := r.(map[string]any)
		got = append(got, entry["activity"].(string))
		if entry["user"].(map[string]any)["first_name"] != "key *" {
			t.Fatalf("user %v", entry["user"])
		}
	}
	slices.Sort(got)
	sortedWant := slices.Clone(want)
	slices.Sort(sortedWant)
	if !slices.Equal(got, sortedWant) || m["total_count"].(float64) != float64(len(want)) {
		t.Fatalf("activities %v, want %v (%v)", got, want, m["total_count"])
	}
	if strings.Contains(string(e.call("GET", e.keyA, e.pt(e.orgA, "activity/?limit=100"), "").body), `"b"`) {
		t.Fatal("secret value in activity")
	}
	for _, r := range m["results"].([]any) {
		entry := r.(map[string]any)
		switch entry["activity"] {
		case "upgraded":
			if !strings.Contains(pluginJSONText(entry["detail"]), `{"action":"changed","after":"v2","before":"v1","field":"tag","type":"Plugin"}`) {
				t.Fatalf("upgrade detail %v", entry["detail"])
			}
		case "enabled", "disabled", "config_updated":
			if entry["scope"] != "PluginConfig" || entry["item_id"] != fmt.Sprint(c["id"]) {
				t.Fatalf("config entry %v", entry)
			}
		default:
			if entry["scope"] != "Plugin" || entry["item_id"] != fmt.Sprint(p["id"]) {
				t.Fatalf("plugin entry %v", entry)
			}
		}
	}
	// limit/page paging.
	page2 := e.ok(200, "GET", e.keyA, e.pt(e.orgA, "activity/?limit=3&page=2"), "")
	if len(page2["results"].([]any)) != 3 || page2["next"] == nil || page2["previous"] == nil {
		t.Fatalf("page 2: %v", page2)
	}
	e.wantErr(e.call("GET", e.keyA, e.pt(e.orgA, "activity/?page=0"), ""), 400, "page", "page")
	if other := e.ok(200, "GET", e.keyB, e.pt(e.orgB, "activity/"), ""); other["total_count"].(float64) != 0 {
		t.Fatalf("B sees %v", other)
	}
}
