package command

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
)

// Message is one envelope to append: its bytes and its uuid, by which the
// stream deduplicates it (Nats-Msg-Id).
type Message struct {
	UUID string
	Data []byte
}

// Publisher appends messages to the events stream asynchronously, with
// at most a window of them awaiting the stream's acknowledgement per run
// (Batch). Messages published on one connection are stored in the order
// they were sent. It holds no state between runs: many may share it.
type Publisher struct {
	js        jetstream.JetStream
	window    int
	stallWait time.Duration
}

// NewPublisher publishes over js with window messages at most awaiting
// acknowledgement in each run (at least 1). stallWait bounds how long a
// publish waits for room when js has as many acknowledgements pending as
// it allows (across runs); 0 keeps the client's default.
func NewPublisher(js jetstream.JetStream, window int, stallWait time.Duration) *Publisher {
	return &Publisher{js: js, window: max(window, 1), stallWait: stallWait}
}

// Batch is one run of publishes sharing the publisher's window.
type Batch struct {
	p       *Publisher
	ctx     context.Context
	pending []jetstream.PubAckFuture
	acked   int
	last    uint64
}

// Begin starts a run of about n messages (a hint) that waits for
// acknowledgements until ctx is done.
func (p *Publisher) Begin(ctx context.Context, n int) *Batch {
	return &Batch{p: p, ctx: ctx, pending: make([]jetstream.PubAckFuture, 0, min(max(n, 1), p.window))}
}

// Add publishes m on subject, first waiting for the oldest
// acknowledgement when the window is full. An error is that of the
// publish or of an earlier message's acknowledgement.
func (b *Batch) Add(subject string, m Message) error {
	if len(b.pending) == b.p.window {
		if err := b.await(b.pending[0]); err != nil {
			return err
		}
		b.pending = b.pending[1:]
	}
	msg := nats.NewMsg(subject)
	msg.Data = m.Data
	msg.Header.Set(jetstream.MsgIDHeader, m.UUID)
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(stream.Events)}
	if b.p.stallWait > 0 {
		opts = append(opts, jetstream.WithStallWait(b.p.stallWait))
	}
	f, err := b.p.js.PublishMsgAsync(msg, opts...)
	if err != nil {
		return err
	}
	b.pending = append(b.pending, f)
	return nil
}

// Wait returns once every message added is acknowledged, or with the
// first failure.
func (b *Batch) Wait() error {
	for len(b.pending) > 0 {
		if err := b.await(b.pending[0]); err != nil {
			return err
		}
		b.pending = b.pending[1:]
	}
	return nil
}

// Acked is how many messages the stream acknowledged so far.
func (b *Batch) Acked() int { return b.acked }

// Last is the stream sequence of the last message acknowledged.
func (b *Batch) Last() uint64 { return b.last }

func (b *Batch) await(f jetstream.PubAckFuture) error {
	select {
	case ack := <-f.Ok():
		b.acked++
		b.last = ack.Sequence
		return nil
	case err := <-f.Err():
		return err
	case <-b.ctx.Done():
		return fmt.Errorf("waiting for acknowledgements: %w", b.ctx.Err())
	}
}
