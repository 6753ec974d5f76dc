package command

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
)

// PublishTimeout bounds the publish of one command of the API, from the
// publish to the stream's acknowledgement.
const PublishTimeout = 5 * time.Second

// DefaultWait is how long Log.Await waits for the ingester by default.
const DefaultWait = 5 * time.Second

// ErrPending: the change is in the event log and will be applied, but the
// ingester has not folded it yet, so reads do not show it.
var ErrPending = errors.New("the change is recorded in the event log and not yet folded")

// AppendError says how far an Append got before it failed: the commands
// before Appended are in the log (and will be applied), none after.
type AppendError struct {
	Appended, Total int
	// Event is the name of the command that failed.
	Event string
	Err   error
}

// Error is the failure's own text: callers say what was appended.
func (e *AppendError) Error() string { return e.Err.Error() }

func (e *AppendError) Unwrap() error { return e.Err }

// Append publishes cmds on the project's command subject, stamped with a
// fresh uuid, the time and actor (nil: none), and returns the last one's
// stream sequence. Each command is published once the one before is
// acknowledged (a window of one), so a failure leaves exactly the
// commands before it in the log, in order (an *AppendError says how
// many; an envelope that cannot be written is returned as it is).
// timeout, when positive, bounds each command's publish.
func Append(ctx context.Context, js jetstream.JetStream, projectID uint64, actor *event.Actor, timeout time.Duration, cmds ...Command) (uint64, error) {
	p := NewPublisher(js, 1, PublishTimeout)
	subject := stream.CommandSubject(projectID)
	var last uint64
	for i, c := range cmds {
		id := c.ID
		if id == "" {
			id = uuid.NewString()
		}
		data, err := c.Envelope(id, time.Now(), actor)
		if err != nil {
			return 0, err
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		b := p.Begin(cctx, 1)
		err = b.Add(subject, Message{UUID: id, Data: data})
		if err == nil {
			err = b.Wait()
		}
		cancel()
		if err != nil {
			return 0, &AppendError{Appended: i, Total: len(cmds), Event: c.Event, Err: err}
		}
		last = b.Last()
	}
	return last, nil
}

// Log is the API's way to the log: it appends a key's commands and waits
// until the ingester of the project's partition has folded them, so that
// the API answers a write with what reads then show.
type Log struct {
	js       jetstream.JetStream
	progress *progress.Partitions
	wait     time.Duration
}

// NewLog appends over js and waits on the partitions' watermarks for at
// most wait (DefaultWait when not positive).
func NewLog(js jetstream.JetStream, marks *progress.Partitions, wait time.Duration) *Log {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Log{js: js, progress: marks, wait: wait}
}

// Append publishes the commands actor made (Append, each within
// PublishTimeout) and returns the last one's stream sequence.
func (l *Log) Append(ctx context.Context, projectID uint64, actor event.Actor, cmds ...Command) (uint64, error) {
	return Append(ctx, l.js, projectID, &actor, PublishTimeout, cmds...)
}

// Await returns once the ingester of the project's partition has
// committed seq; ErrPending when it has not within the log's wait.
func (l *Log) Await(ctx context.Context, projectID, seq uint64) error {
	err := l.progress.Wait(ctx, projectID, seq, l.wait)
	if errors.Is(err, progress.ErrTimeout) {
		return ErrPending
	}
	return err
}
