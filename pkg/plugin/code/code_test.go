package code_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin/code"
)

func TestExports(t *testing.T) {
	cases := []struct {
		file, src string
		want      []string
	}{
		{"index.ts", "export function processEvent(e: any) { return e }", []string{"processEvent"}},
		{"index.ts", "export const processEvent = (e) => e", []string{"processEvent"}},
		{"index.ts", "export async function onEvent(e) {}\nexport async function setupPlugin() {}", []string{"onEvent", "setupPlugin"}},
		{"index.js", "function a(e) { return e }\nconst b = 1\nexport { a as processEvent, b }", []string{"b", "processEvent"}},
		{"index.ts", "export type T = string\nexport interface I {}\nexport default {}", []string{"default"}},
		{"index.ts", "import { x } from 'y'\nexport { x as runEveryMinute }", []string{"runEveryMinute"}},
		// Mentions that are not exports.
		{"index.ts", "// export function processEvent() {}\nconst s = 'export function processEvent'", nil},
		{"index.js", "exports.processEvent = function (e) { return e }\nmodule.exports.onEvent = () => {}", []string{"onEvent", "processEvent"}},
		{"index.js", "function p(e) { return e }\nmodule.exports = { processEvent: p, setupPlugin, async onEvent(e) {}, /* x, */ 'str': 1 }", []string{"onEvent", "processEvent", "setupPlugin"}},
		// esbuild --bundle --format=cjs, as it writes a bundle.
		{"index.js", "var __export = (target, all) => { for (var name in all) __defProp(target, name, { get: all[name], enumerable: true }); };\n" +
			"var index_exports = {};\n__export(index_exports, {\n  processEvent: () => processEvent,\n  setupPlugin: () => setupPlugin\n});\n" +
			"module.exports = __toCommonJS(index_exports);\nfunction processEvent(e) { return e }\nfunction setupPlugin() {}", []string{"processEvent", "setupPlugin"}},
	}
	for _, c := range cases {
		got, err := code.Exports(c.file, c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.src, got, c.want)
		}
	}
	_, err := code.Exports("index.ts", "export function (")
	if se, ok := err.(*code.SyntaxError); !ok || !strings.Contains(se.Message, "index.ts:1:") {
		t.Fatalf("syntax error: %v", err)
	}
}

func TestCapabilitiesOf(t *testing.T) {
	c := code.CapabilitiesOf([]string{"default", "onEvent", "processEvent", "runEveryHour", "x"})
	if !slices.Equal(c.Methods, []string{"onEvent", "processEvent"}) || !slices.Equal(c.ScheduledTasks, []string{"runEveryHour"}) || c.Jobs == nil {
		t.Fatalf("%+v", c)
	}
}

func TestTranspile(t *testing.T) {
	out, err := code.Transpile("frontend.tsx", "export const scene = { component: () => <div className=\"x\">hi</div> }")
	if err != nil || !strings.Contains(out, "React.createElement") || strings.Contains(out, "<div") {
		t.Fatalf("tsx: %q %v", out, err)
	}
	out, err = code.Transpile("site.ts", "export function inject({ config }: { config: any }): void { console.log(config) }")
	if err != nil || strings.Contains(out, ": void") || !strings.Contains(out, "inject") {
		t.Fatalf("ts: %q %v", out, err)
	}
	_, err = code.Transpile("site.ts", "export function inject( {")
	if se, ok := err.(*code.SyntaxError); !ok || !strings.HasPrefix(se.Message, "site.ts:1:") {
		t.Fatalf("error: %v", err)
	}
}

func FuzzExports(f *testing.F) {
	for _, s := range []string{
		"export function processEvent(e) { return e }",
		"module.exports = { a, b: 1, async c() {}, get d() {} }",
		"exports.x = 1",
		"module.exports = { 'a': `b${c}`, /* } */ d }",
		"module.exports = {",
		"import { createHash } from 'crypto'\nconst u = require('url'), x = require('left-pad')\nexport const processEvent = (e) => e",
		"require(`x${y}`); import('a')",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		a, errA := code.Exports("index.js", src)
		b, errB := code.Exports("index.js", src)
		if (errA == nil) != (errB == nil) || !slices.Equal(a, b) {
			t.Fatalf("not deterministic: %v %v / %v %v", a, errA, b, errB)
		}
		for _, n := range a {
			if n == "" || strings.ContainsAny(n, " \n\t(){}") {
				t.Fatalf("odd export name %q", n)
			}
		}
		_ = code.CapabilitiesOf(a)
		// The imports, read by the same parser at install time.
		imports, err := code.Imports("index.js", src)
		again, errAgain := code.Imports("index.js", src)
		if (err == nil) != (errAgain == nil) || !slices.Equal(imports, again) {
			t.Fatalf("imports not deterministic: %q %v / %q %v", imports, err, again, errAgain)
		}
		if err == nil {
			for _, n := range code.Unprovided(imports) {
				if !slices.Contains(imports, n) {
					t.Fatalf("unprovided %q is not an import of %v", n, imports)
				}
			}
		}
	})
}
