// Command api serves the HTTP interface.
//
//	api [run]          serve until SIGINT/SIGTERM
//	api admin ...      manage organizations, projects and personal API keys
//
// Configuration: flags, with environment variables as defaults; see
// docs/operations.md or `api run -h`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/appconfig"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/progress"
)

func main() {
	appconfig.Main("api",
		appconfig.Command{Name: "run", Run: run},
		appconfig.Command{Name: "admin", Run: admin})
}

func run(args []string) error {
	var common appconfig.Common
	fs := flag.NewFlagSet("api run", flag.ContinueOnError)
	common.Bind(fs)
	addr := fs.String("addr", appconfig.Env("API_ADDR", "127.0.0.1:8000"), "listen address (env API_ADDR)")
	publicURL := fs.String("public-url", appconfig.Env("API_PUBLIC_URL", ""), "base of absolute URLs in responses; default: from the request (env API_PUBLIC_URL)")
	var server httpapi.Settings
	server.Bind(fs)
	var plugins plugin.Settings
	plugins.Bind(fs)
	writeWait := fs.Duration("write-wait", appconfig.EnvDuration("API_WRITE_WAIT", 5*time.Second), "how long a person write waits to be visible before answering 202 (env API_WRITE_WAIT)")
	consumer := fs.String("ingester-consumer", appconfig.Env("INGESTER_CONSUMER", "ingester"), "the ingester whose progress writes wait on (env INGESTER_CONSUMER)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := errors.Join(common.Validate(), server.Validate()); err != nil {
		return err
	}
	if *writeWait >= server.WriteTimeout {
		return fmt.Errorf("write-wait %v must be below write-timeout %v", *writeWait, server.WriteTimeout)
	}
	log := common.Logger("api")
	ctx, stop := appconfig.SignalContext()
	defer stop()

	store, err := common.CurrentClickHouse(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	nc, js, err := common.NATS("api")
	if err != nil {
		return err
	}
	defer nc.Close()
	keys, err := controlplane.Open(ctx, js, log)
	if err != nil {
		return err
	}
	defer keys.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ready := appconfig.Readiness(nc, store.Ping)
	api, err := httpapi.New(server.Apply(httpapi.Config{PublicURL: *publicURL}), store, keys, log, reg, ready)
	if err != nil {
		return err
	}
	kv, err := progress.Open(ctx, js)
	if err != nil {
		return err
	}
	watcher, err := progress.Watch(ctx, kv, *consumer)
	if err != nil {
		return err
	}
	defer watcher.Stop()
	api.SetPersonWrites(httpapi.PersonWrites{JS: js, Progress: watcher, Activity: activity.New(store.Conn()), Wait: *writeWait})
	// Plugins: KV buckets, object store and event stream on the same
	// JetStream; closed with the NATS connection.
	pluginService, err := plugins.Open(ctx, js, keys, store.Conn(), log, reg)
	if err != nil {
		return err
	}
	api.SetPlugins(pluginService)
	// Capture for the client libraries (docs/capture.md), publishing on
	// the same NATS connection.
	capturePublisher, err := capture.NewPublisher(capture.Config{}, js, keys, log, reg)
	if err != nil {
		return err
	}
	api.SetCapture(capturePublisher)
	stopOps, err := appconfig.OpsServer(server.MetricsAddr, reg, ready, log)
	if err != nil {
		return err
	}
	defer stopOps()
	srv := server.Server(*addr, api.Handler())
	log.Info("api listening", "addr", *addr, "metrics", server.MetricsAddr)
	// Serve returns after in-flight requests finish; the deferred closes
	// then release the key watchers and connections.
	if err := appconfig.Serve(ctx, srv, log); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
