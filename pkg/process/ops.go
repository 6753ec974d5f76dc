package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds the ready check a scrape of personhub_ready runs.
const readyTimeout = 2 * time.Second

// OpsServer serves /metrics, /healthz and /readyz (ready reports whether
// the backing services answer) on addr. /metrics adds personhub_ready,
// the ready check run at each scrape, so that an alert rule sees a
// backend down without probing /readyz. It binds before returning, so a
// taken port is an error at start; stop shuts it down and waits.
func OpsServer(addr string, gatherer prometheus.Gatherer, ready func(context.Context) error, log *slog.Logger) (stop func(), err error) {
	own := prometheus.NewRegistry()
	own.MustRegister(ReadyGauge(ready))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{gatherer, own}, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "err", err)
		}
	}, nil
}

// ReadyGauge is personhub_ready: 1 when ready answers nil within
// readyTimeout, else 0, evaluated when the metric is gathered.
func ReadyGauge(ready func(context.Context) error) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "personhub_ready",
		Help: "1 when NATS and ClickHouse answer the process (its /readyz), 0 when not; checked at each scrape."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
			defer cancel()
			if ready(ctx) != nil {
				return 0
			}
			return 1
		})
}

// Readiness is the ready check of a process on NATS and ClickHouse: NATS
// connected (not reconnecting) and ClickHouse answering ping.
func Readiness(nc *nats.Conn, ping func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return ping(ctx)
	}
}
