// Package reference computes the state a run under faults must end in: the
// same stream folded by an uninterrupted in-process ingester. It is apart
// from testenv because pkg/ingest's own tests use testenv.
package reference

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/testenv"
)

// Run folds the stream up to seq, uninterrupted, into a new database of
// the shared test server under its own consumer name, and returns it.
func Run(t testing.TB, js jetstream.JetStream, consumer string, seq uint64) *chstore.Store {
	t.Helper()
	ref := testenv.ClickHouse(t)
	Fold(t, js, ref, consumer, seq)
	return ref
}

// Fold folds the stream up to seq into store with an in-process ingester
// and stops it.
func Fold(t testing.TB, js jetstream.JetStream, store *chstore.Store, consumer string, seq uint64) {
	t.Helper()
	cfg := ingest.DefaultConfig()
	cfg.Consumer = consumer
	cfg.BatchWait = 20 * time.Millisecond
	cfg.GrowFor = 0 // the plain fold: batches of BatchSize
	ing, err := ingest.New(cfg, js, store, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ing.Run(ctx) }()
	testenv.WaitCommitted(t, store, consumer, seq, 2*time.Minute)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
