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
