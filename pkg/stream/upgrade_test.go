package stream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestUpgradeAddsCommandSubjectOnly: the API's start adds commands.> to an
// EVENTS stream made before commands had their own subject, keeps every
// other setting, and creates no stream when there is none.
func TestUpgradeAddsCommandSubjectOnly(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	if err := stream.Upgrade(ctx, n.JS, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n.JS.Stream(ctx, stream.Events); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Upgrade created the stream (or failed): %v", err)
	}
	old := jetstream.StreamConfig{Name: stream.Events, Subjects: []string{stream.EventsPrefix + ">"}, Storage: jetstream.FileStorage,
		Duplicates: 3 * time.Minute, MaxBytes: 1 << 30}
	if _, err := n.JS.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := stream.Upgrade(ctx, n.JS, nil); err != nil {
		t.Fatal(err)
	}
	s, err := n.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	got := s.CachedInfo().Config
	if !slices.Contains(got.Subjects, "commands.>") || got.Duplicates != old.Duplicates || got.MaxBytes != old.MaxBytes {
		t.Fatalf("after Upgrade: subjects %v, duplicates %v, max bytes %d", got.Subjects, got.Duplicates, got.MaxBytes)
	}
	if _, err := stream.PublishCommand(ctx, n.JS, 1, "00000000-0000-0000-0000-000000000001", []byte(`{}`)); err != nil {
		t.Fatalf("a command is not accepted after Upgrade: %v", err)
	}
}
