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

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a running API over real ClickHouse and JetStream, with two
// organizations: A (project a, keys of several scopes) and B (project b).
type env struct {
	t        *testing.T
	url      string
	nats     *testenv.NATS
	store    *chstore.Store
	cp       *controlplane.Store
	projectA controlplane.Project
	projectB controlplane.Project
	keyAll   string // org A, "*"
	keyRead  string // org A, person:read only
	keyB     string // org B, "*"
	keyAID   string
	// writeWait is how long writes wait for the ingester.
	writeWait time.Duration
	ingesting bool                 // publishEvents started the ingester
	reg       *prometheus.Registry // the API's metrics
	progress  *progress.Partitions // the watermark the API follows
}

func newEnv(t *testing.T) *env {
	return newEnvWait(t, 10*time.Second)
}

// newEnvWait is newEnv with the time writes wait for the ingester.
func newEnvWait(t *testing.T, wait time.Duration) *env {
	t.Helper()
	ctx := context.Background()
	log := testenv.FailureLog(t)
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	cp, err := controlplane.Open(ctx, n.JS, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	e := &env{t: t, nats: n, store: store, cp: cp, writeWait: wait}
	orgA, _ := cp.CreateOrganization(ctx, "A")
	orgB, _ := cp.CreateOrganization(ctx, "B")
	if e.projectA, err = cp.CreateProject(ctx, orgA.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if e.projectB, err = cp.CreateProject(ctx, orgB.ID, "b"); err != nil {
		t.Fatal(err)
	}
	var k controlplane.Key
	e.keyAll, k, _ = cp.CreateKey(ctx, orgA.ID, "all", []string{"*"})
	e.keyAID = k.ID
	e.keyRead, _, _ = cp.CreateKey(ctx, orgA.ID, "read", []string{"person:read"})
	e.keyB, _, _ = cp.CreateKey(ctx, orgB.ID, "b", []string{"*"})

	reg := prometheus.NewRegistry()
	e.reg = reg
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	kv, err := progress.Open(ctx, n.JS)
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := progress.WatchPartitions(ctx, kv, ingest.DefaultConfig().Consumer, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Stop)
	e.progress = watcher
	deps := Deps{Store: store, Keys: cp, Log: log, Reg: reg, Ready: store.Ping,
		Writes: &PersonWrites{JS: n.JS, Progress: watcher, Activity: activity.New(store.Conn()), Deletions: deletion.NewQueue(store.Conn()), Wait: e.writeWait}}
	withCohorts(t, &deps, n.JS, store)
	api, err := New(Config{}, deps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(checkedHandler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// ingest publishes envelopes to a project and runs the ingester until
// they are all committed.
func (e *env) ingest(project uint64, events ...string) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, e.nats.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i, ev := range events {
		id := uuid.NewString()
		ts := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute).Format(time.RFC3339)
		body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, ts, strings.TrimPrefix(ev, "{"))
		ack, err := stream.Publish(ctx, e.nats.JS, project, id, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	cfg := ingest.DefaultConfig()
	cfg.BatchWait = 10 * time.Millisecond
	ing, err := ingest.New(cfg, e.nats.JS, e.store, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ing.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seq, _ := e.store.LastCommitted(ctx, cfg.Consumer)
		if seq >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingester stuck at %d, want %d", seq, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// publishRaw publishes one envelope (uuid and timestamp added) and returns
// its stream sequence.
func (e *env) publishRaw(project uint64, ev string) uint64 {
	e.t.Helper()
	id := uuid.NewString()
	body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, id, time.Now().UTC().Format(time.RFC3339), strings.TrimPrefix(ev, "{"))
	ack, err := stream.Publish(context.Background(), e.nats.JS, project, id, []byte(body))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// waitSeq waits until the ingester committed seq.
//
// It also waits for the API's own watch of the watermark to reach seq: the
// lists keep pages and last seen times by the watermark the API has seen
// (pkg/chstore/listmark.go), so a read made before the watch delivers the
// new watermark may rightly answer from the state before seq. A watch
// that missed the update catches up at its next resync (progress.Resync).
func (e *env) waitSeq(seq uint64) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got, _ := e.store.LastCommitted(context.Background(), ingest.DefaultConfig().Consumer); got >= seq {
			if err := e.progress.Wait(context.Background(), e.projectA.ID, seq, time.Until(deadline)); err != nil {
				return fmt.Errorf("the API's watch did not see %d: %w", seq, err)
			}
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("ingester did not commit %d", seq)
}

// startIngester runs the ingester until the test ends.
func (e *env) startIngester() {
	cfg := ingest.DefaultConfig()
	cfg.BatchWait = 10 * time.Millisecond
	ing, err := ingest.New(cfg, e.nats.JS, testenv.Reopen(e.t, e.store), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("ingester: %v", err)
		}
	})
}

// send makes a request with a JSON body.
func (e *env) send(method, key, path, body string) response {
	e.t.Helper()
	return request(e.t, method, e.url+path, key, body)
}

// request makes a request with a JSON body and a personal API key.
func request(t testing.TB, method, url, key, body string) response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

// response is a decoded API answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

func (e *env) get(key, path string) response {
	e.t.Helper()
	return e.do("GET", key, path)
}

func (e *env) do(method, key, path string) response {
	e.t.Helper()
	return e.send(method, key, path, "")
}

// wantError checks status and the error body shape.
func wantError(t *testing.T, r response, status int, typ, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	m := r.json(t)
	for _, k := range []string{"type", "code", "detail", "attr"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("error body lacks %q: %s", k, r.body)
		}
	}
	if m["type"] != typ || m["code"] != code {
		t.Fatalf("error %v/%v, want %s/%s", m["type"], m["code"], typ, code)
	}
	return m
}
