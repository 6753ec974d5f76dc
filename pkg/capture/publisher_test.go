package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

type projects map[string]controlplane.Project

func (p projects) ProjectByToken(token string) (controlplane.Project, bool) {
	pr, ok := p[token]
	return pr, ok
}

func newPublisher(t *testing.T, cfg Config) (*Publisher, *testenv.NATS) {
	t.Helper()
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(cfg, n.JS, projects{"phc_7": {ID: 7, APIToken: "phc_7"}},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return p, n
}

func decodeString(t *testing.T, body string) *Batch {
	t.Helper()
	b, err := Decode(Request{Body: strings.NewReader(body)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamEvents returns the parsed messages of the EVENTS stream, checking
// subject and Nats-Msg-Id.
func streamEvents(t *testing.T, js jetstream.JetStream) []event.Event {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	var out []event.Event
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := event.Parse(m.Data)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		if m.Subject != "events.7" || m.Header.Get(jetstream.MsgIDHeader) != ev.UUID.String() {
			t.Fatalf("seq %d: subject %s, msg id %s, uuid %s", seq, m.Subject, m.Header.Get(jetstream.MsgIDHeader), ev.UUID)
		}
		out = append(out, ev)
	}
	return out
}

func TestCapturePublishesInOrder(t *testing.T) {
	p, n := newPublisher(t, Config{Window: 7})
	var b strings.Builder
	b.WriteString(`{"api_key":"phc_7","batch":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"event":"e%d","distinct_id":"u%d","$set":{"n":%d}}`, i, i%3, i)
	}
	b.WriteString("]}")
	got, err := p.Capture(context.Background(), decodeString(t, b.String()), time.Now())
	if err != nil || got != 100 {
		t.Fatalf("%d %v", got, err)
	}
	evs := streamEvents(t, n.JS)
	if len(evs) != 100 {
		t.Fatalf("%d messages", len(evs))
	}
	for i, ev := range evs {
		if ev.Event != fmt.Sprintf("e%d", i) || ev.Set["n"].(fmt.Stringer).String() != fmt.Sprint(i) {
			t.Fatalf("message %d: %+v", i, ev)
		}
	}

	// A retried request (same uuids) is deduplicated by the stream.
	retry := `{"api_key":"phc_7","batch":[{"event":"r","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"},{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"r","distinct_id":"a"}]}`
	for i := 0; i < 2; i++ {
		if _, err := p.Capture(context.Background(), decodeString(t, retry), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if evs := streamEvents(t, n.JS); len(evs) != 102 {
		t.Fatalf("after a retried request: %d messages", len(evs))
	}
}

func TestCaptureAllOrNothing(t *testing.T) {
	p, n := newPublisher(t, Config{})
	ctx := context.Background()
	_, err := p.Capture(ctx, decodeString(t, `{"api_key":"phc_7","batch":[{"event":"e","distinct_id":"a"},{"event":"e"}]}`), time.Now())
	var e *Error
	if !errors.As(err, &e) || e.Kind != Malformed || e.Index != 1 {
		t.Fatalf("%v", err)
	}
	_, err = p.Capture(ctx, decodeString(t, `{"api_key":"phc_unknown","batch":[{"event":"e","distinct_id":"a"}]}`), time.Now())
	if !errors.As(err, &e) || e.Kind != Unauthorized {
		t.Fatalf("%v", err)
	}
	if evs := streamEvents(t, n.JS); len(evs) != 0 {
		t.Fatalf("refused requests published %d events", len(evs))
	}
}

func TestCaptureUnavailable(t *testing.T) {
	p, n := newPublisher(t, Config{PublishTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	// No stream: JetStream refuses the publish.
	if err := n.JS.DeleteStream(ctx, stream.Events); err != nil {
		t.Fatal(err)
	}
	one := `{"api_key":"phc_7","event":"e","distinct_id":"a"}`
	_, err := p.Capture(ctx, decodeString(t, one), time.Now())
	var e *Error
	if !errors.As(err, &e) || e.Kind != Unavailable {
		t.Fatalf("no stream: %v", err)
	}
	// The server gone: the acknowledgement never comes.
	n.Server.Shutdown()
	start := time.Now()
	_, err = p.Capture(ctx, decodeString(t, one), time.Now())
	if !errors.As(err, &e) || e.Kind != Unavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("server down: %v after %v", err, time.Since(start))
	}
}

// TestCaptureRecyclesBuffers: requests decoded and captured concurrently
// through the publisher's pooled buffers (bodies plain and gzip, of
// varying sizes, refused requests among them, which give their buffers
// back early) store exactly their own events, each intact: no request
// reads or publishes bytes another has written into a recycled buffer.
func TestCaptureRecyclesBuffers(t *testing.T) {
	p, n := newPublisher(t, Config{Window: 16})
	ctx := context.Background()
	const workers, requests = 6, 15
	want := map[string]string{} // event name -> its payload
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < requests; r++ {
				var b strings.Builder
				b.WriteString(`{"api_key":"phc_7","batch":[`)
				size := 1 + (w*7+r*13)%40
				for i := 0; i < size; i++ {
					if i > 0 {
						b.WriteString(",")
					}
					name := fmt.Sprintf("w%d-r%d-i%d", w, r, i)
					payload := strings.Repeat(string(rune('a'+(w+r+i)%26)), 1+(w*31+r*17+i*5)%300)
					fmt.Fprintf(&b, `{"event":%q,"distinct_id":"u%d","$set":{"payload":%q}}`, name, w, payload)
					if r%5 != 4 {
						mu.Lock()
						want[name] = payload
						mu.Unlock()
					}
				}
				if r%5 == 4 { // refused whole: an event without a distinct id
					b.WriteString(`,{"event":"refused"}`)
				}
				b.WriteString("]}")
				body := []byte(b.String())
				if r%2 == 1 {
					var z bytes.Buffer
					zw := gzip.NewWriter(&z)
					_, _ = zw.Write(body)
					_ = zw.Close()
					body = z.Bytes()
				}
				batch, err := p.Decode(Request{Body: bytes.NewReader(body), Length: int64(len(body))})
				if err != nil {
					errs <- err
					return
				}
				_, err = p.Capture(ctx, batch, time.Now())
				if (err != nil) != (r%5 == 4) {
					errs <- fmt.Errorf("worker %d request %d: %v", w, r, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs := streamEvents(t, n.JS)
	if len(evs) != len(want) {
		t.Errorf("%d events stored, %d captured", len(evs), len(want))
	}
	for _, ev := range evs {
		payload, ok := want[ev.Event]
		if got := fmt.Sprint(ev.Set["payload"]); !ok || got != payload {
			t.Fatalf("event %q stored with payload %q, captured with %q", ev.Event, got, payload)
		}
		delete(want, ev.Event)
	}
}
