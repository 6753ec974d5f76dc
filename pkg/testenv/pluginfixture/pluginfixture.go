// Package pluginfixture gives the tests and the bench the plugins in the
// shape of PostHog's bundled transformations (test/posthog-plugins), and
// the one file a user uploads for a plugin with npm dependencies: an
// esbuild bundle.
package pluginfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// Dir is the fixtures' folder under the repository root.
const Dir = "test/posthog-plugins"

// UserAgents are user agents of browsers, an app, a bot and a script,
// for the user-agent fixture.
var UserAgents = []string{
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.6045.163 Mobile Safari/537.36 EdgA/119.0.2151.78",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"curl/8.5.0",
}

// Source reads a fixture's file (e.g. "taxonomy.js") under root.
func Source(root, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, Dir, name))
	return string(b), err
}

// Bundle bundles a fixture (e.g. "user-agent.ts") with its npm
// dependencies, resolved from the node_modules folders given (the npm
// registry's packages test/node installs), into one CommonJS file, as
// `esbuild --bundle --format=cjs` writes it for upload.
func Bundle(root, name string, nodeModules ...string) (string, error) {
	r := api.Build(api.BuildOptions{
		EntryPoints: []string{filepath.Join(root, Dir, name)},
		Bundle:      true,
		Format:      api.FormatCommonJS,
		Platform:    api.PlatformNeutral,
		MainFields:  []string{"main", "module"},
		NodePaths:   nodeModules,
		Write:       false,
		LogLevel:    api.LogLevelSilent,
	})
	if len(r.Errors) > 0 || len(r.OutputFiles) != 1 {
		var msgs []string
		for _, m := range r.Errors {
			msgs = append(msgs, m.Text)
		}
		return "", fmt.Errorf("bundle %s: %s", name, strings.Join(msgs, "; "))
	}
	return string(r.OutputFiles[0].Contents), nil
}
