package appconfig

import (
	"flag"
	"os"
	"time"

	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/plugin"
)

// BindPlugins registers the plugin flags of the binaries that serve the
// API (cmd/api, cmd/stack) on fs.
func BindPlugins(fs *flag.FlagSet, c *plugin.Settings) {
	fs.StringVar(&c.Repository, "plugin-repository", Env("PLUGIN_REPOSITORY", ""), "plugin index and archives: a base URL, a local folder, or empty for the builtin index (env PLUGIN_REPOSITORY)")
	fs.StringVar(&c.LocalDir, "plugin-local-dir", Env("PLUGIN_LOCAL_DIR", ""), "folder that file: plugin URLs must be inside; empty disables local plugins (env PLUGIN_LOCAL_DIR)")
	fs.StringVar(&c.GlobalOrganizations, "plugin-global-organizations", Env("PLUGIN_GLOBAL_ORGANIZATIONS", ""), "comma-separated ids of the organizations that may manage global plugins (env PLUGIN_GLOBAL_ORGANIZATIONS)")
}

// BindAPIServer registers the API server's flags (docs/operations.md,
// "API server") on fs; env reads the typed ones.
func BindAPIServer(fs *flag.FlagSet, env *EnvReader, s *httpapi.Settings) {
	fs.StringVar(&s.MetricsAddr, "metrics-addr", Env("API_METRICS_ADDR", "127.0.0.1:9100"), "address of /metrics, /healthz and /readyz; /metrics is not served on the API address (env API_METRICS_ADDR)")
	fs.DurationVar(&s.ReadHeaderTimeout, "read-header-timeout", env.Duration("API_READ_HEADER_TIMEOUT", 10*time.Second), "time a client has to send the request headers (env API_READ_HEADER_TIMEOUT)")
	fs.DurationVar(&s.ReadTimeout, "read-timeout", env.Duration("API_READ_TIMEOUT", 30*time.Second), "time a client has to send the whole request, body included (env API_READ_TIMEOUT)")
	fs.DurationVar(&s.WriteTimeout, "write-timeout", env.Duration("API_WRITE_TIMEOUT", 60*time.Second), "time to answer a request; streaming CSV exports: for each chunk (env API_WRITE_TIMEOUT)")
	fs.DurationVar(&s.IdleTimeout, "idle-timeout", env.Duration("API_IDLE_TIMEOUT", 120*time.Second), "how long an idle keep-alive connection stays open (env API_IDLE_TIMEOUT)")
	fs.IntVar(&s.BodyConcurrency, "body-concurrency", env.Int("API_BODY_CONCURRENCY", 64), "request bodies read at once; others wait up to -body-wait, then 503 (env API_BODY_CONCURRENCY)")
	fs.DurationVar(&s.BodyWait, "body-wait", env.Duration("API_BODY_WAIT", 10*time.Second), "how long a request body waits to be read before 503 (env API_BODY_WAIT)")
	fs.IntVar(&s.RatePerMinute, "rate-per-minute", env.Int("API_RATE_PER_MINUTE", httpapi.DefaultRatePerMinute), "requests a personal API key may burst, refilled over a minute; 0: no limit (env API_RATE_PER_MINUTE)")
	// Set but empty means none here (Env would read it as unset).
	trusted := httpapi.DefaultTrustedProxies
	if v, ok := os.LookupEnv("API_TRUSTED_PROXIES"); ok {
		trusted = v
	}
	fs.StringVar(&s.TrustedProxies, "trusted-proxies", trusted, "reverse proxies (addresses, CIDR prefixes; comma-separated) whose X-Forwarded-For capture believes when it records a client's address in $ip; \"\" or none: none (env API_TRUSTED_PROXIES)")
	fs.IntVar(&s.RatePerHour, "rate-per-hour", env.Int("API_RATE_PER_HOUR", httpapi.DefaultRatePerHour), "requests a personal API key may make, refilled over an hour; 0: no limit (env API_RATE_PER_HOUR)")
}
