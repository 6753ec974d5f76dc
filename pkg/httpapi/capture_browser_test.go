//go:build unix

package httpapi

import (
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestCaptureBrowserClient loads posthog-js (test/browser, from npm) in
// headless Chromium, on a page of another origin than the API: an
// anonymous visitor gets properties, then identifies. The persons API must
// show one identified person holding both ids and all the properties, and
// no request of the library may have failed.
func TestCaptureBrowserClient(t *testing.T) {
	dir := clientPackage(t, "browser", "posthog-js")
	chromium := findChromium(t)
	lib, err := os.ReadFile(filepath.Join(dir, "node_modules", "posthog-js", "dist", "array.js"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCaptureEnv(t, capture.Config{})
	c.startIngester()
	user := "browser-" + uuid.NewString()[:8] + "@example.com"

	reports := make(chan browserReport, 4)
	pages := http.NewServeMux()
	pages.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := browserPage.Execute(w, map[string]string{"api": c.captureURL, "token": c.projectA.APIToken, "user": user}); err != nil {
			t.Error(err)
		}
	})
	pages.HandleFunc("/posthog.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/javascript")
		_, _ = w.Write(lib)
	})
	pages.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		var rep browserReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			rep.Error = "report does not decode: " + err.Error()
		}
		select {
		case reports <- rep:
		default:
		}
	})
	site := httptest.NewServer(pages)
	t.Cleanup(site.Close)

	out := startChromium(t, chromium, site.URL+"/")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chromium:\n%s", out)
		}
	})
	var rep browserReport
	select {
	case rep = <-reports:
	case <-time.After(90 * time.Second):
		t.Fatalf("the page never reported\ncapture requests:\n%s", c.seen)
	}
	if rep.Error != "" || len(rep.Errors) > 0 || rep.Anon == "" || rep.User != user {
		t.Fatalf("page: %+v\ncapture requests:\n%s", rep, c.seen)
	}
	if string(rep.Flags) != "{}" {
		t.Fatalf("feature flags seen by posthog-js: %s", rep.Flags)
	}

	p := c.waitPerson(user, func(p map[string]any) bool {
		pr := personProps(p)
		return personHasIDs(p, rep.Anon, user) && pr["email"] == user && pr["first_page"] == "/pricing" && pr["theme"] == "dark"
	})
	pr := personProps(p)
	if p["is_identified"] != true || pr["plan"] != "pro" || pr["signup_browser"] != "chromium" {
		t.Fatalf("person: %v", p)
	}
	if _, q := c.personPath(rep.Anon); q["id"] != p["id"] {
		t.Fatalf("the anonymous id belongs to %v, not %v", q["id"], p["id"])
	}
	t.Logf("requests:\n%s", c.seen)
	if failed := c.seen.failed(); len(failed) > 0 {
		t.Fatalf("posthog-js requests failed:\n%s\nall:\n%s", strings.Join(failed, "\n"), c.seen)
	}
	if !strings.Contains(c.seen.String(), "POST /e/") {
		t.Fatalf("posthog-js sent no events to /e/:\n%s", c.seen)
	}
}

// browserReport is what the page posts back.
type browserReport struct {
	Anon   string          `json:"anon"`
	User   string          `json:"user"`
	Flags  json.RawMessage `json:"flags"`
	Errors []string        `json:"errors"`
	Error  string          `json:"error"`
}

// The page: posthog-js configured for this API, nothing that would call
// elsewhere (autocapture, recordings, surveys), a short flush interval,
// and its filter of headless browsers off.
var browserPage = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>capture</title></head><body>
<script>
  window.pageErrors = [];
  window.addEventListener('error', (e) => window.pageErrors.push(String(e.message)));
  window.addEventListener('unhandledrejection', (e) => window.pageErrors.push(String(e.reason)));
</script>
<script src="/posthog.js"></script>
<script>
  const cfg = { api: {{.api}}, token: {{.token}}, user: {{.user}} };
  const report = (body) => fetch('/report', { method: 'POST', body: JSON.stringify(body) });
  posthog.init(cfg.token, {
    api_host: cfg.api,
    debug: true, // its console, in Chromium's output on failure
    opt_out_useragent_filter: true, // HeadlessChrome is no bot here
    autocapture: false,
    capture_pageview: false,
    capture_pageleave: false,
    disable_session_recording: true,
    disable_surveys: true,
    person_profiles: 'always',
    request_queue_config: { flush_interval_ms: 250 },
    loaded: async (ph) => {
      try {
        const anon = ph.get_distinct_id();
        // The anonymous visitor, with properties of its own.
        ph.capture('$pageview', { $set_once: { first_page: '/pricing' } });
        ph.setPersonProperties({ theme: 'dark' });
        // Signs up.
        ph.identify(cfg.user, { email: cfg.user, plan: 'pro' }, { signup_browser: 'chromium' });
        ph.capture('checkout', { amount: 12.5 });
        const flags = await Promise.race([
          new Promise((resolve) => { ph.onFeatureFlags((f, variants) => resolve(variants || {})); ph.reloadFeatureFlags(); }),
          new Promise((resolve) => setTimeout(() => resolve('no answer from /flags/'), 15000)),
        ]);
        report({ anon, user: ph.get_distinct_id(), flags, errors: window.pageErrors });
      } catch (e) {
        report({ error: String((e && e.stack) || e), errors: window.pageErrors });
      }
    },
  });
</script>
</body></html>
`))

// findChromium returns Debian's chromium, or fails saying how to get it.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatal("chromium is not installed: apt-get install -y chromium (.ci/run and make test do)")
	return ""
}

// startChromium opens url in headless Chromium until the test ends, and
// returns its output (for failure messages).
func startChromium(t *testing.T, chromium, url string) *testenv.LockedBuffer {
	t.Helper()
	profile := t.TempDir()
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--enable-logging=stderr", "--v=0", "--user-data-dir="+profile, url)
	out := &testenv.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so the browser and its helpers stop together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return out
}
