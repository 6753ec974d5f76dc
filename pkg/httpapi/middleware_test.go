package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/testenv"
)

// bareAPI is an API without backing services, for the middleware.
func bareAPI(t *testing.T, cfg Config) (*API, *testenv.LockedBuffer) {
	t.Helper()
	logs := &testenv.LockedBuffer{}
	a, err := New(cfg, Deps{Log: slog.New(slog.NewTextHandler(logs, nil)), Reg: prometheus.NewRegistry(),
		Ready: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return a, logs
}

func TestPanicIsLoggedAndAnsweredWithoutDroppingTheConnection(t *testing.T) {
	a, logs := bareAPI(t, Config{})
	mux := http.NewServeMux()
	// Registered only here, through the chain every real route takes.
	mux.Handle("/panic", a.chain(route{Methods: []string{"GET"}, Path: "/panic", Public: true,
		handler: func(http.ResponseWriter, *http.Request) error {
			var m map[string]int
			m["boom"]++ // a nil map write: a real runtime panic
			return nil
		}}))
	mux.Handle("/", a.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) *http.Request {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		return req
	}
	res := rawRequests(t, srv.Listener.Addr().String(), get("/panic"), get("/healthz"), get("/panic"))
	for _, i := range []int{0, 2} {
		body, _ := io.ReadAll(res[i].Body)
		wantError(t, response{status: res[i].StatusCode, body: body}, 500, "server_error", "error")
	}
	if res[1].StatusCode != 200 {
		t.Fatalf("after a panic, on the same connection: %d", res[1].StatusCode)
	}
	out := logs.String()
	if !strings.Contains(out, "handler panic") || !strings.Contains(out, "assignment to entry in nil map") || !strings.Contains(out, "middleware_test.go") {
		t.Fatalf("panic not logged with its stack:\n%s", out)
	}
}

func TestMetricsAreNotOnTheAPIPort(t *testing.T) {
	a, _ := bareAPI(t, Config{})
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	wantError(t, request(t, "GET", srv.URL+"/metrics", "", ""), 404, "invalid_request", "not_found")
}

// TestUnavailableIs503WithRetryAfter: every "cannot answer now" error of
// the backends, however wrapped, is a 503 with Retry-After; a client that
// went away is neither a 500 nor logged as one.
func TestUnavailableIs503WithRetryAfter(t *testing.T) {
	a, logs := bareAPI(t, Config{})
	for _, cause := range []error{
		statement.ErrUnavailable, nats.ErrNoResponders, nats.ErrTimeout, nats.ErrConnectionClosed,
		jetstream.ErrNoStreamResponse, context.DeadlineExceeded, errBodyBusy,
		&Error{Status: 503, Type: "server_error", Code: "unavailable", Detail: "x"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/x", nil)
		a.writeError(rec, req, fmt.Errorf("list persons: %w", cause))
		if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%v: %d, Retry-After %q", cause, rec.Code, rec.Header().Get("Retry-After"))
		}
		wantError(t, response{status: rec.Code, body: rec.Body.Bytes()}, 503, "server_error", "unavailable")
	}
	rec := httptest.NewRecorder()
	a.writeError(rec, httptest.NewRequest("GET", "/x", nil), throttled(1500*time.Millisecond))
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("throttled: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	// The client went away: the store's error is whatever the cancelled
	// context caused.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec = httptest.NewRecorder()
	a.writeError(rec, httptest.NewRequest("GET", "/x", nil).WithContext(ctx), errors.New("read: connection closed"))
	if rec.Code != 499 {
		t.Fatalf("client gone: %d", rec.Code)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("logged as an error:\n%s", logs)
	}
	// An unknown error stays a logged 500.
	rec = httptest.NewRecorder()
	a.writeError(rec, httptest.NewRequest("GET", "/x", nil), errors.New("a bug"))
	if rec.Code != 500 || !strings.Contains(logs.String(), "a bug") {
		t.Fatalf("unknown error: %d", rec.Code)
	}
}
