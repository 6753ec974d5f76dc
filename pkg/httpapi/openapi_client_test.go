package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/personhub/personhub/pkg/capture"
)

// TestOpenAPIClient generates a TypeScript client from docs/openapi.json
// with openapi-typescript (types) and openapi-fetch (calls), type-checks
// test/openapi/client.ts against it with tsc, bundles it with esbuild and
// runs it with node against a running API: it lists, retrieves, PATCHes
// and deletes a person and checks each answer (client.ts); this test then
// checks the person is gone.
func TestOpenAPIClient(t *testing.T) {
	dir := clientPackage(t, "openapi", "openapi-typescript")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the generated client needs Node.js 20.20 or newer, then `npm ci --prefix test/openapi`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(what string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out.String())
		}
		return out.String()
	}
	// Generated into test/openapi/gen (ignored by git), where tsc finds
	// openapi-fetch's types.
	run("openapi-typescript", nil, filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"),
		filepath.Join("..", "..", "docs", "openapi.json"), "-o", filepath.Join("gen", "schema.d.ts"))
	run("tsc", nil, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	bundle := filepath.Join(t.TempDir(), "client.mjs")
	res := api.Build(api.BuildOptions{EntryPoints: []string{filepath.Join(dir, "client.ts")}, Bundle: true,
		Platform: api.PlatformNode, Format: api.FormatESModule, Target: api.ES2022, Outfile: bundle, Write: true, LogLevel: api.LogLevelSilent})
	for _, m := range res.Errors {
		t.Errorf("esbuild: %s", m.Text)
	}
	if t.Failed() {
		t.FailNow()
	}

	f := newFullAPI(t, Config{}, capture.Config{})
	f.ingest(f.projectA.ID, `{"event":"$pageview","distinct_id":"client-1","$set":{"email":"client@acme.io","plan":"pro"}}`)
	f.startIngester()
	out := run("the generated client", []string{
		"PERSONHUB_API_URL=" + f.url,
		"PERSONHUB_PROJECT_ID=" + fmt.Sprint(f.projectA.ID),
		"PERSONHUB_PERSONAL_KEY=" + f.keyAll,
		"PERSONHUB_DISTINCT_ID=client-1",
	}, bundle)
	if !strings.Contains(out, "openapi client: ok") {
		t.Fatalf("the client did not finish:\n%s", out)
	}
	m := f.get(f.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=client-1", f.projectA.ID)).json(t)
	if m["count"].(float64) != 0 {
		t.Fatalf("the person the client deleted is still listed: %v", m)
	}
}
