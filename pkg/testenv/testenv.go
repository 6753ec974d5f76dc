// Package testenv starts the real dependencies for integration tests: one
// ClickHouse server per test binary (a fresh database per test) and an
// in-process JetStream server per test. Nothing is mocked; when ClickHouse
// cannot be found the test fails and says how to get it.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
)

var (
	chOnce sync.Once
	chAddr string
	chErr  error
	chSrv  *chlocal.Server
	chDir  string
	dbSeq  atomic.Int64
)

// ClickHouseAddr returns the address of the shared server, starting it on
// first use: $CLICKHOUSE_ADDR when set, otherwise a private child server
// under a temporary folder, stopped by Main.
func ClickHouseAddr(t testing.TB) string {
	t.Helper()
	chOnce.Do(func() {
		if a := os.Getenv("CLICKHOUSE_ADDR"); a != "" {
			chAddr = a
			return
		}
		dir, err := os.MkdirTemp("", "personhub-clickhouse-")
		if err != nil {
			chErr = err
			return
		}
		chDir = dir
		log, err := os.Create(filepath.Join(dir, "server.log"))
		if err != nil {
			chErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var opts []chlocal.Option
		if recordFolder() != "" {
			opts = append(opts, chlocal.WithQueryLog())
		}
		chSrv, chErr = chlocal.Start(ctx, dir, 0, 0, log, opts...)
		if chErr == nil {
			chAddr = chSrv.Addr()
			if f := recordFolder(); f != "" {
				chErr = startRecording(f, chSrv.HTTPAddr())
			}
		}
	})
	if chErr != nil {
		t.Fatalf("integration tests need ClickHouse: %v", chErr)
	}
	return chAddr
}

// ClickHouseHTTPAddr returns the HTTP address of the shared server,
// starting it on first use; it fails the test when the server is
// $CLICKHOUSE_ADDR's, whose HTTP address is not known.
func ClickHouseHTTPAddr(t testing.TB) string {
	t.Helper()
	ClickHouseAddr(t)
	if chSrv == nil {
		t.Fatal("this test needs the tests' own ClickHouse server: unset CLICKHOUSE_ADDR")
	}
	return chSrv.HTTPAddr()
}

// Main runs the tests of a package and stops the shared server after them.
// Use it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
// after run when the tests have ended, before the server stops.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if rec != nil {
		if err := rec.finish(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: recording the statements for test/portability: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	if chSrv != nil {
		if exited, err := chSrv.Exited(); exited {
			reportDeadServer(err)
			if code == 0 {
				code = 1
			}
		}
		chSrv.Stop()
		os.RemoveAll(chDir)
	}
	os.Exit(code)
}

// reportDeadServer says that the shared server exited while the tests ran,
// and how, with the end of its log: without it a crash, an abort or the
// OOM killer shows only as "connection refused" in every later test.
func reportDeadServer(err error) {
	fmt.Fprintf(os.Stderr, "testenv: the tests' ClickHouse server exited during the tests: %v\n", err)
	b, rerr := os.ReadFile(filepath.Join(chDir, "server.log"))
	if rerr != nil {
		fmt.Fprintf(os.Stderr, "testenv: its log: %v\n", rerr)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	fmt.Fprintf(os.Stderr, "testenv: the last %d lines of its log:\n%s\n", len(lines), strings.Join(lines, "\n"))
}

// ClickHouse returns a store on a new, migrated database, dropped when the
// test ends.
func ClickHouse(t testing.TB) *chstore.Store {
	t.Helper()
	addr := ClickHouseAddr(t)
	name := fmt.Sprintf("test_%d_%d_%s", os.Getpid(), dbSeq.Add(1), sanitize(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := chstore.Open(ctx, chstore.Config{Addr: addr, Database: name})
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		if rec != nil {
			if err := rec.saveDatabase(name); err != nil {
				t.Errorf("recording %s for test/portability: %v", name, err)
			}
		}
		_ = st.Conn().Exec(context.Background(), "DROP DATABASE IF EXISTS "+name)
		st.Close()
	})
	return st
}

// Reopen returns another store on the database of st (made by ClickHouse
// on the shared server), with its own connections, as a second process
// would have: an ingester beside an API in one test gets one, so the
// API's reads cannot hold back its writes.
func Reopen(t testing.TB, st *chstore.Store) *chstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	again, err := chstore.Open(ctx, chstore.Config{Addr: ClickHouseAddr(t), Database: st.Database()})
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { again.Close() })
	return again
}

// FailureLog is a logger for a component under test whose warnings and
// errors are printed with the test's output if the test fails (and
// dropped otherwise): a 503 or 500 in a failed run then says its cause.
func FailureLog(t testing.TB) *slog.Logger {
	t.Helper()
	w := &LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("warnings and errors logged:\n%s", w.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// LockedBuffer is a bytes.Buffer that one goroutine may read while others
// write (a log sink, a child process's output).
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

// NATS is a running in-process JetStream server with a client connection.
type NATS struct {
	Server *server.Server
	Conn   *nats.Conn
	JS     jetstream.JetStream
	Dir    string
	port   int
}

// StartNATS starts a JetStream server on a free port with its store under a
// test temp dir (or dir, when given, to restart on the same data).
func StartNATS(t testing.TB, dir string) *NATS {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	n := &NATS{Dir: dir, port: -1}
	n.StartServer(t)
	n.Conn, n.JS = connect(t, n.Server.ClientURL())
	t.Cleanup(n.Stop)
	return n
}

// connect connects a client that reconnects forever to url (a
// comma-separated list of servers).
func connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, js
}

// StartServer starts the server (again, after ShutdownServer) on the same
// port and store folder, as an operator's restart would; clients
// reconnect.
func (n *NATS) StartServer(t testing.TB) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.Dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server did not start")
	}
	n.Server = srv
	n.port = srv.Addr().(*net.TCPAddr).Port
}

// ShutdownServer stops the server, leaving the client to reconnect.
func (n *NATS) ShutdownServer() {
	n.Server.Shutdown()
	n.Server.WaitForShutdown()
}

// Stop closes the client and shuts the server down; safe to call twice.
func (n *NATS) Stop() {
	n.Conn.Close()
	n.ShutdownServer()
}
