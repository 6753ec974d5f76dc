package plugin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin"
)

func TestParseManifest(t *testing.T) {
	m, err := plugin.ParseManifest([]byte(`{"name":" Drop ","description":"d","main":"./src/index.ts","config":[{"key":"a","secret":true}],"publicJobs":{"j":{}}}`))
	if err != nil || m.Name != "Drop" || *m.Description != "d" || m.Main != "src/index.ts" || string(m.Config) != `[{"key":"a","secret":true}]` || string(m.PublicJobs) != `{"j":{}}` {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{`{`, `[]`, `null`, `{"name":5}`, `{"main":"../x.js"}`, `{"main":"/etc/x"}`, `{"config":"x"}`, `{"publicJobs":[1]}`, `{} {}`} {
		if _, err := plugin.ParseManifest([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestDecodePluginInput(t *testing.T) {
	in, err := plugin.DecodePluginInput([]byte(`{"plugin_type":"source","name":"x","description":null,"is_global":false,"capabilities":{"methods":["processEvent","processEvent"]},"id":9,"latest_tag":"v","config_schema":[{"key":"k"}]}`))
	if err != nil || !in.Type.Set || in.Name.Value != "x" || !in.Description.Set || in.Description.Value != nil ||
		!in.IsGlobal.Set || len(in.Capabilities.Value.Methods) != 1 || !in.ConfigSchema.Set {
		t.Fatalf("%+v %v", in, err)
	}
	for body, attr := range map[string]string{
		`{"plugin_type":"nope"}`:                      "plugin_type",
		`{"name":""}`:                                 "name",
		`{"name":5}`:                                  "name",
		`{"is_global":"yes"}`:                         "is_global",
		`{"capabilities":{"methods":"x"}}`:            "capabilities",
		`{"capabilities":{"other":[]}}`:               "capabilities",
		`{"config_schema":"x"}`:                       "config_schema",
		`{"config_schema":[1]}`:                       "config_schema",
		`{"metrics":[]}`:                              "metrics",
		`{"name":"` + strings.Repeat("n", 500) + `"}`: "name",
	} {
		_, err := plugin.DecodePluginInput([]byte(body))
		e, ok := err.(*plugin.Error)
		if !ok || e.Kind != plugin.KindInvalid || e.Attr != attr {
			t.Errorf("%s: %v", body, err)
		}
	}
	if _, err := plugin.DecodePluginInput([]byte(`[1]`)); err == nil {
		t.Error("array body accepted")
	}
}

func TestSecretMask(t *testing.T) {
	c := plugin.Config{Config: map[string]any{"token": "s3cret", "url": "u", "empty": ""}}
	for _, schema := range []string{`[{"key":"token","secret":true},{"key":"empty","secret":true}]`, `{"token":{"secret":true},"empty":{"secret":true}}`} {
		m := c.Masked(json.RawMessage(schema))
		if m.Config["token"] != plugin.SecretMask || m.Config["url"] != "u" || m.Config["empty"] != "" || c.Config["token"] != "s3cret" {
			t.Fatalf("%s: %v", schema, m.Config)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add(`{"name":"x","config":[{"key":"a"}],"main":"index.ts"}`)
	f.Add(`{"config":{"a":{"secret":true}},"publicJobs":{}}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := plugin.ParseManifest([]byte(s))
		if err != nil {
			return
		}
		if m.Main != "" && !plugin.ValidFileName(m.Main) && (strings.HasPrefix(m.Main, "/") || strings.Contains(m.Main, "..")) {
			t.Fatalf("unsafe main %q", m.Main)
		}
		if m.Config != nil && !json.Valid(m.Config) {
			t.Fatalf("config %q", m.Config)
		}
		_ = plugin.SecretKeys(m.Config)
	})
}

func FuzzDecodeInputs(f *testing.F) {
	f.Add(`{"plugin_type":"source","name":"x","capabilities":{"methods":["processEvent"]}}`)
	f.Add(`{"plugin":1,"enabled":true,"order":3,"config":{"a":null}}`)
	f.Add(`{"index.ts":"export {}","frontend.tsx":null}`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, decode := range []func([]byte) error{
			func(b []byte) error { _, err := plugin.DecodePluginInput(b); return err },
			func(b []byte) error { _, err := plugin.DecodeConfigInput(b); return err },
			func(b []byte) error { _, err := plugin.DecodeSourceInput(b); return err },
		} {
			if err := decode([]byte(s)); err != nil {
				if _, ok := err.(*plugin.Error); !ok {
					t.Fatalf("%q: error %T is not a *plugin.Error", s, err)
				}
			}
		}
	})
}
