package httpapi

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenAPILint lints docs/openapi.json with Redocly CLI (test/openapi,
// its recommended rules as redocly.yaml at the repository's root sets
// them): an independent reading of the document, from another ecosystem
// than the Go library that builds and validates it. Errors fail the test;
// warnings are logged.
func TestOpenAPILint(t *testing.T) {
	dir := clientPackage(t, "openapi", "@redocly/cli")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the OpenAPI lint needs Node.js 20.20 or newer, then `npm ci --prefix test/openapi`")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", "@redocly", "cli", "bin", "cli.js"),
		"lint", "--config", filepath.Join(root, "redocly.yaml"), "--format", "stylish", filepath.Join(root, "docs", "openapi.json"))
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("redocly lint:\n%s", out.String())
	if err != nil || strings.Contains(out.String(), " error ") {
		t.Fatalf("redocly lint found errors in docs/openapi.json (%v)", err)
	}
	if !strings.Contains(out.String(), "validated in") {
		t.Fatal("redocly lint did not validate docs/openapi.json")
	}
}
