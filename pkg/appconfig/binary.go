package appconfig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Command is a subcommand of a binary.
type Command struct {
	Name string
	Run  func(args []string) error
}

// Main runs the subcommand named by the first argument (the first command
// when the first argument is a flag or absent) and exits with status 1 on
// error.
func Main(binary string, commands ...Command) {
	args := os.Args[1:]
	name := commands[0].Name
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	err := fmt.Errorf("unknown command %q: want %s", name, names(commands))
	for _, c := range commands {
		if c.Name == name {
			err = c.Run(args)
		}
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", binary, err)
		os.Exit(1)
	}
}

func names(commands []Command) string {
	var out []string
	for _, c := range commands {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}

// OpsServer serves /metrics, /healthz and /readyz (ready reports whether
// the backing services answer) on addr. It binds before returning, so a
// taken port is an error at start; stop shuts it down and waits.
func OpsServer(addr string, gatherer prometheus.Gatherer, ready func(context.Context) error, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
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

// Readiness is the ready check of a binary on NATS and ClickHouse: NATS
// connected (not reconnecting) and ClickHouse answering ping.
func Readiness(nc *nats.Conn, ping func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return ping(ctx)
	}
}
