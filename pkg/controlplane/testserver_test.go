package controlplane

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startJetStream starts an embedded NATS server with JetStream, storing its
// data in storeDir (t.TempDir() when empty). The server is shut down when the
// test ends; tests that need a restart may shut it down earlier.
func startJetStream(t testing.TB, storeDir string) *server.Server {
	t.Helper()
	if storeDir == "" {
		storeDir = t.TempDir()
	}
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  storeDir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		t.Fatalf("new nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats server not ready within 5s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// connectJetStream opens a new client connection (one per simulated API
// instance) and returns its JetStream handle. The connection is closed when
// the test ends.
func connectJetStream(t testing.TB, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}
