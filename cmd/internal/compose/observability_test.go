package compose_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.yaml.in/yaml/v3"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/process"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

const (
	alertsFile     = "../../../deploy/prometheus/alerts.yml"
	alertTestsFile = "../../../deploy/prometheus/alerts_test.yml"
	promConfigFile = "../../../deploy/prometheus/prometheus.yml"
	dashboardFile  = "../../../deploy/grafana/personhub.json"
)

// promtool runs Prometheus's own checker; `make test` installs it
// (scripts/install-promtool.sh).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/install-promtool.sh (make test does)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRulesPassPromtool: the Prometheus configuration and its alert
// rules load, and the rules' unit tests (alerts_test.yml: each alert fires
// when it should and stays quiet when it should not) pass.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool(t, "check", "config", promConfigFile)
	promtool(t, "check", "rules", alertsFile)
	promtool(t, "test", "rules", alertTestsFile)
}

// TestObservabilityNamesExportedMetrics: every metric an alert rule or a
// dashboard panel reads is one the api, the ingester or the deleter
// registers, built as their binaries build them. A renamed metric would
// otherwise leave an alert silent and a panel empty.
func TestObservabilityNamesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	// up is Prometheus's own, per scraped target.
	exported["up"] = true
	known := func(name string) bool {
		if exported[name] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
				return true
			}
		}
		return false
	}
	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if !known(n) {
				t.Errorf("%s: %q reads %s, which no binary exports", where, expr, n)
			}
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &rules)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			check("alert "+r.Alert, r.Expr)
			n++
		}
	}
	if n < 10 {
		t.Errorf("alerts.yml has %d rules; the test read it wrong", n)
	}

	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			check("panel "+p.Title, q.Expr)
			exprs++
		}
	}
	if exprs < 20 {
		t.Errorf("the dashboard has %d queries; the test read it wrong", exprs)
	}
}

// TestPrometheusScrapesTheOpsPorts: prometheus.yml scrapes each personhub
// service of docker-compose.yml on the ops address the service is given,
// under the job name the alerts and the dashboard match (personhub-<service>).
func TestPrometheusScrapesTheOpsPorts(t *testing.T) {
	services := readCompose(t, "../../../docker-compose.yml")
	var conf struct {
		ScrapeConfigs []struct {
			Job    string `yaml:"job_name"`
			Static []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promConfigFile, &conf)
	jobs := map[string][]string{}
	for _, sc := range conf.ScrapeConfigs {
		for _, s := range sc.Static {
			jobs[sc.Job] = append(jobs[sc.Job], s.Targets...)
		}
	}
	var want []string
	for name, svc := range services {
		if !strings.HasPrefix(svc.entrypoint, "/usr/local/bin/") || svc.command != "run" {
			continue
		}
		var addr string
		for k, v := range svc.env {
			if strings.HasSuffix(k, "_METRICS_ADDR") {
				addr = v
			}
		}
		if addr == "" {
			t.Errorf("service %s sets no ops address (*_METRICS_ADDR)", name)
			continue
		}
		port := addr[strings.LastIndex(addr, ":")+1:]
		job := "personhub-" + name
		want = append(want, job)
		if !slices.Equal(jobs[job], []string{name + ":" + port}) {
			t.Errorf("job %s scrapes %v, want [%s:%s] (the service's %s)", job, jobs[job], name, port, addr)
		}
	}
	sort.Strings(want)
	var got []string
	for j := range jobs {
		got = append(got, j)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("prometheus.yml scrapes jobs %v, want %v", got, want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// PromQL's words that are not metric names: aggregation modifiers,
// binary operators, offsets, and the literals.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlLabelList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlWord      = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// metricNames lists the metric names a PromQL expression reads: the
// identifiers left once strings, label matchers, ranges and label lists
// are taken out, except function names (followed by "(") and keywords.
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlLabelList.ReplaceAllString(e, " ")
	var out []string
	for _, at := range promqlWord.FindAllStringIndex(e, -1) {
		word := e[at[0]:at[1]]
		if at[0] > 0 && strings.ContainsAny(e[at[0]-1:at[0]], "0123456789.") {
			continue // the exponent of a number (1e3) or a duration's unit
		}
		if strings.HasPrefix(strings.TrimLeft(e[at[1]:], " \t\n"), "(") || promqlWords[strings.ToLower(word)] {
			continue
		}
		out = append(out, word)
	}
	return out
}

// TestMetricNames pins the extraction the check above relies on.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`up{job=~"personhub-.*"} == 0`: "up",
		`sum by (instance) (rate(api_requests_total{status=~"5.."}[5m])) / sum by (instance) (rate(api_requests_total[5m])) > 0.01`: "api_requests_total api_requests_total",
		`ingester_consumer_pending_messages > 0 and changes(ingester_committed_sequence[15m]) == 0`:                                 "ingester_consumer_pending_messages ingester_committed_sequence",
		`histogram_quantile(0.99, sum by (le, route) (rate(api_request_seconds_bucket{job=~"$job"}[5m])))`:                          "api_request_seconds_bucket",
		`deleter_next_run_timestamp_seconds > 0 and time() - deleter_next_run_timestamp_seconds > 3600`:                             "deleter_next_run_timestamp_seconds deleter_next_run_timestamp_seconds",
		`1e3 * x_total offset 5m`: "x_total",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// recorder is a Registerer that keeps the names of what is registered
// with it (from the collectors' descriptions) and registers nothing, so
// that one recorder can take the api's, the ingester's and the deleter's
// metrics together.
type recorder struct {
	mu    sync.Mutex
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// exportedMetrics builds the api, the ingester and the deleter as their
// binaries do (cmd/*/main.go: each registers the Go and process collectors,
// and process.OpsServer adds personhub_ready) and returns every metric
// name they register.
func exportedMetrics(t *testing.T) map[string]bool {
	ctx := context.Background()
	rec := &recorder{names: map[string]bool{}}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		process.ReadyGauge(func(context.Context) error { return nil }))
	n := testenv.StartComposeNATS(t, "../../../deploy/nats/nats.conf", "api", "ingester", "capture")
	store := testenv.ClickHouse(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	startIngesters(t, n, store, 1, log, rec)

	apiNC, apiJS := n.Connect(t, "api")
	testenv.WaitFor(t, 30*time.Second, "the streams", func() (bool, error) {
		return stream.CheckPartitions(ctx, apiJS, 1) == nil, nil
	})
	cp, err := controlplane.Open(ctx, apiJS, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	api, err := process.NewAPI(ctx, process.APIConfig{
		Store: store, NC: apiNC, JS: apiJS, Keys: cp, Log: log, Reg: rec,
		Consumer: ingest.DefaultConfig().Consumer, Partitions: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	dcfg := deletion.DefaultConfig()
	dcfg.Schedule = ""
	if _, err := process.NewDeleter(process.DeleterConfig{Deletion: dcfg, Store: store, Log: log, Reg: rec}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, prefix := range []string{"api_", "capture_", "ingester_", "deleter_", "transformation_", "go_", "process_"} {
		found := false
		for name := range rec.names {
			found = found || strings.HasPrefix(name, prefix)
		}
		if !found {
			t.Errorf("no %s* metric registered: the recorder missed a component", prefix)
		}
	}
	return rec.names
}
