package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func build(t *testing.T) string { return testenv.Build(t, ".") }

func env(t *testing.T, database string, extra ...string) []string {
	return append(append(os.Environ(), "CLICKHOUSE_ADDR="+testenv.ClickHouseAddr(t), "CLICKHOUSE_DATABASE="+database), extra...)
}

// seed writes two events of person 7, a pending request for it and the
// ingester's commit marker.
func seed(t *testing.T, st *chstore.Store) {
	t.Helper()
	ctx := context.Background()
	insert := func(sql string, rows ...[]any) {
		b, err := st.Conn().PrepareBatch(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := b.Append(r...); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	insert(`INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`,
		[]any{uint64(1), uuid.New(), "e", "d", uint64(7), uuid.Nil, ts, uint16(0), "{}", uint64(1)},
		[]any{uint64(1), uuid.New(), "e", "d", uint64(7), uuid.Nil, ts, uint16(0), "{}", uint64(2)})
	zero := time.Unix(0, 0).UTC()
	insert(`INSERT INTO person_deletion_requests (project_id, person_id, person_uuid, request_seq, status, requested_at, started_at, verified_at, events_deleted, version)`,
		[]any{uint64(1), uint64(7), uuid.Nil, uint64(3), "pending", ts, zero, zero, uint64(0), uint64(3)})
	insert(`INSERT INTO ingest_batches (consumer, first_seq, last_seq, events, persons, distinct_ids, flushed_at)`,
		[]any{"ingester", uint64(1), uint64(3), uint32(3), uint32(1), uint32(1), ts})
}

func TestRunNow(t *testing.T) {
	bin := build(t)
	st := testenv.ClickHouse(t)
	seed(t, st)
	cmd := exec.Command(bin, "run-now", "-batch-size", "10")
	cmd.Env = env(t, st.Database())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run-now: %v\n%s", err, stderr.String())
	}
	if want := "requests taken 1, verified 1, failed 0, events deleted 2\n"; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("stdout %q, want it to start with %q", stdout.String(), want)
	}
	var status string
	if err := st.Conn().QueryRow(context.Background(), "SELECT status FROM person_deletion_requests FINAL").Scan(&status); err != nil || status != "verified" {
		t.Errorf("status %q (%v), want verified", status, err)
	}

	// A database without the schema: refused, naming the fix.
	cmd = exec.Command(bin, "run-now")
	cmd.Env = env(t, "deleter_unmigrated_"+fmt.Sprint(os.Getpid()))
	t.Cleanup(func() {
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS deleter_unmigrated_"+fmt.Sprint(os.Getpid()))
	})
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ingester migrate") {
		t.Errorf("stale schema: err %v, output %s", err, out)
	}
}

// With an empty schedule the process serves metrics only, and stops
// cleanly on SIGTERM.
func TestRunServesMetricsAndStops(t *testing.T) {
	bin := build(t)
	st := testenv.ClickHouse(t)
	port, err := chlocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "run")
	cmd.Env = env(t, st.Database(), "DELETER_SCHEDULE=", "DELETER_METRICS_ADDR="+addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); strings.Contains(body, "deleter_pending_requests") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics at %s; stderr:\n%s", addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, name := range []string{"deleter_verified_total", "deleter_failed_total", "deleter_events_deleted_total",
		"deleter_last_run_timestamp_seconds", "deleter_last_run_duration_seconds", "deleter_run_errors_total"} {
		if !strings.Contains(body, name) {
			t.Errorf("metric %s missing", name)
		}
	}
	if resp, err := http.Get("http://" + addr + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("readyz: %v %v", resp, err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "scheduled deletion runs are disabled") {
		t.Errorf("log does not say the schedule is disabled:\n%s", stderr.String())
	}
}
