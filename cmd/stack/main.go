// Command stack runs the whole service on one machine, in the foreground:
// a private ClickHouse server (or CLICKHOUSE_ADDR), an embedded NATS
// JetStream server, the schema, the ingester and the API. Data lives under
// one folder, so a second start keeps it. It prints the API URL and a
// working personal API key. `make run` runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/cmd/internal/appconfig"
	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/process"
	"github.com/personhub/personhub/pkg/stream"
)

type config struct {
	dir            string
	apiAddr        string
	natsPort       int
	clickhouseAddr string
	chTCPPort      int
	chHTTPPort     int
	database       string
	common         appconfig.Common
	plugins        plugin.Settings
	apiServer      httpapi.Settings
	// writeLane: the ingester's write lane (ingest.Config.WriteLane).
	writeLane bool
	// geoipDB: meta.geoip's database, for the ingester and dry runs alike.
	geoipDB string
}

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// parse reads flags, with environment variables as their defaults, and
// refuses malformed values naming them.
func parse(args []string) (*config, error) {
	cfg := &config{}
	env := &cfg.common.Env
	fs := flag.NewFlagSet("stack", flag.ContinueOnError)
	fs.StringVar(&cfg.dir, "dir", appconfig.Env("STACK_DIR", ".data"), "folder for ClickHouse and NATS data (env STACK_DIR)")
	fs.StringVar(&cfg.apiAddr, "api-addr", appconfig.Env("API_ADDR", "127.0.0.1:8000"), "API listen address (env API_ADDR)")
	fs.IntVar(&cfg.natsPort, "nats-port", env.Int("STACK_NATS_PORT", 4222), "port of the embedded NATS server (env STACK_NATS_PORT)")
	fs.StringVar(&cfg.clickhouseAddr, "clickhouse-addr", appconfig.Env("CLICKHOUSE_ADDR", ""), "use this ClickHouse instead of starting one (env CLICKHOUSE_ADDR)")
	fs.IntVar(&cfg.chTCPPort, "clickhouse-port", env.Int("STACK_CLICKHOUSE_PORT", 19000), "native port of the private ClickHouse (env STACK_CLICKHOUSE_PORT)")
	fs.IntVar(&cfg.chHTTPPort, "clickhouse-http-port", env.Int("STACK_CLICKHOUSE_HTTP_PORT", 18123), "HTTP port of the private ClickHouse (env STACK_CLICKHOUSE_HTTP_PORT)")
	fs.StringVar(&cfg.database, "clickhouse-database", appconfig.Env("CLICKHOUSE_DATABASE", "personhub"), "ClickHouse database (env CLICKHOUSE_DATABASE)")
	fs.StringVar(&cfg.common.LogLevel, "log-level", appconfig.Env("LOG_LEVEL", "info"), "log level (env LOG_LEVEL)")
	fs.BoolVar(&cfg.writeLane, "write-lane", env.Bool("INGESTER_WRITE_LANE", ingest.DefaultConfig().WriteLane), "fold the API's person writes ahead of the capture backlog, recording where in the log (docs/events.md, \"The write lane\"); -write-lane=false folds them in log order (env INGESTER_WRITE_LANE)")
	appconfig.BindAPIServer(fs, env, &cfg.apiServer)
	appconfig.BindPlugins(fs, &cfg.plugins)
	appconfig.BindGeoIP(fs, &cfg.geoipDB)
	cfg.common.LogFormat = "text"
	if err := appconfig.Parse(fs, args, cfg.common.ValidateLogging, cfg.apiServer.Validate); err != nil {
		return nil, err
	}
	return cfg, nil
}

func run() error {
	cfg, err := parse(os.Args[1:])
	if err != nil {
		return err
	}
	plugins, apiServer := &cfg.plugins, &cfg.apiServer
	root := slog.New(cfg.common.Handler())
	log := root.With("component", "stack")
	ctx, stop := appconfig.SignalContext()
	defer stop()
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return err
	}
	// One mapping shared by the ingester and the API's dry runs, unmapped
	// after both stop.
	geo, err := appconfig.OpenGeoIP(cfg.geoipDB, log)
	if err != nil {
		return err
	}
	defer geo.Close()

	// 1. ClickHouse: given, or a private server under dir/clickhouse.
	chAddr := cfg.clickhouseAddr
	if chAddr == "" {
		logFile, err := os.OpenFile(filepath.Join(cfg.dir, "clickhouse.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer logFile.Close()
		log.Info("starting ClickHouse", "dir", filepath.Join(cfg.dir, "clickhouse"), "port", cfg.chTCPPort)
		srv, err := chlocal.Start(ctx, filepath.Join(cfg.dir, "clickhouse"), cfg.chTCPPort, cfg.chHTTPPort, logFile)
		if err != nil {
			return fmt.Errorf("%w (log: %s)", err, logFile.Name())
		}
		// Stopped last, after everything that writes to it.
		defer func() { log.Info("stopping ClickHouse"); srv.Stop() }()
		chAddr = srv.Addr()
	}
	store, err := chstore.Open(ctx, chstore.Config{Addr: chAddr, Database: cfg.database})
	if err != nil {
		return err
	}
	defer store.Close()
	if ran, err := store.Migrate(ctx); err != nil {
		return err
	} else {
		for _, m := range ran {
			log.Info("schema migration applied", "name", m.Name)
		}
	}

	// 2. NATS with JetStream, embedded, store under dir/nats.
	ns, err := server.NewServer(&server.Options{
		ServerName: "personhub-local", Host: "127.0.0.1", Port: cfg.natsPort, JetStream: true,
		StoreDir: filepath.Join(cfg.dir, "nats"), NoSigs: true, NoLog: true,
	})
	if err != nil {
		return err
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		return fmt.Errorf("embedded NATS did not start on port %d (in use?)", cfg.natsPort)
	}
	defer func() { log.Info("stopping NATS"); ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("stack"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		return err
	}
	cp, err := controlplane.Open(ctx, js, root)
	if err != nil {
		return err
	}
	defer cp.Close()
	boot, err := bootstrap(ctx, cp, filepath.Join(cfg.dir, "bootstrap.json"))
	if err != nil {
		return err
	}

	// 3. Ingester and API, each stopping in order on Ctrl-C.
	reg := prometheus.NewRegistry()
	ingCfg := ingest.DefaultConfig()
	ingCfg.WriteLane = cfg.writeLane
	// The ingester has its own connections, as it would in its own
	// process: a flood of reads that fills the API's pool must not hold
	// back the fold, or every write answers 202 until the reads ebb. Its
	// statements ask ClickHouse for the ingester's niceness, as
	// cmd/ingester's do (chstore.Config.ThreadNice; this process itself
	// stays at 0, the API being in it).
	ingStore, err := chstore.Open(ctx, chstore.Config{Addr: chAddr, Database: cfg.database, ThreadNice: process.IngesterNice})
	if err != nil {
		return err
	}
	defer ingStore.Close()
	ing, err := process.NewIngester(ctx, process.IngesterConfig{Ingest: ingCfg, JS: js, Store: ingStore, Log: root.With("component", "ingester"), Reg: reg, GeoIP: geo})
	if err != nil {
		return err
	}
	// Plugins; the local organization may manage global plugins unless
	// PLUGIN_GLOBAL_ORGANIZATIONS says otherwise.
	if plugins.GlobalOrganizations == "" {
		plugins.GlobalOrganizations = boot.OrganizationID
	}
	api, err := process.NewAPI(ctx, process.APIConfig{
		Store: store, NC: nc, JS: js, Keys: cp, Log: root.With("component", "api"), Reg: reg,
		Server: *apiServer, Plugins: *plugins, Consumer: ingest.DefaultConfig().Consumer, GeoIP: geo,
	})
	if err != nil {
		return err
	}
	defer api.Close()
	// /metrics (and health) on the ops address, never on the API's.
	stopOps, err := process.OpsServer(apiServer.MetricsAddr, reg, api.Ready, log)
	if err != nil {
		return err
	}
	defer stopOps()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- ing.Run(ctx) }()
	go func() {
		defer wg.Done()
		err := appconfig.Serve(ctx, apiServer.Server(cfg.apiAddr, api.Handler()), log)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	banner(cfg, boot, ns.ClientURL(), chAddr, apiServer.MetricsAddr)
	var firstErr error
	go func() { wg.Wait(); close(errc) }()
	for err := range errc {
		if err != nil && firstErr == nil {
			firstErr = err
			stop() // one part failed: stop the others
		}
	}
	log.Info("stopped")
	return firstErr
}

func banner(cfg *config, b bootstrapState, natsURL, chAddr, opsAddr string) {
	url := "http://" + cfg.apiAddr
	fmt.Printf(`
  personhub is running (Ctrl-C stops it; data stays in %s)

  API        %s
  API key    %s   (organization %s, scopes *)
  Ops        http://%s   (/metrics, /healthz, /readyz)
  Project    %d   (capture token %s)
  NATS       %s
  ClickHouse %s, database %s
  GeoIP      %s

  Try:
    curl -H "Authorization: Bearer %s" %s/api/projects/%d/persons/
    echo '{"event":"$pageview","distinct_id":"alice","$set":{"email":"alice@example.com"}}' | \
      NATS_URL=%s go run ./cmd/ingester publish -project %d -

`, cfg.dir, url, b.Secret, b.OrganizationID, opsAddr, b.ProjectID, b.ProjectToken, natsURL, chAddr, cfg.database, geoipLine(cfg.geoipDB),
		b.Secret, url, b.ProjectID, natsURL, b.ProjectID)
}

// geoipLine says which database transformations' meta.geoip.locate reads,
// or how to give it one.
func geoipLine(path string) string {
	if path != "" {
		return path + " (meta.geoip.locate)"
	}
	return "none: meta.geoip.locate answers null; GEOIP_DB=/path/to/GeoLite2-City.mmdb make run gives it one"
}
