package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/transform"
)

// TestChainCommands: a change of a project's chain puts one command on
// its command subject; a change that leaves the chain as it is (a name)
// puts none; an API start publishes only chains not published yet (an
// older version's configs); uninstalling a plugin publishes the chains
// of the projects that had it.
func TestChainCommands(t *testing.T) {
	e := newTransformEnv(t)
	ctx := context.Background()
	commands := func() uint64 {
		t.Helper()
		s, err := e.nats.JS.Stream(ctx, stream.Events)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(stream.CommandSubject(e.projectA.ID)))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[stream.CommandSubject(e.projectA.ID)]
	}
	cfg, pluginID := e.install("", taggerTS, 1, `{"tag":"x"}`)
	if n := commands(); n != 1 {
		t.Fatalf("after enabling: %d commands, want 1", n)
	}
	e.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, cfg), `{"name":"renamed"}`)
	if n := commands(); n != 1 {
		t.Fatalf("after a rename: %d commands, want 1", n)
	}
	open := func() {
		t.Helper()
		pub, err := transform.NewPublisher(ctx, e.nats.JS)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plugin.Open(ctx, e.nats.JS, plugin.Options{Chains: pub}, e.cp, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry()); err != nil {
			t.Fatal(err)
		}
	}
	open()
	time.Sleep(300 * time.Millisecond) // the start's publication runs in the background
	if n := commands(); n != 1 {
		t.Fatalf("after a start: %d commands, want 1", n)
	}
	kv, err := e.nats.JS.KeyValue(ctx, transform.BucketChains)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, strconv.FormatUint(e.projectA.ID, 10)); err != nil {
		t.Fatal(err)
	}
	open()
	testenv.WaitFor(t, 10*time.Second, "the chain published at start", func() (bool, error) { return commands() == 2, nil })
	e.call(204, "DELETE", fmt.Sprintf("/api/organizations/@current/pipeline_transformations/%d/", pluginID), "")
	if n := commands(); n != 3 {
		t.Fatalf("after uninstalling: %d commands, want 3", n)
	}
	s, _ := e.nats.JS.Stream(ctx, stream.Events)
	last, err := s.GetLastMsgForSubject(ctx, stream.CommandSubject(e.projectA.ID))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"$transformations":[]`; !strings.Contains(string(last.Data), want) {
		t.Fatalf("last chain %s, want an empty one", last.Data)
	}
}
