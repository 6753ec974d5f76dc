package process_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/process"
	"github.com/personhub/personhub/pkg/testenv"
)

// Readiness fails while ClickHouse does not answer its ping, and once NATS
// is gone.
func TestReadinessFollowsNATSAndClickHouse(t *testing.T) {
	n := testenv.StartNATS(t, "")
	var pingErr error
	ready := process.Readiness(n.Conn, func(context.Context) error { return pingErr })
	ctx := context.Background()
	if err := ready(ctx); err != nil {
		t.Fatalf("ready with both up: %v", err)
	}
	pingErr = errors.New("clickhouse down")
	if err := ready(ctx); !errors.Is(err, pingErr) {
		t.Fatalf("ready with ClickHouse down: %v, want its ping's error", err)
	}
	pingErr = nil
	n.Server.Shutdown()
	testenv.WaitFor(t, 10*time.Second, "not ready with NATS down", func() (bool, error) {
		err := ready(ctx)
		return err != nil && strings.HasPrefix(err.Error(), "nats "), nil
	})
}

// The ops server binds at start (a taken port is an error then) and serves
// /metrics from the gatherer, /healthz, and /readyz from the ready check.
func TestOpsServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ops_test_total", Help: "a test counter"})
	reg.MustRegister(c)
	c.Add(3)
	notReady := errors.New("backing service down")
	if _, err := process.OpsServer(addr, reg, nil, log); err == nil {
		t.Fatal("ops server started on a taken port")
	}
	ln.Close()
	var down atomic.Bool
	down.Store(true)
	stop, err := process.OpsServer(addr, reg, func(context.Context) error {
		if down.Load() {
			return notReady
		}
		return nil
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "backing service down") {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "ops_test_total 3") || !strings.Contains(body, "\npersonhub_ready 0\n") {
		t.Errorf("/metrics: %d %q", code, body)
	}
	down.Store(false)
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\npersonhub_ready 1\n") {
		t.Errorf("/metrics when ready: personhub_ready is not 1:\n%s", body)
	}
}
