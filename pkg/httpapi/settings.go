package httpapi

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/personhub/personhub/pkg/appconfig"
)

// Settings are the API server's settings in the binaries (cmd/api and
// cmd/stack): flags with environment defaults, documented in
// docs/operations.md ("API server"). Server builds the one http.Server
// both binaries run.
type Settings struct {
	// MetricsAddr serves /metrics, /healthz and /readyz (the ops address);
	// /metrics is never on the API's own port.
	MetricsAddr string
	// Connection timeouts (http.Server): a slow client holds a connection
	// at most this long for the headers, the whole request, the answer
	// (streaming answers: each chunk), and idle between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	BodyConcurrency                                           int
	BodyWait                                                  time.Duration
	RatePerMinute, RatePerHour                                int
}

// Bind registers the flags on fs.
func (s *Settings) Bind(fs *flag.FlagSet, env *appconfig.EnvReader) {
	fs.StringVar(&s.MetricsAddr, "metrics-addr", appconfig.Env("API_METRICS_ADDR", "127.0.0.1:9100"), "address of /metrics, /healthz and /readyz; /metrics is not served on the API address (env API_METRICS_ADDR)")
	fs.DurationVar(&s.ReadHeaderTimeout, "read-header-timeout", env.Duration("API_READ_HEADER_TIMEOUT", 10*time.Second), "time a client has to send the request headers (env API_READ_HEADER_TIMEOUT)")
	fs.DurationVar(&s.ReadTimeout, "read-timeout", env.Duration("API_READ_TIMEOUT", 30*time.Second), "time a client has to send the whole request, body included (env API_READ_TIMEOUT)")
	fs.DurationVar(&s.WriteTimeout, "write-timeout", env.Duration("API_WRITE_TIMEOUT", 60*time.Second), "time to answer a request; streaming CSV exports: for each chunk (env API_WRITE_TIMEOUT)")
	fs.DurationVar(&s.IdleTimeout, "idle-timeout", env.Duration("API_IDLE_TIMEOUT", 120*time.Second), "how long an idle keep-alive connection stays open (env API_IDLE_TIMEOUT)")
	fs.IntVar(&s.BodyConcurrency, "body-concurrency", env.Int("API_BODY_CONCURRENCY", 64), "request bodies read at once; others wait up to -body-wait, then 503 (env API_BODY_CONCURRENCY)")
	fs.DurationVar(&s.BodyWait, "body-wait", env.Duration("API_BODY_WAIT", 10*time.Second), "how long a request body waits to be read before 503 (env API_BODY_WAIT)")
	fs.IntVar(&s.RatePerMinute, "rate-per-minute", env.Int("API_RATE_PER_MINUTE", DefaultRatePerMinute), "requests a personal API key may burst, refilled over a minute; 0: no limit (env API_RATE_PER_MINUTE)")
	fs.IntVar(&s.RatePerHour, "rate-per-hour", env.Int("API_RATE_PER_HOUR", DefaultRatePerHour), "requests a personal API key may make, refilled over an hour; 0: no limit (env API_RATE_PER_HOUR)")
}

// Validate checks the settings.
func (s Settings) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{"read-header-timeout": s.ReadHeaderTimeout, "read-timeout": s.ReadTimeout,
		"write-timeout": s.WriteTimeout, "idle-timeout": s.IdleTimeout, "body-wait": s.BodyWait} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: want a positive duration", name, d))
		}
	}
	if s.BodyConcurrency < 1 {
		errs = append(errs, fmt.Errorf("body-concurrency %d: want at least 1", s.BodyConcurrency))
	}
	if s.RatePerMinute < 0 || s.RatePerHour < 0 {
		errs = append(errs, errors.New("rate-per-minute and rate-per-hour: want 0 (no limit) or more"))
	}
	if s.MetricsAddr == "" {
		errs = append(errs, errors.New("metrics-addr is empty"))
	}
	return errors.Join(errs...)
}

// Apply returns cfg with the API's limits from the settings.
func (s Settings) Apply(cfg Config) Config {
	cfg.BodyConcurrency, cfg.BodyWait = s.BodyConcurrency, s.BodyWait
	cfg.StreamWriteTimeout = s.WriteTimeout
	cfg.RequestTimeout = s.WriteTimeout - s.WriteTimeout/10
	cfg.RateLimit = RateLimit{PerMinute: s.RatePerMinute, PerHour: s.RatePerHour}
	return cfg
}

// Server is the API's http.Server on addr.
func (s Settings) Server(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: s.ReadHeaderTimeout, ReadTimeout: s.ReadTimeout,
		WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout}
}
