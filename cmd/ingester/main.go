// Command ingester folds events from JetStream into ClickHouse person
// tables.
//
//	ingester [run]                     consume until SIGINT/SIGTERM
//	ingester migrate                   apply pending ClickHouse migrations
//	ingester publish -project N FILE   publish a JSON-lines file of events
//
// Configuration: flags, with environment variables as defaults; see
// docs/operations.md or `ingester run -h`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personhub/personhub/cmd/internal/appconfig"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/process"
	"github.com/personhub/personhub/pkg/stream"
)

func main() {
	appconfig.Main("ingester",
		appconfig.Command{Name: "run", Run: run},
		appconfig.Command{Name: "migrate", Run: migrate},
		appconfig.Command{Name: "publish", Run: publish})
}

// runOptions are the settings of `ingester run`.
type runOptions struct {
	common appconfig.Common
	// cfg is every partition's configuration but cfg.Partition;
	// partitions are the ones this process runs.
	cfg            ingest.Config
	partitions     []int
	metricsAddr    string
	memoryLimitMiB int
	nice           int
	geoipDB        string
	// ackWait is read and ignored: the consumer acknowledges nothing
	// (AckNone). Kept so command lines that set it still start.
	ackWait time.Duration
}

// parseRun reads flags, with environment variables as their defaults, and
// refuses malformed or invalid values naming them.
func parseRun(args []string) (*runOptions, error) {
	o := &runOptions{cfg: ingest.DefaultConfig()}
	env := &o.common.Env
	fs := flag.NewFlagSet("ingester run", flag.ContinueOnError)
	o.common.Bind(fs)
	fs.StringVar(&o.metricsAddr, "metrics-addr", appconfig.Env("INGESTER_METRICS_ADDR", "127.0.0.1:9101"), "address of /metrics, /healthz and /readyz (env INGESTER_METRICS_ADDR)")
	fs.StringVar(&o.cfg.Consumer, "consumer", appconfig.Env("INGESTER_CONSUMER", o.cfg.Consumer), "durable consumer name (env INGESTER_CONSUMER)")
	fs.IntVar(&o.cfg.BatchSize, "batch-size", env.Int("INGESTER_BATCH_SIZE", o.cfg.BatchSize), "most messages per batch (env INGESTER_BATCH_SIZE)")
	fs.DurationVar(&o.cfg.BatchWait, "batch-wait", env.Duration("INGESTER_BATCH_WAIT", o.cfg.BatchWait), "longest wait for a batch to fill (env INGESTER_BATCH_WAIT)")
	fs.DurationVar(&o.cfg.GrowFor, "grow-for", env.Duration("INGESTER_GROW_FOR", o.cfg.GrowFor), "longest a full batch grows while the stream holds more behind it, writing its persons once at its end ; 0: batches end at -batch-size (env INGESTER_GROW_FOR)")
	fs.IntVar(&o.cfg.GrowPersons, "grow-persons", env.Int("INGESTER_GROW_PERSONS", o.cfg.GrowPersons), "a grown batch ends at this many changed persons (held in memory, properties decoded); 0: no bound (env INGESTER_GROW_PERSONS)")
	fs.IntVar(&o.cfg.MaxCachedPersons, "max-cached-persons", env.Int("INGESTER_MAX_CACHED_PERSONS", o.cfg.MaxCachedPersons), "persons kept in memory between batches (env INGESTER_MAX_CACHED_PERSONS)")
	fs.IntVar(&o.cfg.DenseMisses, "dense-misses", env.Int("INGESTER_DENSE_MISSES", o.cfg.DenseMisses), "misses of one project's distinct ids in one fold step that make the fold read the project whole, once, when it fits in the room -max-cached-persons leaves; -1: never (env INGESTER_DENSE_MISSES)")
	fs.DurationVar(&o.ackWait, "ack-wait", env.Duration("INGESTER_ACK_WAIT", 0), "ignored: the consumer acknowledges nothing, the commit marker is the progress (docs/operations.md); kept so existing command lines start (env INGESTER_ACK_WAIT)")
	fs.DurationVar(&o.cfg.StallWait, "stall-wait", env.Duration("INGESTER_STALL_WAIT", o.cfg.StallWait), "how long to wait for a message the stream says is there before recreating the consumer (env INGESTER_STALL_WAIT)")
	fs.DurationVar(&o.cfg.ShutdownGrace, "shutdown-grace", env.Duration("INGESTER_SHUTDOWN_GRACE", o.cfg.ShutdownGrace), "on SIGINT/SIGTERM, how long the batch in hand may still take to commit; after it the batch is left unacknowledged for the next start (env INGESTER_SHUTDOWN_GRACE)")
	fs.IntVar(&o.memoryLimitMiB, "memory-limit-mib", env.Int("INGESTER_MEMORY_LIMIT_MIB", process.IngesterMemoryLimitMiB), "Go soft memory limit in MiB unless GOMEMLIMIT is set; 0 for none (env INGESTER_MEMORY_LIMIT_MIB)")
	fs.BoolVar(&o.cfg.WriteLane, "write-lane", env.Bool("INGESTER_WRITE_LANE", o.cfg.WriteLane), "fold the API's person writes ahead of the capture backlog, recording where in the log (docs/events.md, \"The write lane\"); on by default; -write-lane=false folds them in log order, and records already in the log are followed either way (env INGESTER_WRITE_LANE)")
	fs.IntVar(&o.nice, "nice", env.Int("INGESTER_NICE", process.IngesterNice), "CPU niceness of the process, 0..19: above 0 the ingester yields the cores to ClickHouse and the API when they share a host, so a user's read is not slowed by a backlog (docs/operations.md, \"CPU priority\"); 0 leaves it as started (env INGESTER_NICE)")
	bindStreams(fs, &o.cfg.Streams, env)
	appconfig.BindGeoIP(fs, &o.geoipDB)
	legacy := fs.Int("legacy-commands-until", env.Int("INGESTER_LEGACY_COMMANDS_UNTIL", 0), "honour commands found on events.<project> up to this stream sequence, for rebuilding from a log written before commands had their own subject; 0: none (env INGESTER_LEGACY_COMMANDS_UNTIL)")
	fs.DurationVar(&o.cfg.LeaseTTL, "lease-ttl", env.Duration("INGESTER_LEASE_TTL", o.cfg.LeaseTTL), "how long a consumer's lease outlives a crashed ingester, when the lease bucket is created (env INGESTER_LEASE_TTL)")
	run := fs.String("partition", appconfig.Env("INGESTER_PARTITION", "all"), "partitions of the stream this process folds, comma-separated (e.g. 0,2), or all (env INGESTER_PARTITION)")
	fs.IntVar(&o.cfg.MaxPersonBytes, "max-person-bytes", env.Int("INGESTER_MAX_PERSON_BYTES", o.cfg.MaxPersonBytes), "most bytes of a person's properties (JSON); larger changes are refused with a warning; 0: no bound (env INGESTER_MAX_PERSON_BYTES)")
	legacyValid := func() error {
		if *legacy < 0 {
			return errors.New("-legacy-commands-until must not be negative")
		}
		o.cfg.LegacyCommandsUntil = uint64(*legacy)
		return nil
	}
	partitionsValid := func() (err error) {
		o.partitions, err = parsePartitions(*run, max(o.cfg.Streams.Partitions, 1))
		return err
	}
	niceValid := func() error { return process.ValidateNice("nice", o.nice) }
	if err := appconfig.Parse(fs, args, o.common.Validate, legacyValid, partitionsValid, niceValid, o.cfg.Validate); err != nil {
		return nil, err
	}
	return o, nil
}

func run(args []string) error {
	o, err := parseRun(args)
	if err != nil {
		return err
	}
	// First, so that every thread the process starts later inherits it.
	if err := process.SetNice(o.nice); err != nil {
		return err
	}
	log := o.common.Logger("ingester")
	process.TuneGC(log, o.memoryLimitMiB)
	ctx, stop := appconfig.SignalContext()
	defer stop()
	// Opened first: a database that cannot be read stops the start at
	// once. Unmapped after the ingesters stop (Run has returned).
	geo, err := appconfig.OpenGeoIP(o.geoipDB, log)
	if err != nil {
		return err
	}
	defer geo.Close()

	// ClickHouse runs the ingester's statements at its niceness too, where
	// it can (chstore.Config.ThreadNice).
	o.common.ClickHouseThreadNice = o.nice
	store, err := o.common.CurrentClickHouse(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	nc, js, err := o.common.NATS("ingester")
	if err != nil {
		return err
	}
	defer nc.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ing, err := process.NewIngester(ctx, process.IngesterConfig{Ingest: o.cfg, Partitions: o.partitions, JS: js, Store: store, Log: log, Reg: reg, GeoIP: geo})
	if err != nil {
		return err
	}
	// Order of shutdown: the consumer stops pulling and commits its batch
	// (Run returns), then the metrics server stops, then connections close.
	stopOps, err := process.OpsServer(o.metricsAddr, reg, func(ctx context.Context) error {
		if !nc.IsConnected() {
			return errors.New("nats disconnected")
		}
		return store.Ping(ctx)
	}, log)
	if err != nil {
		return err
	}
	log.Info("ingester starting", "nats", redacted(o.common.NATSURL), "clickhouse", o.common.ClickHouseAddr, "database", o.common.ClickHouseDatabase, "clickhouse_version", store.ServerVersion().String(), "metrics", o.metricsAddr, "nice", o.nice, "clickhouse_thread_nice", store.ThreadNice())
	runErr := ing.Run(ctx)
	stopOps()
	return runErr
}

// parseMigrate reads `ingester migrate`'s flags and environment.
func parseMigrate(args []string) (appconfig.Common, error) {
	var common appconfig.Common
	fs := flag.NewFlagSet("ingester migrate", flag.ContinueOnError)
	common.Bind(fs)
	fs.DurationVar(&common.MigrationTimeout, "statement-timeout", common.Env.Duration("MIGRATE_STATEMENT_TIMEOUT", chstore.DefaultMigrationTimeout),
		"longest one migration statement may run; a backfill reads every stored event once (env MIGRATE_STATEMENT_TIMEOUT)")
	if err := fs.Parse(args); err != nil {
		return common, err
	}
	if err := common.Validate(); err != nil {
		return common, err
	}
	if common.MigrationTimeout <= 0 {
		return common, fmt.Errorf("statement-timeout %s: want a positive duration", common.MigrationTimeout)
	}
	return common, nil
}

func migrate(args []string) error {
	common, err := parseMigrate(args)
	if err != nil {
		return err
	}
	// No deadline on the whole: each statement has its own, and SIGINT or
	// SIGTERM stops the statement in hand (a migration can run again).
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	store, err := common.ClickHouse(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	ran, err := store.Migrate(ctx)
	for _, m := range ran {
		fmt.Printf("applied %s\n", m.Name)
	}
	if err == nil && len(ran) == 0 {
		fmt.Printf("database %s is up to date\n", common.ClickHouseDatabase)
	}
	return err
}

func publish(args []string) error {
	var common appconfig.Common
	fs := flag.NewFlagSet("ingester publish", flag.ContinueOnError)
	common.Bind(fs)
	project := fs.Uint64("project", 0, "project id the events belong to (required)")
	window := fs.Int("window", 1000, "most unacknowledged publishes in flight")
	var streams stream.Config
	bindStreams(fs, &streams, &common.Env)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ingester publish -project N [FILE|-]\n\nPublishes one event envelope per line (docs/events.md); uuid and timestamp are filled in when missing.")
		fs.PrintDefaults()
	}
	// Not appconfig.Parse: publish takes a file argument.
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := errors.Join(common.Validate(), streams.Validate()); err != nil {
		return err
	}
	if *project == 0 {
		fs.Usage()
		return errors.New("-project is required")
	}
	in := io.Reader(os.Stdin)
	if name := fs.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	nc, js, err := common.NATS("ingester-publish")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, stop := appconfig.SignalContext()
	defer stop()
	// A publisher binds the stream as it is: the ingesters partition it.
	streams.Partitions = 0
	if err := stream.Ensure(ctx, js, streams); err != nil {
		return err
	}
	n, err := command.PublishLines(ctx, js, *project, in, *window)
	fmt.Printf("published %d events to %s\n", n, stream.Subject(*project))
	return err
}

// bindStreams binds the settings the streams and the progress bucket are
// created with when missing (run and publish create them). Existing ones
// are used as they are: change those with the nats CLI.
func bindStreams(fs *flag.FlagSet, c *stream.Config, env *appconfig.EnvReader) {
	fs.IntVar(&c.Replicas, "stream-replicas", env.Int("INGESTER_STREAM_REPLICAS", 1), "replicas of the streams and the progress bucket, when created (env INGESTER_STREAM_REPLICAS)")
	fs.DurationVar(&c.DuplicateWindow, "stream-duplicate-window", env.Duration("INGESTER_STREAM_DUPLICATE_WINDOW", 10*time.Minute), "Nats-Msg-Id dedupe window of the events stream, when created (env INGESTER_STREAM_DUPLICATE_WINDOW)")
	fs.Int64Var(&c.MaxBytes, "stream-max-bytes", int64(env.Int("INGESTER_STREAM_MAX_BYTES", 0)), "byte limit of the events stream, when created; a full stream refuses publishes; 0: no limit (env INGESTER_STREAM_MAX_BYTES)")
	fs.StringVar(&c.Compression, "stream-compression", appconfig.Env("INGESTER_STREAM_COMPRESSION", "none"), "compression of the events stream's file store, when created: s2 or none; an existing stream keeps its own (env INGESTER_STREAM_COMPRESSION)")
	fs.IntVar(&c.Partitions, "partitions", env.Int("INGEST_PARTITIONS", 1), "partitions of the events stream by project, one consumer each; every ingester, api and deleter must be given the same (env INGEST_PARTITIONS)")
	fs.DurationVar(&c.DeadLetterMaxAge, "dlq-max-age", env.Duration("INGESTER_DLQ_MAX_AGE", 30*24*time.Hour), "how long dead letters are kept, when the dead-letter stream is created (env INGESTER_DLQ_MAX_AGE)")
}

// redacted is a NATS URL with its password hidden, for logs.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
