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

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/progress"
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
	js, store, closeConns, err := conns.open(ctx, "bench-api", 0)
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
	handler, closeAPI, err := benchAPI(ctx, js, store, cp, log, reg, *consumer)
	if err != nil {
		return err
	}
	defer closeAPI()
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	opsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
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

// benchAPI wires the API as cmd/internal/apiserver does for what the
// bench reads and writes (persons, person writes, actions, cohorts, the
// analysis routes); plugins and capture are measured elsewhere.
func benchAPI(ctx context.Context, js jetstream.JetStream, store *chstore.Store, cp *controlplane.Store, log *slog.Logger, reg *prometheus.Registry, consumer string) (http.Handler, func(), error) {
	api, err := httpapi.New(httpapi.Config{}, store, cp, log, reg, store.Ping)
	if err != nil {
		return nil, nil, err
	}
	kv, err := progress.Open(ctx, js)
	if err != nil {
		return nil, nil, err
	}
	parts, err := progress.WatchPartitions(ctx, kv, consumer, 1)
	if err != nil {
		return nil, nil, err
	}
	api.SetPersonWrites(httpapi.PersonWrites{JS: js, Progress: parts, Activity: activity.New(store.Conn())})
	actions, err := action.Open(ctx, js)
	if err != nil {
		parts.Stop()
		return nil, nil, err
	}
	api.SetActions(actions)
	insights := insight.New(store.Conn(), actions)
	cohorts, err := cohort.Open(ctx, js, store.Conn(), insights)
	if err != nil {
		parts.Stop()
		return nil, nil, err
	}
	api.SetCohorts(cohorts)
	api.SetInsights(insights)
	return api.Handler(), func() { cohorts.Close(); parts.Stop() }, nil
}
