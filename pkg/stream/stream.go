// Package stream holds the JetStream contract (docs/events.md): stream and
// subject names, the stream configuration, and publishing.
package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
)

const (
	// Events is the log of record: every event of every project.
	Events = "EVENTS"
	// EventsPrefix starts every event subject: events.<project_id>.
	EventsPrefix = "events."
	// DeadLetter keeps messages the ingester can never fold.
	DeadLetter = "EVENTS_DLQ"
	// DeadLetterPrefix starts dead-letter subjects: dlq.events.<project_id>.
	DeadLetterPrefix = "dlq."

	// Headers set on dead-lettered messages.
	HeaderReason  = "Dlq-Reason"
	HeaderSubject = "Dlq-Subject"
	HeaderSeq     = "Dlq-Stream-Seq"
)

// Subject returns the subject events of a project are published on.
func Subject(projectID uint64) string { return EventsPrefix + strconv.FormatUint(projectID, 10) }

// ProjectOf parses the project id out of an event subject.
func ProjectOf(subject string) (uint64, error) {
	rest, ok := strings.CutPrefix(subject, EventsPrefix)
	if !ok {
		return 0, fmt.Errorf("subject %q is not under %s", subject, EventsPrefix)
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("subject %q: want events.<project id>", subject)
	}
	return id, nil
}

// Config tunes the streams; the zero value gives the documented defaults.
type Config struct {
	// Replicas of each stream (1 for a single server).
	Replicas int
	// DuplicateWindow is how long Nats-Msg-Id dedupe remembers ids.
	DuplicateWindow time.Duration
	// DeadLetterMaxAge bounds how long dead letters are kept.
	DeadLetterMaxAge time.Duration
}

func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 10 * time.Minute
	}
	if c.DeadLetterMaxAge == 0 {
		c.DeadLetterMaxAge = 30 * 24 * time.Hour
	}
	return c
}

// Ensure creates or updates the streams. The events stream keeps every
// message (no age or count limit): it is the log the ClickHouse tables are
// rebuilt from.
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg = cfg.withDefaults()
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        Events,
		Description: "Analytics events, the log of record for persons",
		Subjects:    []string{EventsPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    cfg.Replicas,
		MaxMsgSize:  event.MaxSize,
		Duplicates:  cfg.DuplicateWindow,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", Events, err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DeadLetter,
		Description: "Events the ingester could not fold, with the reason in " + HeaderReason,
		Subjects:    []string{DeadLetterPrefix + EventsPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		MaxAge:      cfg.DeadLetterMaxAge,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", DeadLetter, err)
	}
	return nil
}

// Publish publishes one event envelope for a project, deduplicated by its
// uuid, and waits for the stream's acknowledgement.
func Publish(ctx context.Context, js jetstream.JetStream, projectID uint64, uuid string, data []byte) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(Subject(projectID))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, uuid)
	return js.PublishMsg(ctx, msg)
}
