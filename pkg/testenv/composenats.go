package testenv

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ComposeNATS is an embedded server running a shipped NATS configuration
// (deploy/nats/nats.conf): its users and their permissions, with the
// passwords taken from the environment as docker-compose.yml passes them.
type ComposeNATS struct {
	Server *server.Server
	mu     sync.Mutex
	// denied are the permission violations the server reported to each
	// connection: a publish outside a user's permissions is dropped by the
	// server and reported only asynchronously, so a component that logs
	// and carries on (plugin announcements, for one) would hide it.
	denied []string
}

// StartComposeNATS loads conf (a path) with NATS_<USER>_PASSWORD set to
// "pw-<user>" for users, on a free port and a temporary store; it stops
// when the test ends.
func StartComposeNATS(t testing.TB, conf string, users ...string) *ComposeNATS {
	t.Helper()
	for _, u := range users {
		t.Setenv(passwordVar(u), "pw-"+u)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir = "127.0.0.1", -1, 0, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server did not start")
	}
	return &ComposeNATS{Server: srv}
}

func passwordVar(user string) string { return "NATS_" + strings.ToUpper(user) + "_PASSWORD" }

// Connect connects as user (closed when the test ends); the server's
// permission violations on the connection are recorded for Denied.
func (c *ComposeNATS) Connect(t testing.TB, user string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.Server.ClientURL(), nats.UserInfo(user, "pw-"+user), nats.Name(user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if strings.Contains(err.Error(), "Permissions Violation") {
				c.mu.Lock()
				c.denied = append(c.denied, user+": "+err.Error())
				c.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("%s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Denied returns the permission violations reported so far, and forgets
// them.
func (c *ComposeNATS) Denied() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.denied
	c.denied = nil
	return out
}
