// Command deleter executes the queued deletions of deleted persons' events
// (person_deletion_requests, written by the ingester) with ClickHouse
// mutations, and verifies them.
//
//	deleter [run]     run on the schedule (UTC) until SIGINT/SIGTERM
//	deleter run-now   one run now; prints a summary, exits 1 if a request failed
//
// Configuration: flags, with environment variables as defaults; see
// docs/operations.md or `deleter run -h`.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/personhub/personhub/cmd/internal/appconfig"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/process"
)

func main() {
	appconfig.Main("deleter",
		appconfig.Command{Name: "run", Run: run},
		appconfig.Command{Name: "run-now", Run: runNow})
}

// options are the settings of both commands.
type options struct {
	common      appconfig.Common
	cfg         deletion.Config
	metricsAddr string
}

func parse(name string, args []string, withServer bool) (*options, error) {
	o := &options{cfg: deletion.DefaultConfig()}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o.common.Bind(fs)
	env := &o.common.Env
	fs.IntVar(&o.cfg.BatchSize, "batch-size", env.Int("DELETER_BATCH_SIZE", o.cfg.BatchSize), "most persons per mutation (env DELETER_BATCH_SIZE)")
	fs.DurationVar(&o.cfg.MutationTimeout, "mutation-timeout", env.Duration("DELETER_MUTATION_TIMEOUT", o.cfg.MutationTimeout), "longest wait for one mutation; its requests then fail for this run (env DELETER_MUTATION_TIMEOUT)")
	fs.IntVar(&o.cfg.Partitions, "partitions", env.Int("INGEST_PARTITIONS", o.cfg.Partitions), "partitions of the events stream, as the ingesters are given: a request waits for its project's partition to commit it (env INGEST_PARTITIONS)")
	fs.StringVar(&o.cfg.Consumer, "ingester-consumer", appconfig.Env("INGESTER_CONSUMER", o.cfg.Consumer), "the ingesters' consumer name (env INGESTER_CONSUMER)")
	if withServer {
		// os.LookupEnv, not appconfig.Env: an empty DELETER_SCHEDULE
		// disables the schedule rather than meaning the default.
		if v, ok := os.LookupEnv("DELETER_SCHEDULE"); ok {
			o.cfg.Schedule = v
		}
		fs.StringVar(&o.cfg.Schedule, "schedule", o.cfg.Schedule, "cron spec (5 fields or a descriptor such as @weekly), always UTC; empty disables scheduled runs (env DELETER_SCHEDULE)")
		fs.StringVar(&o.metricsAddr, "metrics-addr", appconfig.Env("DELETER_METRICS_ADDR", "127.0.0.1:9102"), "address of /metrics, /healthz and /readyz (env DELETER_METRICS_ADDR)")
	} else {
		o.cfg.Schedule = ""
	}
	if err := appconfig.Parse(fs, args, o.common.Validate, o.cfg.Validate); err != nil {
		return nil, err
	}
	return o, nil
}

func run(args []string) error {
	o, err := parse("deleter run", args, true)
	if err != nil {
		return err
	}
	log := o.common.Logger("deleter")
	ctx, stop := appconfig.SignalContext()
	defer stop()

	store, err := o.common.CurrentClickHouse(ctx)
	if err != nil {
		return err
	}
	defer store.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deleter, err := process.NewDeleter(process.DeleterConfig{Deletion: o.cfg, Store: store, Log: log, Reg: reg})
	if err != nil {
		return err
	}
	// Order of shutdown: the scheduler stops starting runs and the run in
	// progress stops after its current statement (Schedule returns), then
	// the metrics server stops, then the ClickHouse connections close.
	stopOps, err := process.OpsServer(o.metricsAddr, reg, store.Ping, log)
	if err != nil {
		return err
	}
	log.Info("deleter starting", "clickhouse", o.common.ClickHouseAddr, "database", o.common.ClickHouseDatabase,
		"clickhouse_version", store.ServerVersion().String(), "metrics", o.metricsAddr, "batch_size", o.cfg.BatchSize, "mutation_timeout", o.cfg.MutationTimeout)
	schedErr := deleter.Run(ctx)
	stopOps()
	return schedErr
}

func runNow(args []string) error {
	o, err := parse("deleter run-now", args, false)
	if err != nil {
		return err
	}
	log := o.common.Logger("deleter")
	// SIGINT/SIGTERM stop the run after its current statement.
	ctx, stop := appconfig.SignalContext()
	defer stop()
	store, err := o.common.CurrentClickHouse(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	deleter, err := process.NewDeleter(process.DeleterConfig{Deletion: o.cfg, Store: store, Log: log, Reg: prometheus.NewRegistry()})
	if err != nil {
		return err
	}
	sum, err := deleter.RunOnce(ctx)
	if err != nil {
		return err
	}
	printSummary(os.Stdout, sum)
	switch {
	case sum.Interrupted:
		return errors.New("interrupted: unfinished requests are left for the next run")
	case sum.Failed > 0:
		return fmt.Errorf("%d requests failed; they stay pending (see the log)", sum.Failed)
	}
	return nil
}

func printSummary(w io.Writer, s deletion.Summary) {
	fmt.Fprintf(w, "requests taken %d, verified %d, failed %d, events deleted %d\n", s.Taken, s.Verified, s.Failed, s.EventsDeleted)
	if s.Left > 0 || s.Waiting > 0 || s.Mutations > 0 {
		fmt.Fprintf(w, "mutations %d, not finished %d, waiting for the ingester's commit %d\n", s.Mutations, s.Left, s.Waiting)
	}
}
