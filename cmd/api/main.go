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

	"github.com/personhub/personhub/cmd/internal/appconfig"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/process"
)

func main() {
	appconfig.Main("api",
		appconfig.Command{Name: "run", Run: run},
		appconfig.Command{Name: "admin", Run: admin})
}

// options are the settings of `api run`.
type options struct {
	common     appconfig.Common
	plugins    plugin.Settings
	server     httpapi.Settings
	addr       string
	publicURL  string
	writeWait  time.Duration
	consumer   string
	partitions int
	geoipDB    string
}

// parse reads flags, with environment variables as their defaults, and
// refuses malformed or invalid values naming them.
func parse(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("api run", flag.ContinueOnError)
	o.common.Bind(fs)
	fs.StringVar(&o.addr, "addr", appconfig.Env("API_ADDR", "127.0.0.1:8000"), "listen address (env API_ADDR)")
	fs.StringVar(&o.publicURL, "public-url", appconfig.Env("API_PUBLIC_URL", ""), "base of absolute URLs in responses; default: from the request (env API_PUBLIC_URL)")
	appconfig.BindAPIServer(fs, &o.common.Env, &o.server)
	appconfig.BindPlugins(fs, &o.plugins)
	appconfig.BindGeoIP(fs, &o.geoipDB)
	fs.DurationVar(&o.writeWait, "write-wait", o.common.Env.Duration("API_WRITE_WAIT", 5*time.Second), "how long a person write waits to be visible before answering 202 (env API_WRITE_WAIT)")
	fs.IntVar(&o.partitions, "partitions", o.common.Env.Int("INGEST_PARTITIONS", 1), "partitions of the events stream, as the ingesters are given; a write waits on its project's partition (env INGEST_PARTITIONS)")
	fs.StringVar(&o.consumer, "ingester-consumer", appconfig.Env("INGESTER_CONSUMER", "ingester"), "the ingester whose progress writes wait on (env INGESTER_CONSUMER)")
	writeWait := func() error {
		if o.writeWait >= o.server.WriteTimeout {
			return fmt.Errorf("write-wait %v must be below write-timeout %v", o.writeWait, o.server.WriteTimeout)
		}
		return nil
	}
	if err := appconfig.Parse(fs, args, o.common.Validate, o.server.Validate, writeWait); err != nil {
		return nil, err
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	common, plugins, server := &o.common, &o.plugins, &o.server
	log := common.Logger("api")
	ctx, stop := appconfig.SignalContext()
	defer stop()
	// Dry runs of transformations (plugin_configs/{id}/test/) read the
	// ingester's database; unmapped after the server stops.
	geo, err := appconfig.OpenGeoIP(o.geoipDB, log)
	if err != nil {
		return err
	}
	defer geo.Close()

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
	api, err := process.NewAPI(ctx, process.APIConfig{
		Store: store, NC: nc, JS: js, Keys: keys, Log: log, Reg: reg,
		Server: *server, Plugins: *plugins, PublicURL: o.publicURL, Consumer: o.consumer, Partitions: o.partitions, WriteWait: o.writeWait, GeoIP: geo,
	})
	if err != nil {
		return err
	}
	defer api.Close()
	stopOps, err := process.OpsServer(server.MetricsAddr, reg, api.Ready, log)
	if err != nil {
		return err
	}
	defer stopOps()
	srv := server.Server(o.addr, api.Handler())
	log.Info("api listening", "addr", o.addr, "metrics", server.MetricsAddr, "clickhouse_version", store.ServerVersion().String())
	// Serve returns after in-flight requests finish; the deferred closes
	// then release the key watchers and connections.
	if err := appconfig.Serve(ctx, srv, log); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
