package ingest

import (
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestNATSRestartLosesNoMessage: the NATS server restarted while the
// ingester folds small batches. The client loses messages in flight (and
// drops some as a slow consumer while it reconnects); JetStream would not
// deliver them again, since the AckAll of a later message acknowledges
// them. The ingester must notice the hole and fold every event, in order:
// the state equals an uninterrupted run with the default batch size.
func TestNATSRestartLosesNoMessage(t *testing.T) {
	n := testenv.StartNATS(t, "")
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(13, 12000, 400))
	ref := testenv.ClickHouse(t)
	cfg := testConfig("reference")
	cfg.BatchSize = DefaultConfig().BatchSize
	runUntil(t, cfg, n.JS, ref, last)
	want := testenv.Snapshot(t, ref)

	store := testenv.ClickHouse(t)
	cfg = testConfig("restarted")
	cfg.BatchSize, cfg.BatchWait = 150, 5*time.Millisecond
	cancel, done := startIngester(t, cfg, n.JS, store)
	testenv.WaitCommitted(t, store, cfg.Consumer, last/4, time.Minute)
	n.ShutdownServer()
	time.Sleep(time.Second)
	n.StartServer(t)
	testenv.WaitCommitted(t, store, cfg.Consumer, last, time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testenv.Snapshot(t, store); got != want {
		t.Fatalf("state after a NATS restart differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}
