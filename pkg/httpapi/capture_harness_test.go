package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/stream"
)

// captureEnv is env (persons API over real ClickHouse and JetStream) plus
// a second API server with the capture routes enabled, whose requests are
// recorded.
type captureEnv struct {
	*env
	captureURL string
	seen       *requestLog
}

func newCaptureEnv(t *testing.T, cfg capture.Config) *captureEnv {
	t.Helper()
	e := newEnv(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	pub, err := capture.NewPublisher(cfg, e.nats.JS, e.cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{}, Deps{Store: e.store, Keys: e.cp, Log: log, Reg: reg, Ready: e.store.Ping, Capture: pub})
	if err != nil {
		t.Fatal(err)
	}
	seen := &requestLog{}
	srv := httptest.NewServer(seen.wrap(api.Handler()))
	t.Cleanup(srv.Close)
	return &captureEnv{env: e, captureURL: srv.URL, seen: seen}
}

// post sends a body to the capture server.
func (c *captureEnv) post(path string, header http.Header, body string) response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.captureURL+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

// streamCount is how many messages the events stream holds.
func (c *captureEnv) streamCount() uint64 {
	c.t.Helper()
	s, err := c.nats.JS.Stream(context.Background(), stream.Events)
	if err != nil {
		c.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return info.State.Msgs
}

// waitPerson polls the persons API (project A) until the person owning
// distinctID satisfies ok, and returns it; it fails the test after 60 s
// with the last person seen.
func (c *captureEnv) waitPerson(distinctID string, ok func(p map[string]any) bool) map[string]any {
	c.t.Helper()
	var last any
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := c.get(c.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=%s", c.projectA.ID, url.QueryEscape(distinctID)))
		if r.status == 200 {
			m := r.json(c.t)
			last = m
			if res, _ := m["results"].([]any); len(res) == 1 {
				p := res[0].(map[string]any)
				last = p
				if ok(p) {
					return p
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("person with distinct id %q never matched; last seen: %v\ncapture requests:\n%s", distinctID, last, c.seen)
	return nil
}

// personHasIDs reports whether a person's distinct_ids hold every id given.
func personHasIDs(p map[string]any, ids ...string) bool {
	have := map[string]bool{}
	for _, id := range p["distinct_ids"].([]any) {
		have[id.(string)] = true
	}
	for _, id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}

// personProps returns a person's properties.
func personProps(p map[string]any) map[string]any {
	m, _ := p["properties"].(map[string]any)
	return m
}

// requestLog records the method, path and status of every request.
type requestLog struct {
	mu    sync.Mutex
	lines []string
	codes []int
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		kind := "plain"
		if len(body) > 1 && body[0] == 0x1f && body[1] == 0x8b {
			kind = "gzip data"
		}
		sw := &statusWriter{ResponseWriter: w, status: 200}
		next.ServeHTTP(sw, r)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, fmt.Sprintf("%s %s -> %d (Content-Type %q, Content-Encoding %q, %d bytes of %s)", r.Method, r.URL.RequestURI(), sw.status,
			r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"), len(body), kind))
		l.codes = append(l.codes, sw.status)
	})
}

// failed lists the requests answered with a status of 400 or more.
func (l *requestLog) failed() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, c := range l.codes {
		if c >= 400 {
			out = append(out, l.lines[i])
		}
	}
	return out
}

func (l *requestLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "  " + strings.Join(l.lines, "\n  ")
}
