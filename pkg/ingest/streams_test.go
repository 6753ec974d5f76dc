package ingest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestStartKeepsStreamSettings: an operator's streams and progress bucket,
// made before commands had their own subject and tuned since, keep every
// setting across an ingester start; only the missing contract subjects are
// added, and commands on them are folded.
func TestStartKeepsStreamSettings(t *testing.T) {
	n := testenv.StartNATS(t, "")
	ctx := context.Background()
	events := jetstream.StreamConfig{
		Name: stream.Events, Subjects: []string{"events.>"}, Storage: jetstream.FileStorage,
		Duplicates: 2 * time.Minute, MaxBytes: 1 << 30, Discard: jetstream.DiscardNew, MaxMsgSize: 1 << 20,
		Description: "tuned by the operator",
	}
	dlq := jetstream.StreamConfig{Name: stream.DeadLetter, Subjects: []string{"dlq.events.>"}, Storage: jetstream.FileStorage, MaxAge: time.Hour}
	before := map[string]jetstream.StreamConfig{}
	for _, cfg := range []jetstream.StreamConfig{events, dlq} {
		s, err := n.JS.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		before[cfg.Name] = s.CachedInfo().Config
	}
	if _, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: progress.Bucket, History: 5, Description: "tuned"}); err != nil {
		t.Fatal(err)
	}
	publishMessages(t, n.JS, 3, []testenv.Message{
		{Body: `{"event":"e","distinct_id":"a"}`},
		{Body: `{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$actor":{"key_id":"k"}}}`, Command: true},
	})
	cfg := testConfig("ingester")
	// The flags' values create missing streams only.
	cfg.Streams = stream.Config{DuplicateWindow: time.Hour, MaxBytes: 1 << 20, DeadLetterMaxAge: 24 * time.Hour}
	store := testenv.ClickHouse(t)
	runUntil(t, cfg, n.JS, store, 2)

	check := func(name string, subjects []string) {
		t.Helper()
		want := before[name]
		s, err := n.JS.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got := s.CachedInfo().Config
		if !slices.Equal(got.Subjects, subjects) || got.Duplicates != want.Duplicates || got.MaxBytes != want.MaxBytes ||
			got.Discard != want.Discard || got.MaxAge != want.MaxAge || got.Description != want.Description || got.MaxMsgSize != want.MaxMsgSize || got.Replicas != want.Replicas {
			t.Fatalf("%s after an ingester start: %+v", name, got)
		}
	}
	check(stream.Events, []string{"events.>", "commands.>"})
	check(stream.DeadLetter, []string{"dlq.events.>", "dlq.commands.>"})
	kv, err := n.JS.KeyValue(ctx, progress.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 5 {
		t.Fatalf("progress bucket history %d, want the operator's 5", st.History())
	}
	var deleted uint8
	if err := store.Conn().QueryRow(ctx, "SELECT is_deleted FROM persons FINAL WHERE project_id = 3 AND id = 1").Scan(&deleted); err != nil || deleted != 1 {
		t.Fatalf("the command on the added subject was not folded: %d %v", deleted, err)
	}
}

// TestStartCreatesMissingStreams: missing streams are made from the
// configuration.
func TestStartCreatesMissingStreams(t *testing.T) {
	n := testenv.StartNATS(t, "")
	ctx := context.Background()
	want := stream.Config{DuplicateWindow: 3 * time.Minute, MaxBytes: 1 << 30, DeadLetterMaxAge: 48 * time.Hour}
	if err := stream.Ensure(ctx, n.JS, want); err != nil {
		t.Fatal(err)
	}
	s, err := n.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	got := s.CachedInfo().Config
	if got.Duplicates != want.DuplicateWindow || got.MaxBytes != want.MaxBytes || got.Discard != jetstream.DiscardNew ||
		!slices.Equal(got.Subjects, stream.EventsSubjects) || got.MaxMsgSize != 1<<20 {
		t.Fatalf("created events stream: %+v", got)
	}
	d, err := n.JS.Stream(ctx, stream.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if d.CachedInfo().Config.MaxAge != want.DeadLetterMaxAge {
		t.Fatalf("created dead-letter stream: %+v", d.CachedInfo().Config)
	}
	// Ensure again with other values binds and changes nothing.
	if err := stream.Ensure(ctx, n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	s, _ = n.JS.Stream(ctx, stream.Events)
	if s.CachedInfo().Config.Duplicates != want.DuplicateWindow {
		t.Fatalf("a second Ensure changed the stream: %+v", s.CachedInfo().Config)
	}
}
