// Package code analyses and transpiles plugin code with esbuild (its Go
// API, in process): the names a module exports, which decide a plugin's
// capabilities, and the transpiled form of frontend.tsx and site.ts.
package code

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/evanw/esbuild/pkg/api"
)

// SyntaxError is code esbuild could not parse; Message lists each problem
// as "file:line:column: text".
type SyntaxError struct{ Message string }

func (e *SyntaxError) Error() string { return e.Message }

func loaderFor(filename string) api.Loader {
	switch path.Ext(filename) {
	case ".ts", ".mts", ".cts":
		return api.LoaderTS
	case ".tsx":
		return api.LoaderTSX
	case ".jsx":
		return api.LoaderJSX
	default:
		return api.LoaderJS
	}
}

func syntaxError(filename string, msgs []api.Message) error {
	lines := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.Location != nil {
			lines = append(lines, fmt.Sprintf("%s:%d:%d: %s", filename, m.Location.Line, m.Location.Column, m.Text))
		} else {
			lines = append(lines, filename+": "+m.Text)
		}
	}
	return &SyntaxError{Message: strings.Join(lines, "\n")}
}

type metafile struct {
	Inputs  map[string]struct{ Format string } `json:"inputs"`
	Outputs map[string]struct {
		Exports []string `json:"exports"`
	} `json:"outputs"`
}

// Exports returns the sorted names a module exports. ES modules are read
// by esbuild's parser (export function/const/async function, export { a
// as b }, re-exports of local names); a CommonJS module (exports.x = …,
// module.exports = { a, b }) is read by patterns, as esbuild reports only
// "default" for it. Type-only exports are not names.
func Exports(filename, src string) ([]string, error) {
	r := api.Build(api.BuildOptions{
		Stdin:    &api.StdinOptions{Contents: src, Loader: loaderFor(filename), Sourcefile: filename},
		Format:   api.FormatESModule,
		Metafile: true,
		Write:    false,
		Bundle:   false,
		LogLevel: api.LogLevelSilent,
	})
	if len(r.Errors) > 0 {
		return nil, syntaxError(filename, r.Errors)
	}
	var m metafile
	if err := json.Unmarshal([]byte(r.Metafile), &m); err != nil {
		return nil, fmt.Errorf("code: esbuild metafile: %w", err)
	}
	cjs := false
	for _, in := range m.Inputs {
		cjs = cjs || in.Format == "cjs"
	}
	var names []string
	if cjs {
		names = commonJSExports(src)
	} else {
		for _, out := range m.Outputs {
			names = append(names, out.Exports...)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

var (
	cjsAssignRe = regexp.MustCompile(`(?m)(?:^|[^.\w$])(?:module\.)?exports\.([A-Za-z_$][\w$]*)\s*=`)
	cjsObjectRe = regexp.MustCompile(`module\.exports\s*=\s*\{`)
	// esbuild's CommonJS output (a bundle: esbuild --bundle
	// --format=cjs) names the exports in __export(target, { name: () => …
	// }) and assigns module.exports = __toCommonJS(target).
	cjsEsbuildRe = regexp.MustCompile(`(?:^|[^\w$])__export\(\s*[A-Za-z_$][\w$]*\s*,\s*\{`)
	identRe      = regexp.MustCompile(`^[A-Za-z_$][\w$]*`)
)

// commonJSExports finds exports.x = …, the top-level keys of
// module.exports = { … } (shorthand, key: value, and method forms), and
// those of esbuild's __export(target, { … }).
func commonJSExports(src string) []string {
	var names []string
	for _, m := range cjsAssignRe.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	for _, loc := range cjsObjectRe.FindAllStringIndex(src, -1) {
		names = append(names, objectKeys(src[loc[1]:])...)
	}
	for _, loc := range cjsEsbuildRe.FindAllStringIndex(src, -1) {
		names = append(names, objectKeys(src[loc[1]:])...)
	}
	return names
}

// objectKeys reads the keys at depth 0 of an object literal body (after
// its "{") up to the matching "}". Strings, comments and nesting are
// skipped; it is a scanner, not a parser, and gives up quietly on odd code.
func objectKeys(s string) []string {
	var keys []string
	depth, expectKey := 0, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j
			} else {
				return keys
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return keys
			}
			i += j + 3
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
			expectKey = false
		case c == '{' || c == '(' || c == '[':
			depth++
			expectKey = false
		case c == '}' || c == ')' || c == ']':
			if depth == 0 {
				return keys
			}
			depth--
		case c == ',' && depth == 0:
			expectKey = true
		case depth == 0 && expectKey && (c == '_' || c == '$' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'):
			id := identRe.FindString(s[i:])
			if id == "async" || id == "get" || id == "set" {
				rest := strings.TrimLeft(s[i+len(id):], " \t\r\n")
				if next := identRe.FindString(rest); next != "" {
					i = len(s) - len(rest) + len(next) - 1
					keys = append(keys, next)
					expectKey = false
					continue
				}
			}
			keys = append(keys, id)
			i += len(id) - 1
			expectKey = false
		}
	}
	return keys
}

// Transpile turns TypeScript/JSX into CommonJS JavaScript for browsers
// (ES2019; JSX as React.createElement).
func Transpile(filename, src string) (string, error) {
	r := api.Transform(src, api.TransformOptions{
		Loader:     loaderFor(filename),
		Format:     api.FormatCommonJS,
		Target:     api.ES2019,
		Sourcefile: filename,
		LogLevel:   api.LogLevelSilent,
	})
	if len(r.Errors) > 0 {
		return "", syntaxError(filename, r.Errors)
	}
	return string(r.Code), nil
}

// Capabilities are what a plugin can do, derived from its exports.
type Capabilities struct {
	Methods        []string `json:"methods"`
	ScheduledTasks []string `json:"scheduled_tasks"`
	Jobs           []string `json:"jobs"`
}

var (
	methodNames    = []string{"composeWebhook", "getSettings", "onEvent", "processEvent", "processEventBatch", "setupPlugin", "teardownPlugin"}
	scheduledNames = []string{"runEveryDay", "runEveryHour", "runEveryMinute"}
)

// CapabilitiesOf sorts exported names into methods and scheduled tasks;
// other names are ignored. Jobs are not derived (set them by PATCH).
func CapabilitiesOf(exports []string) Capabilities {
	c := Capabilities{Methods: []string{}, ScheduledTasks: []string{}, Jobs: []string{}}
	for _, n := range exports {
		switch {
		case slices.Contains(methodNames, n):
			c.Methods = append(c.Methods, n)
		case slices.Contains(scheduledNames, n):
			c.ScheduledTasks = append(c.ScheduledTasks, n)
		}
	}
	return c
}

// RuntimeModules are the modules a transformation's require() (or import)
// gets from the runtime (pkg/transform provides each): PostHog's plugin
// VM gives a transformation these of Node's and its own.
var RuntimeModules = []string{"@posthog/plugin-scaffold", "buffer", "crypto", "url"}

// Imports returns the sorted module names the code imports or requires
// by a literal name (import ... from 'x', require('x'), import('x')), as
// esbuild resolves them; relative paths are included as written.
func Imports(filename, src string) ([]string, error) {
	var names []string
	var mu sync.Mutex // esbuild may resolve in parallel
	collect := api.Plugin{Name: "imports", Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			if a.Kind != api.ResolveEntryPoint {
				mu.Lock()
				names = append(names, a.Path)
				mu.Unlock()
			}
			return api.OnResolveResult{Path: a.Path, External: true}, nil
		})
	}}
	r := api.Build(api.BuildOptions{
		Stdin:    &api.StdinOptions{Contents: src, Loader: loaderFor(filename), Sourcefile: filename},
		Bundle:   true,
		Write:    false,
		Format:   api.FormatCommonJS,
		Platform: api.PlatformNeutral,
		Plugins:  []api.Plugin{collect},
		LogLevel: api.LogLevelSilent,
	})
	if len(r.Errors) > 0 {
		return nil, syntaxError(filename, r.Errors)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Unprovided returns the imports that are not RuntimeModules: a
// transformation runs as one file, with no module of its own or from npm
// beside what the runtime gives (a bundle includes its dependencies).
// "node:" names count as their bare names.
func Unprovided(imports []string) []string {
	var out []string
	for _, name := range imports {
		if !slices.Contains(RuntimeModules, strings.TrimPrefix(name, "node:")) {
			out = append(out, name)
		}
	}
	return out
}
