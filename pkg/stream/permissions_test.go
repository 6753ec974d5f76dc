package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestComposeNATSPermissions runs the NATS configuration docker-compose.yml
// ships (deploy/nats/nats.conf) and checks that only the api user can
// publish commands, while each user can do its own work.
func TestComposeNATSPermissions(t *testing.T) {
	n := testenv.StartComposeNATS(t, "../../deploy/nats/nats.conf", "api", "ingester", "capture")
	connect := func(user string) jetstream.JetStream {
		t.Helper()
		_, js := n.Connect(t, user)
		return js
	}
	ctx := context.Background()
	refused := func(who string, js jetstream.JetStream, publish func(context.Context, jetstream.JetStream, uint64, string, []byte) (*jetstream.PubAck, error)) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := publish(pctx, js, 1, "forged-"+who, []byte(`{}`)); err == nil {
			t.Fatalf("%s published a command", who)
		}
	}

	ing := connect("ingester")
	if err := stream.Ensure(ctx, ing, stream.Config{}); err != nil {
		t.Fatalf("ingester creates the streams: %v", err)
	}
	kv, err := progress.Open(ctx, ing)
	if err != nil {
		t.Fatalf("ingester creates the progress bucket: %v", err)
	}
	if err := progress.Publish(ctx, kv, "ingester", 1); err != nil {
		t.Fatalf("ingester records progress: %v", err)
	}
	if _, err := stream.Publish(ctx, ing, 1, "from-ingester", []byte(`{}`)); err != nil {
		t.Fatalf("ingester publish: %v", err)
	}
	refused("ingester", ing, stream.PublishCommand)

	capture := connect("capture")
	if _, err := stream.Publish(ctx, capture, 1, "from-capture", []byte(`{}`)); err != nil {
		t.Fatalf("capture publishes events: %v", err)
	}
	refused("capture", capture, stream.PublishCommand)
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := capture.DeleteStream(dctx, stream.Events); err == nil {
		t.Fatal("capture deleted the events stream")
	}

	api := connect("api")
	if _, err := stream.PublishCommand(ctx, api, 1, "from-api", []byte(`{}`)); err != nil {
		t.Fatalf("api publishes commands: %v", err)
	}
	akv, err := progress.Open(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	w, err := progress.Watch(ctx, akv, "ingester")
	if err != nil {
		t.Fatalf("api watches progress: %v", err)
	}
	defer w.Stop()
	if err := w.Wait(ctx, 1, 5*time.Second); err != nil {
		t.Fatalf("api reads progress: %v", err)
	}

	// The ingester consumes both subjects and acknowledges.
	cons, err := ing.CreateConsumer(ctx, stream.Events, jetstream.ConsumerConfig{Durable: "check", AckPolicy: jetstream.AckAllPolicy, FilterSubjects: stream.EventsSubjects})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	var last jetstream.Msg
	for m := range batch.Messages() {
		subjects, last = append(subjects, m.Subject()), m
	}
	if len(subjects) != 3 || subjects[2] != "commands.1" {
		t.Fatalf("stream holds %v, want two events and the api's command", subjects)
	}
	if err := last.DoubleAck(ctx); err != nil {
		t.Fatalf("ingester acks: %v", err)
	}
	dlq := nats.NewMsg(stream.DeadLetterPrefix + "events.1")
	if _, err := ing.PublishMsg(ctx, dlq); err != nil {
		t.Fatalf("ingester dead-letters: %v", err)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		t.Fatal(err)
	}
}
