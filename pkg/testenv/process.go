package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/stream"
)

// Build compiles the binary of a package (an import path such as
// "github.com/personhub/personhub/cmd/ingester", or "." for the test's own)
// into a temporary folder, so that a test runs the real process.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), path.Base(pkg))
	if pkg == "." {
		bin = filepath.Join(filepath.Dir(bin), "main")
	}
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Process is a binary started by a test; it is killed when the test ends
// if still running.
type Process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	mu     sync.Mutex
	stderr bytes.Buffer
}

// StartProcess runs bin with args and env (added to the test's own).
func StartProcess(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Stderr is what the process has logged so far.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the process to go.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig and waits up to limit for the process to exit (Wait).
func (p *Process) Stop(t testing.TB, sig os.Signal, limit time.Duration) (time.Duration, error) {
	t.Helper()
	p.Signal(sig)
	return p.Wait(t, limit)
}

// Wait waits up to limit for the process to exit. It returns how long that
// took and the process's exit error; the test fails (and the process is
// killed) when it did not exit within limit.
func (p *Process) Wait(t testing.TB, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	select {
	case <-p.done:
		return time.Since(start), p.err
	case <-time.After(limit):
		p.Kill()
		t.Fatalf("%s did not exit within %s; its log:\n%s", filepath.Base(p.cmd.Path), limit, p.Stderr())
		return 0, nil
	}
}

// WaitFor polls cond until it holds, failing the test after limit with
// what was awaited and the last error cond returned.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last error: %v)", what, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitHealthy waits until a binary's ops server answers /healthz on addr:
// by then the binary handles SIGINT and SIGTERM (it installs its handler
// before it serves), so a signal sent after tests its shutdown, not how
// the runtime treats a signal that arrives during start.
func WaitHealthy(t testing.TB, addr string, limit time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	WaitFor(t, limit, addr+"/healthz", func() (bool, error) {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// WaitCommitted waits until the ingester named consumer has committed
// stream sequence seq to store. It detects a hang, not slowness: the test
// fails when no commit moved for limit, however long the whole takes (a
// CI machine under load folds slowly but steadily).
func WaitCommitted(t testing.TB, store *chstore.Store, consumer string, seq uint64, limit time.Duration) {
	t.Helper()
	var at uint64
	deadline := time.Now().Add(limit)
	for {
		got, err := store.LastCommitted(context.Background(), consumer)
		if err == nil && got >= seq {
			return
		}
		if err == nil && got > at {
			at, deadline = got, time.Now().Add(limit)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s committing seq %d: at %d, no commit for %s (last error: %v)", consumer, seq, at, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PublishWorkload publishes messages (as Workload makes them) over three
// projects, commands on their subject, with uuids and timestamps derived
// from their number (first, first+1, ...; a number published again is
// dropped as a duplicate), and returns the last stream sequence.
func PublishWorkload(t testing.TB, js jetstream.JetStream, first int, msgs []Message) uint64 {
	t.Helper()
	ctx := context.Background()
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for j, m := range msgs {
		i := first + j
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint(i))).String()
		ts := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		ack, err := Publish(ctx, js, uint64(1+i%3), m, id, ts)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// PrivateClickHouse is a ClickHouse server of one test's own, which the
// test may kill and restart (the shared server of ClickHouseAddr serves
// every test of the binary and must stay up).
type PrivateClickHouse struct {
	dir       string
	tcp, http int
	log       *os.File
	srv       *chlocal.Server
}

// StartPrivateClickHouse starts a server on free ports with its data under
// a test temp dir, stopped when the test ends.
func StartPrivateClickHouse(t testing.TB) *PrivateClickHouse {
	t.Helper()
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	c := &PrivateClickHouse{dir: dir, log: log}
	for _, p := range []*int{&c.tcp, &c.http} {
		if *p, err = chlocal.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	c.Restart(t)
	t.Cleanup(func() {
		if c.srv != nil {
			c.srv.Stop()
		}
		log.Close()
	})
	return c
}

// Addr is the native protocol address; it stays the same across restarts.
func (c *PrivateClickHouse) Addr() string { return c.srv.Addr() }

// Kill stops the server with SIGKILL.
func (c *PrivateClickHouse) Kill() { c.srv.Kill() }

// Restart starts the server again on the same ports and data.
func (c *PrivateClickHouse) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := chlocal.Start(ctx, c.dir, c.tcp, c.http, c.log)
	if err != nil {
		t.Fatalf("start private clickhouse: %v", err)
	}
	c.srv = srv
}

// Store opens database on the server, migrated; closed when the test ends.
func (c *PrivateClickHouse) Store(t testing.TB, database string) *chstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := chstore.Open(ctx, chstore.Config{Addr: c.Addr(), Database: database})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// Delivered is the last stream sequence the events stream's durable
// consumer name has delivered (the ingester's consumer acknowledges
// nothing: what it delivered beyond the last commit is in hand).
func Delivered(ctx context.Context, js jetstream.JetStream, name string) (uint64, error) {
	c, err := js.Consumer(ctx, stream.Events, name)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.Delivered.Stream, nil
}
