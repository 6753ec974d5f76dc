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
		m := c.Masked(&plugin.Plugin{ConfigSchema: json.RawMessage(schema)})
		if m.Config["token"] != plugin.SecretMask || m.Config["url"] != "u" || m.Config["empty"] != "" || c.Config["token"] != "s3cret" {
			t.Fatalf("%s: %v", schema, m.Config)
		}
	}
}

// Masking fails closed: an unknown plugin (nil: unreadable or gone) or a
// schema that cannot be read (stored before schemas were checked) masks
// every value; keys recorded secret with the config or ever secret in the
// plugin's schema stay masked whatever the schema says now.
func TestSecretMaskFailsClosed(t *testing.T) {
	c := plugin.Config{Config: map[string]any{"token": "s3cret", "url": "u", "n": 5, "empty": ""}}
	all := func(m plugin.Config) bool {
		return m.Config["token"] == plugin.SecretMask && m.Config["url"] == plugin.SecretMask && m.Config["n"] == plugin.SecretMask && m.Config["empty"] == ""
	}
	if m := c.Masked(nil); !all(m) {
		t.Fatalf("nil plugin: %v", m.Config)
	}
	for _, schema := range []string{
		`[{"key":"token","secret":true},{"key":"url","secret":"no"}]`,
		`[{"key":"token","secret":true},{"key":5}]`,
		`{"token":{"secret":true},"url":"plain"}`,
		`"x"`, `[1]`,
	} {
		if m := c.Masked(&plugin.Plugin{ConfigSchema: json.RawMessage(schema)}); !all(m) {
			t.Errorf("%s: %v", schema, m.Config)
		}
	}
	plain := json.RawMessage(`[{"key":"token"},{"key":"url"}]`)
	recorded := c
	recorded.SecretKeys = []string{"token"}
	if m := recorded.Masked(&plugin.Plugin{ConfigSchema: plain}); m.Config["token"] != plugin.SecretMask || m.Config["url"] != "u" {
		t.Fatalf("recorded secret: %v", m.Config)
	}
	if m := c.Masked(&plugin.Plugin{ConfigSchema: plain, SecretKeys: []string{"url"}}); m.Config["url"] != plugin.SecretMask || m.Config["token"] != "s3cret" {
		t.Fatalf("ever secret: %v", m.Config)
	}
}

func TestParseSchema(t *testing.T) {
	for schema, secret := range map[string]string{
		``:     "",
		`null`: "",
		`{}`:   "",
		`[]`:   "",
		`[{"markdown":"## About"},{"key":"a","name":"A","type":"choice","choices":["x"],"default":"x","required":true,"hint":null,"order":1},{"key":"b","secret":true},{"key":"c","secret":false}]`: "b",
		`{"a":{"secret":true,"name":"A"},"b":{"key":"b","required":false}}`: "a",
	} {
		keys, err := plugin.ParseSchema(json.RawMessage(schema))
		if err != nil || len(keys) != len(strings.Fields(secret)) || (secret != "" && !keys[secret]) {
			t.Errorf("%s: %v %v", schema, keys, err)
		}
	}
	for _, bad := range []string{
		`[{"key":"apiKey","secret":true},{"key":"other","secret":"no"}]`,
		`[{"key":"apiKey","secret":true},{"key":5}]`,
		`{"apiKey":{"secret":true},"other":"plain"}`,
		`[{"key":"a","secret":null}]`, `[{"key":"a","secret":1}]`, `[{"key":""}]`, `[{"name":"no key"}]`,
		`[{"markdown":"x","secret":true}]`, `[1]`, `[[]]`, `[null]`, `"x"`, `5`, `{"a":null}`,
		`{"a":{"key":"b"}}`, `[{"key":"a","required":"yes"}]`, `[{"key":"a","name":5}]`, `[{"key":"a","order":"1"}]`,
		`[{"key":"` + strings.Repeat("k", 201) + `"}]`,
	} {
		if _, err := plugin.ParseSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
		body := `{"config_schema":` + bad + `}`
		if _, err := plugin.DecodePluginInput([]byte(body)); !isInvalid(err, "config_schema") {
			t.Errorf("%s: %v", body, err)
		}
		if _, err := plugin.ParseManifest([]byte(`{"config":` + bad + `}`)); err == nil {
			t.Errorf("plugin.json config %s accepted", bad)
		}
	}
}

func isInvalid(err error, attr string) bool {
	e, ok := err.(*plugin.Error)
	return ok && e.Kind == plugin.KindInvalid && e.Attr == attr
}

// A body or plugin.json is exactly one JSON value: json.Decoder.More
// alone lets a stray '}' or ']' through.
func TestTrailingGarbage(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"plugin": func(b []byte) error { _, err := plugin.DecodePluginInput(b); return err },
		"config": func(b []byte) error { _, err := plugin.DecodeConfigInput(b); return err },
		"source": func(b []byte) error { _, err := plugin.DecodeSourceInput(b); return err },
		"manifest": func(b []byte) error {
			_, err := plugin.ParseManifest(b)
			return err
		},
	}
	for name, decode := range decoders {
		if err := decode([]byte(" {\"name\":\"x\"} \n")); err != nil {
			t.Errorf("%s: white space refused: %v", name, err)
		}
		for _, tail := range []string{"}", "]", "}]", "{}", " x", "null", `"s"`} {
			if err := decode([]byte(`{"name":"x"}` + tail)); err == nil {
				t.Errorf("%s: trailing %q accepted", name, tail)
			}
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
		_, _ = plugin.ParseSchema(m.Config)
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
