package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/reference"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSIGKILLMidStream builds the ingester, kills it with SIGKILL several
// times while it folds a mixed workload, restarts it each time, and checks
// that ClickHouse ends in exactly the state of an uninterrupted run (a
// fold of the same log, records of the write lane included).
func TestSIGKILLMidStream(t *testing.T) {
	bin := testenv.Build(t, ".")
	n := testenv.StartNATS(t, "")
	ctx := context.Background()
	last := testenv.PublishWorkload(t, n.JS, 0, testenv.Workload(99, 12000, 400))

	// The binary, with small batches (and grown batches of small chunks)
	// so kills land between and inside batch writes.
	killed := testenv.ClickHouse(t)
	metricsPort, _ := chlocal.FreePort()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	env := []string{
		"NATS_URL=" + n.Server.ClientURL(),
		"CLICKHOUSE_ADDR=" + testenv.ClickHouseAddr(t),
		"CLICKHOUSE_DATABASE=" + killed.Database(),
		"INGESTER_CONSUMER=killed",
		"INGESTER_BATCH_SIZE=150",
		"INGESTER_BATCH_WAIT=5ms",
		// Growth of at most 2.5 s: what the ack wait of 5 s once set
		// here capped it to (half of it), kept as the test's size.
		"INGESTER_GROW_FOR=2500ms",
		// A killed ingester holds its lease until it expires (lease.go).
		"INGESTER_LEASE_TTL=2s",
		"INGESTER_METRICS_ADDR=" + metricsAddr,
	}
	// Each start is killed mid-work: once it holds messages delivered past
	// its commit (a batch in hand, or a grown batch's chunks written
	// ahead: growth is on by default), or after a few commits.
	kills, inHand := 0, 0
	for kills < 4 {
		before, _ := killed.LastCommitted(ctx, "killed")
		p := testenv.StartProcess(t, bin, env, "run")
		testenv.WaitFor(t, time.Minute, "the ingester holding messages or committing", func() (bool, error) {
			committed, err := killed.LastCommitted(ctx, "killed")
			if err != nil || committed >= min(before+900, last) {
				return err == nil, err
			}
			floor, err := testenv.Delivered(ctx, n.JS, "killed")
			return floor > committed, err
		})
		time.Sleep(time.Duration(3+kills*7) * time.Millisecond)
		p.Kill()
		kills++
		now, _ := killed.LastCommitted(ctx, "killed")
		if floor, err := testenv.Delivered(ctx, n.JS, "killed"); err == nil && floor > now {
			inHand++
		}
		if now >= last {
			break
		}
	}
	t.Logf("%d kills, %d with messages delivered past the commit", kills, inHand)
	if inHand == 0 {
		t.Errorf("no kill of %d found messages delivered past its commit", kills)
	}
	p := testenv.StartProcess(t, bin, env, "run")
	testenv.WaitCommitted(t, killed, "killed", last, 2*time.Minute)
	// The kills may have left nothing to fold: the last start can find the
	// log committed, so wait for it to be up before asking it to stop.
	testenv.WaitHealthy(t, metricsAddr, time.Minute)
	if _, err := p.Stop(t, syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("ingester after SIGTERM: %v\n%s", err, p.Stderr())
	}
	// The uninterrupted run folds the log after the kills: a restarted
	// ingester finds commands in its backlog and (the write lane on, the
	// default) folds them ahead, recording where; a fold of the log
	// follows those records, one made before them could not.
	ref := reference.Run(t, n.JS, "reference", last)
	if got, want := testenv.Snapshot(t, killed), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after %d SIGKILLs differs from an uninterrupted run:\n%s", kills, testenv.FirstDiff(got, want))
	}
}
