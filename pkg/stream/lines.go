package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
)

// Normalize prepares one JSON-lines record for publishing: it must be a
// JSON object; a missing uuid or timestamp is filled in (a fresh uuid,
// now). It returns the envelope and its uuid. The result still goes
// through the ingester's full validation.
func Normalize(line []byte, now time.Time) ([]byte, string, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, "", fmt.Errorf("not a JSON object")
	}
	if dec.More() {
		return nil, "", fmt.Errorf("more than one JSON value on the line")
	}
	var id string
	if raw, ok := m["uuid"]; ok {
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, "", fmt.Errorf("uuid must be a string")
		}
		if _, err := uuid.Parse(id); err != nil {
			return nil, "", fmt.Errorf("uuid %q does not parse", id)
		}
	} else {
		id = uuid.NewString()
		m["uuid"], _ = json.Marshal(id)
	}
	if _, ok := m["timestamp"]; !ok {
		m["timestamp"], _ = json.Marshal(now.UTC().Format(time.RFC3339Nano))
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	if len(out) > event.MaxSize {
		return nil, "", fmt.Errorf("event is larger than %d bytes", event.MaxSize)
	}
	return out, id, nil
}

// PublishLines publishes a JSON-lines stream of events to a project with
// asynchronous publishing (at most window unacknowledged), and returns how
// many were acknowledged. Blank lines are skipped; the first bad line
// stops it with its line number, after waiting for what was sent.
func PublishLines(ctx context.Context, js jetstream.JetStream, projectID uint64, r io.Reader, window int) (int, error) {
	if window < 1 {
		window = 1000
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), event.MaxSize+1024)
	var futures []jetstream.PubAckFuture
	acked := 0
	wait := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
				acked++
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	lineNo := 0
	var lineErr error
	for sc.Scan() {
		lineNo++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		data, id, err := Normalize(line, time.Now())
		if err != nil {
			lineErr = fmt.Errorf("line %d: %w", lineNo, err)
			break
		}
		msg := nats.NewMsg(Subject(projectID))
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, id)
		f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(30*time.Second))
		if err != nil {
			lineErr = fmt.Errorf("line %d: %w", lineNo, err)
			break
		}
		futures = append(futures, f)
		if len(futures) >= window {
			if err := wait(); err != nil {
				return acked, err
			}
		}
	}
	if err := wait(); err != nil {
		return acked, err
	}
	if lineErr != nil {
		return acked, lineErr
	}
	return acked, sc.Err()
}
