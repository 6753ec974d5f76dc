package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Settings are the API server's settings in the binaries (cmd/api and
// cmd/stack), documented in docs/operations.md ("API server"); the
// binaries bind them to flags with environment defaults. Server builds
// the one http.Server both binaries run.
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
	// TrustedProxies lists the addresses and CIDR prefixes of reverse
	// proxies whose X-Forwarded-For capture believes (comma-separated;
	// see clientIP).
	TrustedProxies string
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
	if _, err := ParseTrustedProxies(s.TrustedProxies); err != nil {
		errs = append(errs, err)
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
	cfg.TrustedProxies, _ = ParseTrustedProxies(s.TrustedProxies) // checked by Validate
	return cfg
}

// Server is the API's http.Server on addr.
func (s Settings) Server(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: s.ReadHeaderTimeout, ReadTimeout: s.ReadTimeout,
		WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout}
}
