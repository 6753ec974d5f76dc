package command

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/stream"
)

// linesStallWait bounds how long PublishLines waits for room among js's
// pending acknowledgements.
const linesStallWait = 30 * time.Second

// PublishLines publishes a JSON-lines stream of events to a project
// (`ingester publish`), each line made an envelope by stream.Normalize,
// with at most window unacknowledged (1000 when not positive), and
// returns how many were acknowledged. Blank lines are skipped; the first
// bad line, or failed publish, stops it with its line number, after
// waiting for what was sent.
func PublishLines(ctx context.Context, js jetstream.JetStream, projectID uint64, r io.Reader, window int) (int, error) {
	if window < 1 {
		window = 1000
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), event.MaxSize+1024)
	b := NewPublisher(js, window, linesStallWait).Begin(ctx, window)
	subject := stream.Subject(projectID)
	lineNo := 0
	var lineErr error
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		data, id, err := stream.Normalize(line, time.Now())
		if err != nil {
			lineErr = fmt.Errorf("line %d: %w", lineNo, err)
			break
		}
		if err := b.Add(subject, Message{UUID: id, Data: data}); err != nil {
			// The publish of this line failed, or an earlier line's
			// acknowledgement, seen while waiting for room for it.
			lineErr = fmt.Errorf("line %d: %w", lineNo, err)
			break
		}
	}
	if err := b.Wait(); err != nil {
		return b.Acked(), err
	}
	if lineErr != nil {
		return b.Acked(), lineErr
	}
	return b.Acked(), sc.Err()
}
