package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is an in-process JetStream cluster: servers joined by cluster
// routes on loopback ports, each with its own store folder, and one
// client connection that knows every server (it reconnects to another
// when its server goes). Streams and buckets made through JS with
// replicas > 1 are spread over the servers, as on a real cluster.
type Cluster struct {
	Conn *nats.Conn
	JS   jetstream.JetStream

	opts    []*server.Options
	servers []*server.Server
}

// StartCluster starts n JetStream servers forming one cluster and waits
// until it has a meta leader (it can create streams), stopped when the
// test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	// Routes name every server's cluster port, so each port is chosen
	// before any server starts (and kept across a restart).
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	c := &Cluster{servers: make([]*server.Server, n)}
	for i := range n {
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i)),
			// Bounded so that three servers on one machine do not each
			// claim most of its memory and disk.
			JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30,
			Cluster: server.ClusterOpts{Name: "personhub", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
			NoLog:   true, NoSigs: true,
		})
	}
	t.Cleanup(c.stop)
	for i := range n {
		c.StartServer(t, i)
	}
	var urls []string
	for _, s := range c.servers {
		urls = append(urls, s.ClientURL())
	}
	c.Conn, c.JS = connect(t, strings.Join(urls, ","))
	WaitFor(t, 30*time.Second, "the JetStream cluster electing a meta leader", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.JS.AccountInfo(ctx)
		return err == nil, err
	})
	return c
}

// freePort returns a loopback TCP port free at the time of the call.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartServer starts server i (again, after Shutdown) on its ports and
// store folder.
func (c *Cluster) StartServer(t testing.TB, i int) {
	t.Helper()
	s, err := server.NewServer(c.opts[i])
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats server %s did not start", c.opts[i].ServerName)
	}
	// A restart keeps the client port, which the client's URL list names.
	c.opts[i].Port = s.Addr().(*net.TCPAddr).Port
	c.servers[i] = s
}

// Shutdown stops server i, as losing a node would; the others carry on.
func (c *Cluster) Shutdown(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// Name is the server name of server i (as stream infos report leaders).
func (c *Cluster) Name(i int) string { return c.opts[i].ServerName }

// Server returns server i, nil while it is shut down.
func (c *Cluster) Server(i int) *server.Server { return c.servers[i] }

// StreamLeader returns the index of the server leading a stream, waiting
// for the stream to have one.
func (c *Cluster) StreamLeader(t testing.TB, name string) int {
	t.Helper()
	leader := -1
	WaitFor(t, 30*time.Second, "a leader of stream "+name, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := c.JS.Stream(ctx, name)
		if err != nil {
			return false, err
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return false, errors.New("no leader")
		}
		for i, o := range c.opts {
			if o.ServerName == info.Cluster.Leader && c.servers[i] != nil {
				leader = i
				return true, nil
			}
		}
		return false, fmt.Errorf("leader %q is not a running server", info.Cluster.Leader)
	})
	return leader
}

// PublishRetrying calls publish until the cluster acknowledges, for up
// to limit: while a stream elects a new leader publishes fail or time
// out. publish must set a Nats-Msg-Id (stream.Publish and testenv.Publish
// do), so a message stored whose acknowledgement was lost is not stored
// twice: the retry is acknowledged as a duplicate with the first one's
// sequence.
func PublishRetrying(ctx context.Context, limit time.Duration, publish func(context.Context) (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
	deadline := time.Now().Add(limit)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ack, err := publish(actx)
		cancel()
		if err == nil {
			return ack, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL returns the client URLs of the running servers, comma-separated.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.servers {
		if s != nil {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

func (c *Cluster) stop() {
	if c.Conn != nil {
		c.Conn.Close()
	}
	for i := range c.servers {
		c.Shutdown(i)
	}
}
