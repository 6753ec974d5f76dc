package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/plugin/repository"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/testenv"
)

// fullAPI is an API with every route family (person writes, plugins,
// capture) over env's ClickHouse and JetStream, built with cfg.
type fullAPI struct {
	*env
	api *API
	srv *httptest.Server
	log *testenv.LockedBuffer
}

func newFullAPI(t *testing.T, cfg Config, capCfg capture.Config) *fullAPI {
	return newFullAPIServer(t, cfg, capCfg, nil)
}

// newFullAPIServer is newFullAPI served by the binaries' http.Server
// (Settings.Server, with its timeouts) when settings is not nil.
func newFullAPIServer(t *testing.T, cfg Config, capCfg capture.Config, settings *Settings) *fullAPI {
	t.Helper()
	if settings != nil {
		cfg = settings.Apply(cfg)
	}
	e := newEnv(t)
	ctx := context.Background()
	logs := &testenv.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	reg := prometheus.NewRegistry()
	kv, err := progress.Open(ctx, e.nats.JS)
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := progress.WatchPartitions(ctx, kv, ingest.DefaultConfig().Consumer, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Stop)
	deps := Deps{Store: e.store, Keys: e.cp, Log: log, Reg: reg, Ready: e.store.Ping,
		Writes: &PersonWrites{JS: e.nats.JS, Progress: watcher, Activity: activity.New(e.store.Conn()), Deletions: deletion.NewQueue(e.store.Conn()), Wait: e.writeWait}}
	svc, err := plugin.Open(ctx, e.nats.JS, plugin.Options{Source: repository.Builtin(), Activity: activity.New(e.store.Conn())}, e.cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	deps.Plugins = svc
	pub, err := capture.NewPublisher(capCfg, e.nats.JS, e.cp, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	deps.Capture = pub
	withCohorts(t, &deps, e.nats.JS, e.store)
	api, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(checkedHandler(t, api.Handler()))
	if settings != nil {
		srv.Config = settings.Server("", checkedHandler(t, api.Handler()))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return &fullAPI{env: e, api: api, srv: srv, log: logs}
}

// rawRequests sends requests one after another on one TCP connection
// and returns the responses: a dropped connection fails the test.
func rawRequests(t *testing.T, addr string, reqs ...*http.Request) []*http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	var out []*http.Response
	for i, req := range reqs {
		if err := req.Write(conn); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		res, err := http.ReadResponse(rd, req)
		if err != nil {
			t.Fatalf("response %d: %v (connection dropped?)", i, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, res)
	}
	return out
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func httpRequest(method, path string) *http.Request { return httptest.NewRequest(method, path, nil) }
