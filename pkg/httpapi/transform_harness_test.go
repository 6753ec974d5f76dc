package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/transform"
)

// transformEnv is env plus an API with the plugin routes (the shipped
// repository, chains published on the log) and capture, and ingesters that
// run transformations.
type transformEnv struct {
	*env
	apiURL string    // plugins and capture
	geo    *geoip.DB // meta.geoip's database of the API and the ingesters; nil: none
}

func newTransformEnv(t *testing.T) *transformEnv { return newTransformEnvGeoIP(t, nil) }

// newTransformEnvGeoIP is newTransformEnv with geo as meta.geoip's database
// of the API's dry runs and of the ingesters runIngester starts.
func newTransformEnvGeoIP(t *testing.T, geo *geoip.DB) *transformEnv {
	t.Helper()
	e := newEnv(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	chains, err := transform.NewPublisher(ctx, e.nats.JS)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := plugin.Open(ctx, e.nats.JS, plugin.Options{Activity: activity.New(e.store.Conn()), Chains: chains}, e.cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := capture.NewPublisher(capture.Config{}, e.nats.JS, e.cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	// Loopback proxies are trusted, as by default: captureFrom's
	// X-Forwarded-For names the client.
	trusted, _ := ParseTrustedProxies(DefaultTrustedProxies)
	api, err := New(Config{TrustedProxies: trusted}, Deps{Store: e.store, Keys: e.cp, Log: log, Reg: reg, Ready: e.store.Ping, Plugins: svc, Capture: pub, GeoIP: geo})
	if err != nil {
		t.Fatal(err)
	}
	// A request without X-Forwarded-For comes from an unknown address,
	// so capture() records none: the plugins' cases are PostHog's plugin
	// tests' events, which have no $ip. captureFrom gives one.
	h := api.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Forwarded-For") == "" {
			r.RemoteAddr = ""
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &transformEnv{env: e, apiURL: srv.URL, geo: geo}
}

// call makes a request to the plugins and capture API and checks its status.
func (e *transformEnv) call(status int, method, path, body string) map[string]any {
	e.t.Helper()
	r := request(e.t, method, e.apiURL+path, e.keyAll, body)
	if r.status != status {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, status, r.body)
	}
	if len(r.body) == 0 {
		return nil
	}
	return r.json(e.t)
}

// install installs a plugin of the shipped repository (or a source
// plugin with the given entry file) and enables a config of it in
// project A at order; it returns the config's id and the plugin's.
func (e *transformEnv) install(url, source string, order int, config string) (uint64, uint64) {
	e.t.Helper()
	return e.installFile(url, "index.ts", source, order, config)
}

// installFile is install with the entry file's name.
func (e *transformEnv) installFile(url, filename, source string, order int, config string) (uint64, uint64) {
	e.t.Helper()
	org := "@current"
	var p map[string]any
	if url != "" {
		p = e.call(201, "POST", "/api/organizations/"+org+"/pipeline_transformations/", fmt.Sprintf(`{"plugin_type":"custom","url":%q}`, url))
	} else {
		p = e.call(201, "POST", "/api/organizations/"+org+"/pipeline_transformations/", `{"plugin_type":"source","name":"mine"}`)
		files, _ := json.Marshal(map[string]string{filename: source})
		e.call(200, "PATCH", fmt.Sprintf("/api/organizations/%s/pipeline_transformations/%v/update_source/", org, p["id"]), string(files))
	}
	c := e.call(201, "POST", fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA.ID),
		fmt.Sprintf(`{"plugin":%v,"enabled":true,"order":%d,"config":%s}`, p["id"], order, config))
	return uint64(c["id"].(float64)), uint64(p["id"].(float64))
}

// capture posts events to /batch/ for project A, from an unknown
// address: no $ip is recorded.
func (e *transformEnv) capture(events ...string) {
	e.t.Helper()
	e.captureFrom("", events...)
}

// captureFrom is capture as a proxy forwarding a client at ip sends it
// ("": from an unknown address, as capture).
func (e *transformEnv) captureFrom(ip string, events ...string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.apiURL+"/batch/", strings.NewReader(fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, e.projectA.APIToken, strings.Join(events, ","))))
	req.Header.Set("Content-Type", "application/json")
	if ip != "" {
		req.Header.Set("X-Forwarded-For", ip)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, body: body}
	if r.status != 200 {
		e.t.Fatalf("capture: %d %s", r.status, r.body)
	}
}

// runIngester runs an ingester with transformations into store as
// consumer until the test ends; it returns the registry of its metrics
// and a stop function (idempotent).
func (e *transformEnv) runIngester(store *chstore.Store, consumer string) (*prometheus.Registry, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A limit five times the default: a loaded test machine must not time
	// out ordinary calls (the looping plugin still meets it).
	hook, err := transform.NewHook(ctx, e.nats.JS, transform.New(transform.Limits{Timeout: 500 * time.Millisecond}, log, reg, transform.WithGeoIP(e.geo)), 1, log, reg)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := ingest.DefaultConfig()
	cfg.Consumer, cfg.BatchWait, cfg.Hook = consumer, 10*time.Millisecond, hook
	ing, err := ingest.New(cfg, e.nats.JS, store, log, reg)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("ingester: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return reg, stop
}

// lastSeq is the events stream's last sequence.
func (e *transformEnv) lastSeq() uint64 {
	e.t.Helper()
	s, err := e.nats.JS.Stream(context.Background(), stream.Events)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.LastSeq
}

// storedEvents lists project A's events rows in stream order as
// "name distinct_id properties".
func storedEvents(t *testing.T, store *chstore.Store, project uint64) []string {
	t.Helper()
	rows, err := store.Conn().Query(context.Background(), "SELECT event, distinct_id, properties FROM events FINAL WHERE project_id = ? ORDER BY seq", project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, id, props string
		if err := rows.Scan(&name, &id, &props); err != nil {
			t.Fatal(err)
		}
		out = append(out, name+" "+id+" "+props)
	}
	return out
}

// storedPersons lists project A's live persons as "distinct ids properties".
func storedPersons(t *testing.T, store *chstore.Store, project uint64) []string {
	t.Helper()
	rows, err := store.Conn().Query(context.Background(), "SELECT distinct_ids, properties FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 ORDER BY id", project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ids []string
		var props string
		if err := rows.Scan(&ids, &props); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(ids, ",")+" "+props)
	}
	return out
}

// counter reads a counter of reg by its labels (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}
