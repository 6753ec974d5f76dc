package command_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// stored returns the messages of the events stream, in order, checking
// that each one's Nats-Msg-Id is its uuid.
func stored(t *testing.T, js jetstream.JetStream) (subjects []string, events []event.Event) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(m.Data)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		if m.Header.Get(jetstream.MsgIDHeader) != ev.UUID.String() {
			t.Fatalf("seq %d: msg id %s, uuid %s", seq, m.Header.Get(jetstream.MsgIDHeader), ev.UUID)
		}
		subjects, events = append(subjects, m.Subject), append(events, ev)
	}
	return subjects, events
}

func startStreams(t *testing.T) *testenv.NATS {
	t.Helper()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPublishLines(t *testing.T) {
	n := startStreams(t)
	ctx := context.Background()
	lines := `{"event":"a","distinct_id":"1"}

{"event":"b","distinct_id":"2"}
{"event":"c","distinct_id":"3"}
{"event":"d","distinct_id":"4"}
{"event":"e","distinct_id":"5"}
`
	// A window of 2 under 5 events: the window slides.
	if got, err := command.PublishLines(ctx, n.JS, 7, strings.NewReader(lines), 2); err != nil || got != 5 {
		t.Fatalf("published %d, %v; want 5", got, err)
	}
	got, err := command.PublishLines(ctx, n.JS, 7, strings.NewReader(`{"event":"f","distinct_id":"6"}`+"\nnot json\n"+`{"event":"g","distinct_id":"7"}`), 2)
	if got != 1 || err == nil || !strings.HasPrefix(err.Error(), "line 2: ") {
		t.Fatalf("a bad second line: published %d, %v", got, err)
	}
	subjects, events := stored(t, n.JS)
	var names []string
	for i, ev := range events {
		if subjects[i] != "events.7" {
			t.Fatalf("subject %s", subjects[i])
		}
		names = append(names, ev.Event)
	}
	if strings.Join(names, "") != "abcdef" {
		t.Fatalf("stored %v", names)
	}
}

func TestAppend(t *testing.T) {
	n := startStreams(t)
	ctx := context.Background()
	actor := &event.Actor{KeyID: "k", KeyLabel: "ci", OrganizationID: "o"}
	seq, err := command.Append(ctx, n.JS, 7, actor, command.PublishTimeout,
		command.SetProperties("a", map[string]any{"x": 1}), command.DeleteProperty("a", "x"), command.ResetDistinctID("a"))
	if err != nil || seq != 3 {
		t.Fatalf("appended to %d, %v; want 3", seq, err)
	}
	subjects, events := stored(t, n.JS)
	for i, want := range []string{event.Set, event.DeletePersonProperty, event.ResetPersonDistinctID} {
		if subjects[i] != "commands.7" || events[i].Event != want || events[i].Reserved() == "" {
			t.Fatalf("%d: %s %s (reserved: %q)", i, subjects[i], events[i].Event, events[i].Reserved())
		}
	}
}

func TestAppendSaysHowFarItGot(t *testing.T) {
	n := testenv.StartNATS(t, "") // no stream: nothing acknowledges
	_, err := command.Append(context.Background(), n.JS, 7, nil, command.PublishTimeout,
		command.ResetDistinctID("a"), command.ResetDistinctID("b"))
	var appendErr *command.AppendError
	if !errors.As(err, &appendErr) || appendErr.Appended != 0 || appendErr.Total != 2 || appendErr.Event != event.ResetPersonDistinctID {
		t.Fatalf("%#v", err)
	}
}
