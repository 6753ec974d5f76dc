package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/stream"
)

// gapError reports that the consumer delivered a message past one it never
// delivered: the client can lose messages in flight (a connection cut, a
// reconnect, a full subscription buffer: "slow consumer, messages
// dropped"), and JetStream never delivers them again to a consumer that
// acknowledges nothing. Folding past the gap would lose those events for
// good, or fold them out of order.
type gapError struct{ want, got uint64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("consumer delivered delivery seq %d, expected %d", e.got, e.want)
}

// stallError reports that no message came for StallWait though the last
// one delivered said the stream held more for the consumer: the messages
// in between were lost in the client, and with none after them there is
// no hole for the delivery sequence to show (gapError).
type stallError struct{}

func (*stallError) Error() string { return "no message delivered though the stream holds more" }

// subscribe (re)creates the consumer from the last commit and starts
// pulling from it.
func (i *Ingester) subscribe(ctx context.Context) (jetstream.MessagesContext, error) {
	cons, err := i.consumer(ctx)
	if err != nil {
		return nil, err
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(2 * i.cfg.BatchSize))
	if err != nil {
		return nil, err
	}
	// The first message of a new consumer is the first the stream holds
	// for it from the start sequence, whatever its sequence.
	i.next, i.nextDelivery, i.behind = 0, 0, false
	i.cons, i.served = cons, 0
	return iter, nil
}

// resubscribe is subscribe retried until it succeeds or ctx ends: a gap is
// often the sign of a NATS server that is restarting.
func (i *Ingester) resubscribe(ctx context.Context) (jetstream.MessagesContext, error) {
	for attempt := 0; ; attempt++ {
		iter, err := i.subscribe(ctx)
		if err == nil {
			return iter, nil
		}
		i.log.Warn("cannot recreate the consumer", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff(attempt)):
		}
	}
}

// consumer (re)creates the durable consumer to deliver from the first
// sequence after the last committed batch. ClickHouse's commit markers,
// not the consumer's acknowledgements, are the record of progress: after a
// crash the consumer would hold the dead process's unacknowledged messages
// until their ack wait expired and deliver newer ones first, out of order.
// Recreating it keeps the stream order. Hence one running ingester per
// consumer name.
func (i *Ingester) consumer(ctx context.Context) (jetstream.Consumer, error) {
	err := i.js.DeleteConsumer(ctx, stream.Events, i.cfg.Consumer)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("reset consumer %s: %w", i.cfg.Consumer, err)
	}
	from := i.folder.Committed + 1
	legacy := false
	if n := i.cfg.Streams.Partitions; n > 1 {
		s, err := i.js.Stream(ctx, stream.Events)
		if err == nil {
			legacy, err = stream.LegacyFrom(ctx, s, from)
		}
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", i.cfg.Consumer, err)
		}
	}
	cfg := jetstream.ConsumerConfig{
		Durable:     i.cfg.Consumer,
		Description: "folds events into persons in ClickHouse; recreated at every start from the last commit",
		// Nothing is acknowledged: the commit marker is the progress,
		// and the consumer is recreated from it at every start and
		// after a lost delivery (collect). With acknowledgements the
		// server kept every message in flight in a pending set, wrote
		// that set out on every flush and could redeliver: 25-30% of
		// the NATS server's CPU in the bench's ingest
		// (docs/performance-history.md), for redeliveries the ingester drops as copies. The
		// client's pull buffer (PullMaxMessages) bounds what is in
		// flight beyond the batch in hand.
		AckPolicy: jetstream.AckNonePolicy,
		// Events and commands: one stream, one order; of this
		// partition only (stream.PartitionFilter).
		FilterSubjects: stream.PartitionFilter(i.cfg.Partition, i.cfg.Streams.Partitions, legacy),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if i.folder.Committed > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	cons, err := i.js.CreateConsumer(ctx, stream.Events, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", i.cfg.Consumer, err)
	}
	return cons, nil
}

// collect gathers up to BatchSize messages, waiting at most BatchWait after
// the first one, and not at all once the stream has nothing more.
//
// It keeps the stream's order without holes: a message must have the
// consumer (delivery) sequence after the previous one's, the server
// counting every delivery, redeliveries included. Stream sequences have
// holes of their own once the consumer reads one partition of the stream
// (the other partitions' messages), so they only order: a copy of a
// message already in hand (a redelivery, an older stream sequence) is
// dropped; a message past a hole in the delivery sequence ends the batch
// with a gapError, and is left for the new consumer to deliver again.
//
// A batch is extended (batch given) beyond BatchSize until it holds the
// message of sequence through: those messages are in the stream, as a
// crashed batch folded them, so it waits for them as long as ctx allows.
func (i *Ingester) collect(ctx context.Context, iter jetstream.MessagesContext, batch []*pending, through uint64) ([]*pending, error) {
	// The wait for the batch to fill is one context per batch, not a
	// NextMaxWait per message: that made the client start and stop a
	// timer for every message (a tenth of the ingester's CPU in collect).
	var deadline time.Time
	var waitOpts []jetstream.NextOpt
	wait, stopWait := ctx, context.CancelFunc(func() {})
	defer func() { stopWait() }()
	startWait := func() {
		deadline = time.Now().Add(i.cfg.BatchWait)
		stopWait()
		wait, stopWait = context.WithDeadline(ctx, deadline)
		waitOpts = []jetstream.NextOpt{jetstream.NextContext(wait)}
	}
	if len(batch) > 0 {
		startWait()
	}
	block := []jetstream.NextOpt{jetstream.NextContext(ctx)}
	short := func() bool { return len(batch) > 0 && batch[len(batch)-1].seq < through }
	for len(batch) < i.cfg.BatchSize || short() {
		opts, waiting, stopCaught := block, false, context.CancelFunc(nil)
		if len(batch) > 0 && !short() && i.laneWaiting(batch[len(batch)-1].seq) {
			// A command the write lane may take came: it is folded at
			// this batch's end (lane.go), so end it now.
			break
		}
		if len(batch) > 0 && !short() {
			if !time.Now().Before(deadline) || ctx.Err() != nil {
				break
			}
			opts, waiting = waitOpts, true
			if batch[len(batch)-1].last {
				// Caught up: take what the client has buffered, then
				// flush at once, so a write is visible in milliseconds.
				// (Rare under load, so a timer of its own is cheap.)
				var caught context.Context
				caught, stopCaught = context.WithTimeout(wait, time.Millisecond)
				opts = []jetstream.NextOpt{jetstream.NextContext(caught)}
			}
		}
		var stalled context.Context
		if !waiting {
			// A blocking wait is bounded: with the stream holding more
			// for the consumer, those messages may be lost; caught up,
			// a burst after the last message may have been (lostAtTail).
			stalled, stopCaught = context.WithTimeout(ctx, i.cfg.StallWait)
			opts = []jetstream.NextOpt{jetstream.NextContext(stalled)}
		}
		msg, err := iter.Next(opts...)
		if stopCaught != nil {
			stopCaught()
		}
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) ||
				waiting && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
				break
			}
			if stalled != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if i.behind || i.lostAtTail(ctx) {
					return batch, &stallError{}
				}
				continue
			}
			return batch, err
		}
		if i.dropDelivery != nil {
			if meta, err := msg.Metadata(); err == nil && i.dropDelivery(meta.Sequence.Stream) {
				continue
			}
		}
		p := i.decode(msg)
		if p.seq != 0 {
			gap := i.nextDelivery != 0 && p.delivery > i.nextDelivery
			if !gap {
				i.nextDelivery = p.delivery + 1
			}
			switch {
			case gap:
				return batch, &gapError{want: i.nextDelivery, got: p.delivery}
			case i.next != 0 && p.seq < i.next:
				continue
			}
			i.next = p.seq + 1
		}
		if len(batch) == 0 {
			startWait()
		}
		batch = append(batch, p)
	}
	return batch, nil
}

// lostAtTail reports whether the consumer delivered messages that this
// ingester has not received for two StallWaits in a row. A caught-up
// ingester (the last message said the stream held nothing more) whose
// client then drops a whole burst sees neither a hole nor a pending
// count, and JetStream never delivers the burst again: only the
// consumer's own count of deliveries shows it. A message that the server
// counted a moment before the first check is still in flight then, hence
// the second. An unanswered question (the consumer's leader away) is no
// answer: the heartbeats cover a lost server.
func (i *Ingester) lostAtTail(ctx context.Context) bool {
	if i.cons == nil {
		return false
	}
	ask, cancel := context.WithTimeout(ctx, i.cfg.StallWait)
	defer cancel()
	info, err := i.cons.Info(ask)
	if err != nil {
		return false
	}
	received := uint64(0)
	if i.nextDelivery > 0 {
		received = i.nextDelivery - 1
	}
	lost := i.served > received
	i.served = 0
	if info.Delivered.Consumer > received {
		i.served = info.Delivered.Consumer
	}
	return lost
}

// ackInfo is what decode reads of a message's JetStream metadata.
type ackInfo struct {
	stream, consumer, delivered, pending uint64
}

// ackMeta reads ackInfo from a JetStream reply subject as the client's
// Msg.Metadata does (its parser: `$JS.ACK.<stream>.<consumer>.<delivered>.
// <stream seq>.<consumer seq>.<time>.<pending>`, 9 tokens, or 11 and more
// with a domain and an account hash after `$JS.ACK.`), without
// allocating: Metadata allocated its result and was a twentieth of the
// ingester's pull (docs/performance-history.md). ok is false for anything
// else; the caller then asks Metadata, for its error. FuzzAckMeta holds
// the two to the same numbers.
func ackMeta(reply string) (m ackInfo, ok bool) {
	const prefix = "$JS.ACK."
	if !strings.HasPrefix(reply, prefix) {
		return m, false
	}
	rest := reply[len(prefix):]
	switch n := strings.Count(reply, ".") + 1; {
	case n == 9:
	case n >= 11:
		_, rest, _ = strings.Cut(rest, ".") // domain
		_, rest, _ = strings.Cut(rest, ".") // account hash
	default:
		return m, false
	}
	var tok [7]string // stream, consumer, delivered, stream seq, consumer seq, time, pending
	for i := range tok {
		tok[i], rest, _ = strings.Cut(rest, ".")
	}
	return ackInfo{stream: ackNum(tok[3]), consumer: ackNum(tok[4]), delivered: ackNum(tok[2]), pending: ackNum(tok[6])}, true
}

// ackNum is the client's number parser: decimal digits, 0 for anything
// else.
func ackNum(d string) (n uint64) {
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0
		}
		n = n*10 + uint64(d[i]-'0')
	}
	return n
}
