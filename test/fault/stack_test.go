package fault

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/reference"
)

// cmd/stack (ingester and API in one process, embedded NATS) stopped with
// Ctrl-C while ClickHouse is dead and the ingester holds a batch: it exits
// within 30 s, acknowledges nothing it did not store, and after a restart
// ends in the state of an uninterrupted run.
func TestStackStopsWithClickHouseDead(t *testing.T) {
	bin := testenv.Build(t, module+"stack")
	ch := testenv.StartPrivateClickHouse(t)
	natsPort := freePort(t)
	env := []string{
		"STACK_DIR=" + t.TempDir(),
		"CLICKHOUSE_ADDR=" + ch.Addr(),
		"CLICKHOUSE_DATABASE=fault",
		fmt.Sprintf("STACK_NATS_PORT=%d", natsPort),
		fmt.Sprintf("API_ADDR=127.0.0.1:%d", freePort(t)),
		// Not the default port: other tests' APIs may hold it.
		fmt.Sprintf("API_METRICS_ADDR=127.0.0.1:%d", freePort(t)),
	}
	p := testenv.StartProcess(t, bin, env)
	var nc *nats.Conn
	testenv.WaitFor(t, time.Minute, "the stack's NATS", func() (bool, error) {
		var err error
		nc, err = nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", natsPort), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		return err == nil, err
	})
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store := ch.Store(t, "fault")
	last := testenv.PublishWorkload(t, js, 0, testenv.Workload(17, 6000, 300))
	testenv.WaitCommitted(t, store, "ingester", last/3, time.Minute)

	ch.Kill()
	more := testenv.PublishWorkload(t, js, 100_000, testenv.Workload(18, 300, 300))
	testenv.WaitFor(t, 30*time.Second, "the ingester failing a batch", func() (bool, error) {
		return strings.Contains(p.Stderr(), "batch failed"), nil
	})
	took, err := p.Stop(t, interrupt, stopLimit)
	t.Logf("stack exited %s after SIGINT (%v)", took.Round(time.Millisecond), err)
	// Restart everything: the stack delivers again from the last commit
	// (the commit markers in ClickHouse, not the acknowledgements, are
	// the record of progress).
	ch.Restart(t)
	p = testenv.StartProcess(t, bin, env)
	testenv.WaitCommitted(t, store, "ingester", more, 2*time.Minute)
	ref := reference.Run(t, js, "reference", more)
	if _, err := p.Stop(t, interrupt, stopLimit); err != nil {
		t.Errorf("stack after SIGINT with everything up: %v", err)
	}
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after a stop with ClickHouse dead differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}
