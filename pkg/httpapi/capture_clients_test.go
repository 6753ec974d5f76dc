package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/posthog/posthog-go"

	"github.com/personhub/personhub/pkg/capture"
)

// The public client libraries, unchanged but for their host, send events
// that become persons. Node.js and browser libraries come from npm
// (test/node, test/browser: `npm ci --prefix test/node` and
// `npm ci --prefix test/browser`, which .ci/run and `make test` do).

// TestCaptureGoClient drives posthog-go (from the module proxy).
func TestCaptureGoClient(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	c.startIngester()
	cb := &goClientCallback{t: t}
	client, err := posthog.NewWithConfig(c.projectA.APIToken, posthog.Config{Endpoint: c.captureURL, Callback: cb, Logger: cb})
	if err != nil {
		t.Fatal(err)
	}
	run := uuid.NewString()[:8]
	anon, user, device := "go-anon-"+run, "go-"+run+"@example.com", "go-device-"+run
	set := func(kv ...any) posthog.Properties {
		p := posthog.NewProperties()
		for i := 0; i < len(kv); i += 2 {
			p.Set(kv[i].(string), kv[i+1])
		}
		return p
	}
	for _, m := range []posthog.Message{
		// An anonymous visitor with properties of its own.
		posthog.Capture{DistinctId: anon, Event: "$pageview", Properties: set("$current_url", "https://shop.example/pricing", "$set_once", map[string]any{"first_page": "/pricing"})},
		posthog.Capture{DistinctId: anon, Event: "$set", Properties: set("$set", map[string]any{"theme": "dark"})},
		// Signs up: identified, then the anonymous id aliased to it.
		posthog.Identify{DistinctId: user, Properties: set("email", user, "plan", "free")},
		posthog.Alias{DistinctId: user, Alias: anon},
		// A second device, merged with $identify's $anon_distinct_id.
		posthog.Capture{DistinctId: device, Event: "$pageview", Properties: set("$set_once", map[string]any{"first_device": "phone"})},
		posthog.Capture{DistinctId: user, Event: "$identify", Properties: set("$anon_distinct_id", device, "$set", map[string]any{"plan": "pro"})},
	} {
		if err := client.Enqueue(m); err != nil {
			t.Fatal(err)
		}
	}
	flags, err := client.GetAllFlags(posthog.FeatureFlagPayloadNoKey{DistinctId: user})
	if err != nil || len(flags) != 0 {
		t.Fatalf("GetAllFlags: %v %v", flags, err)
	}
	if err := client.Close(); err != nil { // flushes
		t.Fatal(err)
	}
	t.Logf("requests:\n%s", c.seen)
	if sent, failed := cb.counts(); sent != 6 || failed != 0 {
		t.Fatalf("client: %d sent, %d failed\n%s", sent, failed, c.seen)
	}

	p := c.waitPerson(user, func(p map[string]any) bool {
		pr := personProps(p)
		return personHasIDs(p, anon, user, device) && pr["plan"] == "pro" && pr["first_page"] == "/pricing" && pr["first_device"] == "phone"
	})
	pr := personProps(p)
	if pr["email"] != user || pr["theme"] != "dark" || p["is_identified"] != true || len(p["distinct_ids"].([]any)) != 3 {
		t.Fatalf("person: %v", p)
	}
	for _, id := range []string{anon, device} {
		if _, q := c.personPath(id); q["id"] != p["id"] {
			t.Fatalf("%s belongs to %v, not %v", id, q["id"], p["id"])
		}
	}
}

// goClientCallback counts what posthog-go reports sent and failed, and
// sends its logs to the test's.
type goClientCallback struct {
	t            *testing.T
	mu           sync.Mutex
	sent, failed int
}

func (g *goClientCallback) Success(posthog.APIMessage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent++
}

func (g *goClientCallback) Failure(_ posthog.APIMessage, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failed++
	g.t.Logf("posthog-go failure: %v", err)
}

func (g *goClientCallback) Logf(format string, args ...any) {
	g.t.Logf("posthog-go: "+format, args...)
}

func (g *goClientCallback) Errorf(format string, args ...any) {
	g.t.Logf("posthog-go error: "+format, args...)
}

func (g *goClientCallback) counts() (sent, failed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent, g.failed
}

// TestCaptureNodeClient runs test/node (posthog-node, with node's own test
// runner) against this API; the node test reads the persons back.
func TestCaptureNodeClient(t *testing.T) {
	dir := clientPackage(t, "node", "posthog-node")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the posthog-node test needs Node.js 20.20 or newer (apt-get install nodejs npm), then `npm ci --prefix test/node`")
	}
	c := newCaptureEnv(t, capture.Config{})
	c.startIngester()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", dir+string(filepath.Separator))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PERSONHUB_API_URL="+c.captureURL,
		"PERSONHUB_PROJECT_ID="+fmt.Sprint(c.projectA.ID),
		"PERSONHUB_PROJECT_TOKEN="+c.projectA.APIToken,
		"PERSONHUB_PERSONAL_KEY="+c.keyAll,
		"PERSONHUB_RUN="+uuid.NewString()[:8],
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node --test %s:\n%s", dir, out.String())
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s\ncapture requests:\n%s", err, out.String(), c.seen)
	}
	// The runner's summary: at least one test ran, none failed.
	if !strings.Contains(out.String(), "# fail 0") || strings.Contains(out.String(), "# pass 0") {
		t.Fatalf("node ran no test or a test failed:\n%s", out.String())
	}
	t.Logf("requests:\n%s", c.seen)
	if failed := c.seen.failed(); len(failed) > 0 {
		t.Fatalf("posthog-node requests failed:\n%s", strings.Join(failed, "\n"))
	}
}

// clientPackage returns test/<name> and fails, saying what to run, when
// the npm package is not installed there.
func clientPackage(t *testing.T, name, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		t.Fatalf("%s is not installed in test/%s: run `npm ci --prefix test/%s` (make test and .ci/run do)", pkg, name, name)
	}
	return dir
}
