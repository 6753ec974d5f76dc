package main

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
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/process"
)

// apiChildCommand is the first argument that makes the bench binary run
// as the HTTP API under test, in a process of its own as cmd/api runs it:
// its heap and collections are its own, not those of the bench (the
// embedded NATS server, the dataset, the load generators). In the bench
// process the API's collections marked the bench's ~350 MB heap every
// second or two while the reads ran (most of the property filter's tail).
const apiChildCommand = "api-child"

func apiChildMain(args []string) error {
	fs := flag.NewFlagSet(apiChildCommand, flag.ContinueOnError)
	conns := bindConns(fs)
	consumer := fs.String("consumer", "", "the ingester whose progress person writes wait on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	nc, js, store, closeConns, err := conns.open(ctx, "bench-api", 0)
	if err != nil {
		return err
	}
	defer closeConns()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cp, err := controlplane.Open(ctx, js, log)
	if err != nil {
		return err
	}
	defer cp.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Built as cmd/api builds it, with every route family (person writes
	// and deletions, plugins, actions, cohorts, analysis, capture), and
	// the zero server settings: no rate limit, which the bench's load
	// would hit. The families the bench does not call cost it only their
	// start.
	api, err := process.NewAPI(ctx, process.APIConfig{Store: store, NC: nc, JS: js, Keys: cp, Log: log, Reg: reg,
		Consumer: *consumer, Partitions: 1})
	if err != nil {
		return err
	}
	defer api.Close()
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	opsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(apiLn) }()
	go func() { _ = http.Serve(opsLn, opsMux(reg)) }()
	fmt.Printf("READY %s %s\n", opsLn.Addr(), apiLn.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
