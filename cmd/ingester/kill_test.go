package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSIGKILLMidStream builds the ingester, kills it with SIGKILL several
// times while it folds a mixed workload, restarts it each time, and checks
// that ClickHouse ends in exactly the state of an uninterrupted run.
func TestSIGKILLMidStream(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ingester")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	n := testenv.StartNATS(t, "")
	ctx := context.Background()
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	events := testenv.Workload(99, 12000, 400)
	var last uint64
	for i, e := range events {
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(i))).String()
		ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		ack, err := testenv.Publish(ctx, n.JS, uint64(1+i%3), e, id, ts)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}

	// Reference: an uninterrupted in-process run.
	ref := testenv.ClickHouse(t)
	cfg := ingest.DefaultConfig()
	cfg.Consumer = "reference"
	cfg.BatchWait = 20 * time.Millisecond
	ing, err := ingest.New(cfg, n.JS, ref, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ing.Run(rctx) }()
	waitCommitted(t, ref, "reference", last, 2*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The binary, with small batches so kills land between and inside
	// batch writes.
	killed := testenv.ClickHouse(t)
	metricsPort, _ := chlocal.FreePort()
	env := append(os.Environ(),
		"NATS_URL="+n.Server.ClientURL(),
		"CLICKHOUSE_ADDR="+testenv.ClickHouseAddr(t),
		"CLICKHOUSE_DATABASE="+killed.Database(),
		"INGESTER_CONSUMER=killed",
		"INGESTER_BATCH_SIZE=150",
		"INGESTER_BATCH_WAIT=5ms",
		"INGESTER_ACK_WAIT=5s",
		fmt.Sprintf("INGESTER_METRICS_ADDR=127.0.0.1:%d", metricsPort),
	)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "run")
		cmd.Env = env
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	kills := 0
	for kills < 4 {
		before, _ := killed.LastCommitted(ctx, "killed")
		cmd := start()
		// Let it commit a few batches, then kill it mid-work.
		waitCommitted(t, killed, "killed", min(before+900, last), time.Minute)
		time.Sleep(time.Duration(3+kills*7) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kills++
		if now, _ := killed.LastCommitted(ctx, "killed"); now >= last {
			break
		}
	}
	cmd := start()
	waitCommitted(t, killed, "killed", last, 2*time.Minute)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ingester after SIGTERM: %v", err)
	}
	if kills == 0 {
		t.Fatal("the ingester was never killed mid-stream")
	}
	if got, want := testenv.Snapshot(t, killed), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after %d SIGKILLs differs from an uninterrupted run:\n%s", kills, testenv.FirstDiff(got, want))
	}
}

func waitCommitted(t *testing.T, store *chstore.Store, consumer string, seq uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got, err := store.LastCommitted(context.Background(), consumer)
		if err == nil && got >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not commit seq %d within %s (at %d, %v)", consumer, seq, limit, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
