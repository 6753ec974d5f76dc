// Package appconfig is the binaries' side of configuration: it binds
// their settings to flags, with environment variables as defaults (flags
// win), refuses malformed values naming them, and turns the settings into
// what the process builders (pkg/process) take: a logger, connections to
// NATS and ClickHouse, a context cancelled by SIGINT or SIGTERM. It is
// internal to cmd/: no package under pkg/ parses flags.
package appconfig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/stream"
)

// Env returns the environment variable or def. A string cannot be
// malformed; settings with a syntax are read through EnvReader, which
// refuses what it cannot parse.
func Env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// EnvReader reads typed environment variables as flag defaults and keeps
// the ones it cannot parse, so that the binary refuses to start naming the
// variable (Err, reported by Common.Validate) rather than quietly running
// on the default: an operator who sets INGESTER_BATCH_SIZE=5k meant
// something. An unset or empty variable means the default.
type EnvReader struct{ errs []error }

// Int returns the variable as an int, or def when it is unset or empty.
func (e *EnvReader) Int(name string, def int) int {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not an integer", name, v))
		return def
	}
	return n
}

// Duration returns the variable as a duration, or def when it is unset or
// empty.
func (e *EnvReader) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not a duration (write it with a unit: 500ms, 5s, 2m)", name, v))
		return def
	}
	return d
}

// Bool returns the variable as a bool (strconv.ParseBool: true, false,
// 1, 0, ...), or def when it is unset or empty.
func (e *EnvReader) Bool(name string, def bool) bool {
	v, ok := e.lookup(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not a bool (true or false)", name, v))
		return def
	}
	return b
}

func (e *EnvReader) lookup(name string) (string, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	return v, v != ""
}

// Err reports every malformed variable read so far, or nil.
func (e *EnvReader) Err() error { return errors.Join(e.errs...) }

// Common holds the settings every binary shares.
type Common struct {
	NATSURL string
	// NATSReplicas: replicas of the KV buckets and object stores a binary
	// creates without a count of their own (stream.Replicated).
	NATSReplicas       int
	ClickHouseAddr     string
	ClickHouseDatabase string
	ClickHouseUser     string
	ClickHousePassword string
	// ClickHouseThreadNice is chstore.Config.ThreadNice: set by a binary
	// (the ingester), not a flag of its own.
	ClickHouseThreadNice int
	// MigrationTimeout is chstore.Config.MigrationTimeout: a flag of
	// `ingester migrate` only (0: the store's default).
	MigrationTimeout time.Duration
	LogLevel         string
	LogFormat        string
	// Env reads the binary's typed variables; Validate reports the
	// malformed ones.
	Env EnvReader
}

// Bind registers the common flags on fs.
func (c *Common) Bind(fs *flag.FlagSet) {
	fs.StringVar(&c.NATSURL, "nats-url", Env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL (env NATS_URL)")
	fs.IntVar(&c.NATSReplicas, "nats-replicas", c.Env.Int("NATS_REPLICAS", 1), "replicas of the KV buckets and object stores created when missing (control plane, actions, cohorts, plugins, transformations); more than 1 needs a JetStream cluster (env NATS_REPLICAS)")
	fs.StringVar(&c.ClickHouseAddr, "clickhouse-addr", Env("CLICKHOUSE_ADDR", "127.0.0.1:9000"), "ClickHouse native protocol host:port (env CLICKHOUSE_ADDR)")
	fs.StringVar(&c.ClickHouseDatabase, "clickhouse-database", Env("CLICKHOUSE_DATABASE", "personhub"), "ClickHouse database (env CLICKHOUSE_DATABASE)")
	fs.StringVar(&c.ClickHouseUser, "clickhouse-user", Env("CLICKHOUSE_USER", "default"), "ClickHouse user (env CLICKHOUSE_USER)")
	fs.StringVar(&c.ClickHousePassword, "clickhouse-password", Env("CLICKHOUSE_PASSWORD", ""), "ClickHouse password (env CLICKHOUSE_PASSWORD)")
	fs.StringVar(&c.LogLevel, "log-level", Env("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", Env("LOG_FORMAT", "text"), "text or json (env LOG_FORMAT)")
}

// Validate checks the common settings.
func (c *Common) Validate() error {
	var errs []error
	if c.NATSURL == "" {
		errs = append(errs, errors.New("nats-url is empty"))
	}
	if c.NATSReplicas < 1 || c.NATSReplicas > 5 {
		errs = append(errs, fmt.Errorf("nats-replicas %d out of range 1..5", c.NATSReplicas))
	}
	if c.ClickHouseAddr == "" {
		errs = append(errs, errors.New("clickhouse-addr is empty"))
	}
	errs = append(errs, c.ValidateLogging())
	return errors.Join(errs...)
}

// ValidateLogging checks the environment and the log settings only, for a
// binary (cmd/stack) that connects to nothing given.
func (c *Common) ValidateLogging() error {
	var errs []error
	errs = append(errs, c.Env.Err())
	if _, err := c.level(); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want text or json", c.LogFormat))
	}
	return errors.Join(errs...)
}

func (c *Common) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return l, fmt.Errorf("log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return l, nil
}

// Logger builds the structured logger.
func (c *Common) Logger(component string) *slog.Logger {
	return slog.New(c.Handler()).With("component", component)
}

// Handler is the log handler (to stderr) Logger uses.
func (c *Common) Handler() slog.Handler {
	lvl, _ := c.level()
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.NewTextHandler(os.Stderr, opts)
}

// ClickHouse opens the store.
func (c *Common) ClickHouse(ctx context.Context) (*chstore.Store, error) {
	return chstore.Open(ctx, chstore.Config{Addr: c.ClickHouseAddr, Database: c.ClickHouseDatabase, Username: c.ClickHouseUser, Password: c.ClickHousePassword,
		ThreadNice: c.ClickHouseThreadNice, MigrationTimeout: c.MigrationTimeout})
}

// CurrentClickHouse opens the store and refuses a database whose schema is
// behind this binary (the error names the command that fixes it).
func (c *Common) CurrentClickHouse(ctx context.Context) (*chstore.Store, error) {
	store, err := c.ClickHouse(ctx)
	if err != nil {
		return nil, err
	}
	if err := store.CheckSchema(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// NATS connects, retrying forever in the background after the first
// connection. Buckets created through it get NATSReplicas replicas unless
// they name their own.
func (c *Common) NATS(name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(c.NATSURL, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("nats %s: %w", c.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, stream.Replicated(js, c.NATSReplicas), nil
}

// SignalContext is cancelled on SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Serve runs an HTTP server until ctx is done, then shuts it down,
// letting requests in flight finish for up to 10 seconds.
func Serve(ctx context.Context, srv *http.Server, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log.Info("http server stopping", "addr", srv.Addr)
	return srv.Shutdown(sctx)
}

// SplitList splits a comma-separated flag value.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Parse parses args into fs, refuses positional arguments, and runs the
// checks (the Validate methods of the binary's settings, which report
// malformed environment values too), joining every failure into one error
// so that an operator fixes them all at once.
func Parse(fs *flag.FlagSet, args []string, checks ...func() error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	errs := make([]error, len(checks))
	for i, check := range checks {
		errs[i] = check()
	}
	return errors.Join(errs...)
}
