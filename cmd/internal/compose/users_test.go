package compose_test

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

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/process"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tagger is a source transformation: it proves a chain the API published
// (as the api user) reached the ingesters (as the ingester user), which
// read its code from the version store and recorded its outcome.
const tagger = `export function processEvent(event: any) {
  event.$set = { ...(event.$set || {}), tagged: 'yes' }
  return event
}`

// TestComposeUsersRunTheStack runs the components docker-compose.yml
// starts, each connected as the NATS user deploy/nats/nats.conf gives it,
// and checks that every write path reaches ClickHouse with no permission
// violation: ingesters (one partition and three, with the write lane
// started, as by default; both with transformations),
// the API's publishing routes (plugin config enable, /batch/, PATCH and
// DELETE of a person), a capture pipeline publishing straight to
// JetStream, and the deleter. A permission missing from nats.conf breaks
// every compose deployment while tests on an open server stay green.
func TestComposeUsersRunTheStack(t *testing.T) {
	for _, parts := range []int{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) { runAsComposeUsers(t, parts) })
	}
}

func runAsComposeUsers(t *testing.T, parts int) {
	ctx := context.Background()
	n := testenv.StartComposeNATS(t, "../../../deploy/nats/nats.conf", "api", "ingester", "capture")
	store := testenv.ClickHouse(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Checked after everything below has stopped (cleanups run last
	// first): a stopping ingester deletes its lease, which needs a
	// permission too.
	t.Cleanup(func() {
		for _, d := range n.Denied() {
			t.Errorf("permission violation: %s", d)
		}
	})

	// The ingesters, built as cmd/ingester run builds them.
	startIngesters(t, n, store, parts, log, prometheus.NewRegistry())

	// The API, built as cmd/api builds it (it upgrades the streams), once
	// the ingester has made them (docs/operations.md: start the ingester
	// first).
	apiNC, apiJS := n.Connect(t, "api")
	testenv.WaitFor(t, 30*time.Second, "partitioned streams", func() (bool, error) {
		return stream.CheckPartitions(ctx, apiJS, parts) == nil, nil
	})
	cp, err := controlplane.Open(ctx, apiJS, log)
	if err != nil {
		t.Fatalf("api opens the control plane: %v", err)
	}
	t.Cleanup(cp.Close)
	org, err := cp.CreateOrganization(ctx, "compose")
	if err != nil {
		t.Fatal(err)
	}
	// Two projects: with three partitions they land in different ones
	// (FNV of "1" and "2" modulo 3), so more than one ingester folds.
	projA, err := cp.CreateProject(ctx, org.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	projB, err := cp.CreateProject(ctx, org.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := cp.CreateKey(ctx, org.ID, "all", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	api, err := process.NewAPI(ctx, process.APIConfig{
		Store: store, NC: apiNC, JS: apiJS, Keys: cp, Log: log, Reg: prometheus.NewRegistry(),
		Consumer: ingest.DefaultConfig().Consumer, Partitions: parts, WriteWait: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("api starts: %v", err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { srv.Close(); api.Close() })
	c := client{t: t, base: srv.URL, key: secret}

	// A plugin config enable publishes project A's chain.
	p := c.call(201, "POST", "/api/organizations/@current/pipeline_transformations/", `{"plugin_type":"source","name":"tagger"}`)
	files, _ := json.Marshal(map[string]string{"index.ts": tagger})
	c.call(200, "PATCH", fmt.Sprintf("/api/organizations/@current/pipeline_transformations/%v/update_source/", p["id"]), string(files))
	c.call(201, "POST", fmt.Sprintf("/api/projects/%d/plugin_configs/", projA.ID), fmt.Sprintf(`{"plugin":%v,"enabled":true,"order":1,"config":{}}`, p["id"]))
	// A plugin of the (builtin) repository claims its URL in plugin_urls.
	c.call(201, "POST", "/api/organizations/@current/pipeline_transformations/", `{"plugin_type":"custom","url":"https://github.com/personhub/plugin-drop-events"}`)
	// The API announces plugin changes on plugins.<org>.<kind>: the
	// announcement only logs when refused, so check it was stored.
	testenv.WaitFor(t, 10*time.Second, "plugin announcements", func() (bool, error) {
		s, err := apiJS.Stream(ctx, plugin.StreamEvents)
		if err != nil {
			return false, err
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs > 0, err
	})

	// Actions and cohorts are KV records of the API's.
	c.call(201, "POST", fmt.Sprintf("/api/projects/%d/actions/", projA.ID), `{"name":"signed up","steps":[{"event":"signup"}]}`)
	c.call(201, "POST", fmt.Sprintf("/api/projects/%d/cohorts/", projA.ID), `{"name":"pro","groups":[{"properties":[{"type":"person","key":"plan","value":"pro"}]}]}`)

	// Capture through the API, then a person write and a deletion.
	c.call(200, "POST", "/batch/", fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"signup","distinct_id":"alice","properties":{"$set":{"plan":"free"}}},{"event":"pageview","distinct_id":"bob"}]}`, projA.APIToken))
	waitPersons(t, store, projA.ID, `alice {"plan":"free","tagged":"yes"}`, `bob {"tagged":"yes"}`)
	alice := c.personID(projA.ID, "alice")
	c.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/persons/%s/", projA.ID, alice), `{"properties":{"plan":"pro"}}`)
	waitPersons(t, store, projA.ID, `alice {"plan":"pro","tagged":"yes"}`, `bob {"tagged":"yes"}`)

	// A capture pipeline publishing straight to JetStream.
	_, capJS := n.Connect(t, "capture")
	if _, err := testenv.Publish(ctx, capJS, projB.ID, testenv.Message{Body: `{"event":"visit","distinct_id":"carol","$set":{"from":"pipeline"}}`}, "0b9d5c1e-6c51-4f4b-9a70-5d8a3b3c0001", time.Now()); err != nil {
		t.Fatalf("capture publishes: %v", err)
	}
	// `ingester publish` (a file of events) as the ingester user, binding
	// the streams as they are.
	_, pubJS := n.Connect(t, "ingester")
	if err := stream.Ensure(ctx, pubJS, stream.Config{}); err != nil {
		t.Fatalf("ingester publish binds the streams: %v", err)
	}
	if _, err := command.PublishLines(ctx, pubJS, projB.ID, strings.NewReader(`{"event":"import","distinct_id":"dave"}`+"\n"), 10); err != nil {
		t.Fatalf("ingester publish: %v", err)
	}
	waitPersons(t, store, projB.ID, `carol {"from":"pipeline"}`, `dave {}`)

	// The deleter (it uses ClickHouse only: compose gives it no NATS URL)
	// runs the deletion of bob's events the API queued.
	bob := c.personID(projA.ID, "bob")
	c.call(204, "DELETE", fmt.Sprintf("/api/projects/%d/persons/%s/?delete_events=true", projA.ID, bob), "")
	waitPersons(t, store, projA.ID, `alice {"plan":"pro","tagged":"yes"}`)
	dcfg := deletion.DefaultConfig()
	dcfg.Partitions, dcfg.Schedule = parts, ""
	deleter, err := process.NewDeleter(process.DeleterConfig{Deletion: dcfg, Store: store, Log: log, Reg: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the deleter's run", func() (bool, error) {
		sum, err := deleter.RunOnce(ctx)
		return err == nil && sum.Verified == 1, err
	})
	// The PATCH is recorded as a $set event of alice's; bob's pageview is
	// gone.
	if got := eventNames(t, store, projA.ID); got != "signup alice\n$set alice" {
		t.Fatalf("project A's events after the deletion: %q, want alice's only", got)
	}
	if got := eventNames(t, store, projB.ID); got != "visit carol\nimport dave" {
		t.Fatalf("project B's events: %q", got)
	}
}

// startIngesters runs one ingester per partition on one connection as the
// ingester user, built as cmd/ingester builds them (with the
// transformation hook), until the test ends.
func startIngesters(t *testing.T, n *testenv.ComposeNATS, store *chstore.Store, parts int, log *slog.Logger, reg prometheus.Registerer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc, js := n.Connect(t, "ingester")
	cfg := ingest.DefaultConfig()
	cfg.Streams.Partitions, cfg.BatchWait = parts, 10*time.Millisecond
	// Both runs start the write lane, on by default (its stream, ordered
	// consumer and progress keys as the ingester user). With no backlog
	// the main consumer folds every command first, so the lane publishes
	// no record here: lane.> itself is not exercised by this test.
	if !cfg.WriteLane {
		t.Fatal("the write lane is off by default; this test runs what compose runs")
	}
	ing, err := process.NewIngester(ctx, process.IngesterConfig{Ingest: cfg, JS: js, Store: store, Log: log, Reg: reg})
	if err != nil {
		t.Fatalf("ingester starts: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ing.Run(ctx); err != nil {
			t.Errorf("ingesters: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		// The server answers a ping after the errors of what was sent
		// before it, so the violations of the stop are reported by now.
		_ = nc.Flush()
	})
}

// waitPersons waits until a project's live persons are want, each
// "distinct ids properties", in id order.
func waitPersons(t *testing.T, store *chstore.Store, project uint64, want ...string) {
	t.Helper()
	var got []string
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("persons %q", want), func() (bool, error) {
		rows, err := store.Conn().Query(context.Background(), "SELECT distinct_ids, properties FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 ORDER BY id", project)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		got = got[:0]
		for rows.Next() {
			var ids []string
			var props string
			if err := rows.Scan(&ids, &props); err != nil {
				return false, err
			}
			got = append(got, strings.Join(ids, ",")+" "+props)
		}
		return strings.Join(got, "\n") == strings.Join(want, "\n"), rows.Err()
	})
}

// eventNames lists a project's events as "event distinct_id", by seq.
func eventNames(t *testing.T, store *chstore.Store, project uint64) string {
	t.Helper()
	rows, err := store.Conn().Query(context.Background(), "SELECT event, distinct_id FROM events FINAL WHERE project_id = ? ORDER BY seq", project)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, id string
		if err := rows.Scan(&name, &id); err != nil {
			t.Fatal(err)
		}
		out = append(out, name+" "+id)
	}
	return strings.Join(out, "\n")
}

// client calls the API with a personal key.
type client struct {
	t         *testing.T
	base, key string
}

func (c client) call(status int, method, path, body string) map[string]any {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, status, raw)
	}
	var out map[string]any
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// personID is the id of the person with distinctID, as the API lists it
// (once it does: the list may trail the persons table by a batch).
func (c client) personID(project uint64, distinctID string) string {
	c.t.Helper()
	var res []any
	testenv.WaitFor(c.t, 30*time.Second, "person "+distinctID+" listed", func() (bool, error) {
		r := c.call(200, "GET", fmt.Sprintf("/api/projects/%d/persons/?distinct_id=%s", project, distinctID), "")
		res, _ = r["results"].([]any)
		return len(res) == 1, nil
	})
	return fmt.Sprint(res[0].(map[string]any)["id"])
}
