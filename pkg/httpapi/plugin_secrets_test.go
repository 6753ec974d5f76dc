package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

// Schemas with an element that is not a well-formed field (each of these
// once unmasked every secret of the plugin's configs).
var oddSchemas = []string{
	`[{"key":"apiKey","secret":true},{"key":"other","secret":"no"}]`,
	`[{"key":"apiKey","secret":true},{"key":5}]`,
	`{"apiKey":{"secret":true},"other":"plain"}`,
	`[{"key":"apiKey","secret":null}]`,
}

// A schema element that is not a well-formed field is refused with 400
// (attr config_schema) wherever a schema enters, and nothing changes.
func TestPluginSchemaRefused(t *testing.T) {
	e := newPluginEnv(t)
	id := fmt.Sprint(e.sourceTransformation(e.keyA, e.orgA, "s")) + "/"
	up := e.install(e.keyA, e.orgA, `{"url":"https://github.com/acme/schemas/tree/v1"}`)
	upID := fmt.Sprint(up["id"]) + "/"
	before := e.stored()
	for _, schema := range oddSchemas {
		e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"source","name":"x","config_schema":`+schema+`}`), 400, "", "config_schema")
		e.wantErr(e.call("PATCH", e.keyAWrite, e.pt(e.orgA, id), `{"config_schema":`+schema+`}`), 400, "", "config_schema")
		manifest, _ := json.Marshal(`{"name":"renamed","config":` + schema + `}`)
		e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, id+"update_source/"), `{"plugin.json":`+string(manifest)+`}`), 400, "", "config_schema")
	}
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"url":"https://github.com/acme/oddschema"}`), 400, "other", "config_schema")
	e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, upID+"upgrade/"), ""), 400, "other", "config_schema")
	e.unchanged(before)
	if p := e.ok(200, "GET", e.keyA, e.pt(e.orgA, upID), ""); p["tag"] != "v1" || p["name"] != "Schemas" {
		t.Fatalf("after a refused upgrade: %v", p)
	}
	// Notes without a key, extra members and the legacy dict are fine.
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id), `{"config_schema":[{"markdown":"## Setup"},{"key":"k","type":"choice","choices":["a"],"secret":false,"required":true,"hint":null}]}`)
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, id), `{"config_schema":{"k":{"secret":true,"name":"K"}}}`)
}

// A value stored as secret stays write-only whatever the schema says
// later: a key with only plugin:write that drops "secret": true (by PATCH
// or through plugin.json) still reads a mask, and so does everyone else.
func TestPluginSecretsStayWriteOnly(t *testing.T) {
	e := newPluginEnv(t)
	p := e.install(e.keyA, e.orgA, `{"plugin_type":"source","name":"s","capabilities":{"methods":["processEvent"]},"config_schema":[{"key":"apiKey","secret":true},{"key":"other"}]}`)
	pid := fmt.Sprint(p["id"])
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+pid+`,"config":{"apiKey":"SECRET","other":"CLEAR"}}`)
	cid := fmt.Sprint(c["id"]) + "/"
	plain := `[{"key":"apiKey"},{"key":"other"}]`
	manifest, _ := json.Marshal(`{"name":"s","config":` + plain + `}`)
	for _, drop := range []func(){
		func() { e.ok(200, "PATCH", e.keyAWrite, e.pt(e.orgA, pid+"/"), `{"config_schema":`+plain+`}`) },
		func() {
			e.ok(200, "PATCH", e.keyAWrite, e.pt(e.orgA, pid+"/update_source/"), `{"plugin.json":`+string(manifest)+`}`)
		},
	} {
		drop()
		if got := e.ok(200, "GET", e.keyA, e.pt(e.orgA, pid+"/"), ""); pluginJSONText(got["config_schema"]) != plain {
			t.Fatalf("schema %v", got["config_schema"])
		}
		for _, path := range []string{cfgs + cid, cfgs} {
			body := string(e.call("GET", e.keyA, path, "").body)
			if strings.Contains(body, "SECRET") || !strings.Contains(body, plugin.SecretMask) || !strings.Contains(body, "CLEAR") {
				t.Fatalf("GET %s: %s", path, body)
			}
		}
	}
	// Written after the schema dropped the flag: still secret.
	got := e.ok(200, "PATCH", e.keyA, cfgs+cid, `{"config":{"apiKey":"SECRET2"}}`)
	if got["config"].(map[string]any)["apiKey"] != plugin.SecretMask {
		t.Fatalf("patched: %v", got)
	}
	c2 := e.ok(201, "POST", e.keyA, cfgs, `{"plugin":`+pid+`,"config":{"apiKey":"SECRET3"}}`)
	if c2["config"].(map[string]any)["apiKey"] != plugin.SecretMask {
		t.Fatalf("new config: %v", c2)
	}
	if body := string(e.call("GET", e.keyA, e.pt(e.orgA, "activity/?limit=100"), "").body); strings.Contains(body, "SECRET") {
		t.Fatalf("activity shows a secret: %s", body)
	}
	if v := e.storedConfig(fmt.Sprint(c["id"]))["apiKey"]; v != "SECRET2" {
		t.Fatalf("stored %v", v)
	}
}

// A plugin record whose schema cannot be read (stored before schemas were
// checked) masks every value of its configs: masking fails closed.
func TestPluginConfigMaskedWhenSchemaUnreadable(t *testing.T) {
	e := newPluginEnv(t)
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	for _, schema := range oddSchemas {
		pid := e.sourceTransformation(e.keyA, e.orgA, "legacy")
		e.setStoredSchema(pid, schema)
		c := e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%d,"config":{"apiKey":"SECRET","other":"CLEAR"}}`, pid))
		for _, body := range []string{pluginJSONText(c), string(e.call("GET", e.keyA, cfgs+fmt.Sprint(c["id"])+"/", "").body), string(e.call("GET", e.keyA, cfgs, "").body)} {
			if strings.Contains(body, "SECRET") || strings.Contains(body, "CLEAR") {
				t.Fatalf("%s: %s", schema, body)
			}
		}
	}
}

// setStoredSchema writes a config_schema straight into a plugin record,
// as a record stored before schemas were checked would hold it.
func (e *pluginEnv) setStoredSchema(id int, schema string) {
	e.t.Helper()
	ctx := context.Background()
	kv, err := e.nats.JS.KeyValue(ctx, plugin.BucketPlugins)
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := kv.Get(ctx, fmt.Sprint(id))
	if err != nil {
		e.t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		e.t.Fatal(err)
	}
	rec["config_schema"] = json.RawMessage(schema)
	delete(rec, "secret_keys")
	data, _ := json.Marshal(rec)
	if _, err := kv.Update(ctx, fmt.Sprint(id), data, entry.Revision()); err != nil {
		e.t.Fatal(err)
	}
}

// A body is exactly one JSON value: trailing garbage is a 400 and
// nothing changes.
func TestPluginBodiesWithTrailingGarbage(t *testing.T) {
	e := newPluginEnv(t)
	pid := e.sourceTransformation(e.keyA, e.orgA, "s")
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	c := e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%d,"config":{"a":"1"}}`, pid))
	cid := fmt.Sprint(c["id"]) + "/"
	before := e.stored()
	for _, tail := range []string{"}", "]", "}]", `{"name":"y"}`} {
		e.wantErr(e.call("POST", e.keyA, e.pt(e.orgA, ""), `{"plugin_type":"source","name":"x"}`+tail), 400, "", "")
		e.wantErr(e.call("PATCH", e.keyA, e.pt(e.orgA, fmt.Sprint(pid)+"/"), `{"name":"x"}`+tail), 400, "", "")
		e.wantErr(e.call("POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%d}`, pid)+tail), 400, "", "")
		e.wantErr(e.call("PATCH", e.keyA, cfgs+cid, `{"config":{"a":"2"}}`+tail), 400, "", "")
	}
	e.unchanged(before)
}
