// Package stream holds the JetStream contract (docs/events.md): stream and
// subject names, the stream configuration, and publishing.
package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/event"
)

const (
	// Events is the log of record: every event and command of every project.
	Events = "EVENTS"
	// EventsPrefix starts every event subject: events.<project_id>.
	// Capture and pipelines publish here.
	EventsPrefix = "events."
	// CommandsPrefix starts the API's command subjects:
	// commands.<project_id>. Only the API may publish here (NATS publish
	// permissions, docs/operations.md); the ingester honours commands
	// (event.ReservedEvents, event.ReservedProperties) from nowhere else.
	// Commands share the stream with events so that one sequence orders
	// both and a replay folds them in the same order.
	CommandsPrefix = "commands."
	// DeadLetter keeps messages the ingester can never fold.
	DeadLetter = "EVENTS_DLQ"
	// DeadLetterPrefix starts dead-letter subjects: dlq.<original subject>.
	DeadLetterPrefix = "dlq."

	// Headers set on dead-lettered messages.
	HeaderReason  = "Dlq-Reason"
	HeaderSubject = "Dlq-Subject"
	HeaderSeq     = "Dlq-Stream-Seq"
)

// Subjects of the two streams.
var (
	EventsSubjects     = []string{EventsPrefix + ">", CommandsPrefix + ">"}
	DeadLetterSubjects = []string{DeadLetterPrefix + EventsPrefix + ">", DeadLetterPrefix + CommandsPrefix + ">"}
)

// Subject returns the subject events of a project are published on.
func Subject(projectID uint64) string { return EventsPrefix + strconv.FormatUint(projectID, 10) }

// CommandSubject returns the subject the API publishes a project's
// commands on.
func CommandSubject(projectID uint64) string {
	return CommandsPrefix + strconv.FormatUint(projectID, 10)
}

// ParseSubject returns the project of an event or command subject, and
// whether it is a command subject.
func ParseSubject(subject string) (projectID uint64, command bool, err error) {
	rest, ok := strings.CutPrefix(subject, EventsPrefix)
	if !ok {
		if rest, command = strings.CutPrefix(subject, CommandsPrefix); !command {
			return 0, false, fmt.Errorf("subject %q is not under %s or %s", subject, EventsPrefix, CommandsPrefix)
		}
	}
	id, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || id == 0 {
		return 0, false, fmt.Errorf("subject %q: want events.<project id> or commands.<project id>", subject)
	}
	return id, command, nil
}

// ProjectOf parses the project id out of an event or command subject.
func ProjectOf(subject string) (uint64, error) {
	id, _, err := ParseSubject(subject)
	return id, err
}

// Config is used only to create missing streams (Ensure); the zero value
// gives the documented defaults.
type Config struct {
	// Replicas of each stream (1 for a single server).
	Replicas int
	// DuplicateWindow is how long Nats-Msg-Id dedupe remembers ids.
	DuplicateWindow time.Duration
	// MaxBytes bounds the events stream (0: no limit). The stream is the
	// log of record, so a full stream refuses publishes (discard new)
	// rather than dropping old events.
	MaxBytes int64
	// DeadLetterMaxAge bounds how long dead letters are kept.
	DeadLetterMaxAge time.Duration
	// Partitions splits the events stream's subjects by project
	// (partition.go). 0: the stream as it is (one partition when
	// created), for publishers. 1 or more (ingesters): an existing stream
	// without partitions gains the transform (an upgrade in place); one
	// with another count is refused.
	Partitions int
	// Compression of the events stream's file store, when created:
	// "s2" (JetStream's S2 compression of its message blocks) or "none"
	// ("" is none). The events' JSON compresses about 2x; the server pays
	// with CPU when it writes and reads a block.
	Compression string
	// Logger, when set, hears about subjects added to existing streams.
	Logger *slog.Logger
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("stream replicas %d out of range 1..5", c.Replicas)
	case c.DuplicateWindow < 0:
		return errors.New("stream duplicate window must not be negative")
	case c.MaxBytes < 0:
		return errors.New("stream max bytes must not be negative (0 means no limit)")
	case c.DeadLetterMaxAge < 0:
		return errors.New("dead-letter max age must not be negative")
	case c.Partitions < 0 || c.Partitions > MaxPartitions:
		return fmt.Errorf("partitions %d out of range 1..%d", c.Partitions, MaxPartitions)
	case c.Compression != "" && c.Compression != "none" && c.Compression != "s2":
		return fmt.Errorf("stream compression %q: want s2 or none", c.Compression)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Partitions = max(c.Partitions, 1)
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

// Configs returns the configurations Ensure creates missing streams with.
func (c Config) Configs() (events, deadLetter jetstream.StreamConfig) {
	c = c.withDefaults()
	events = jetstream.StreamConfig{
		Name:        Events,
		Description: "Analytics events and the API's person commands, the log of record for persons",
		Subjects:    EventsSubjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    c.Replicas,
		MaxMsgSize:  event.MaxSize,
		Duplicates:  c.DuplicateWindow,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    -1,
		// Inserts the partition token (nil for one partition).
		SubjectTransform: PartitionTransform(c.Partitions),
	}
	if c.MaxBytes > 0 {
		events.MaxBytes = c.MaxBytes
		events.Discard = jetstream.DiscardNew
	}
	if c.Compression == "s2" {
		events.Compression = jetstream.S2Compression
	}
	deadLetter = jetstream.StreamConfig{
		Name:        DeadLetter,
		Description: "Events the ingester could not fold, with the reason in " + HeaderReason,
		Subjects:    DeadLetterSubjects,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      c.DeadLetterMaxAge,
	}
	return events, deadLetter
}

// Ensure binds the streams as they are, creating a missing one from cfg.
// An existing stream keeps every setting an operator gave it (replicas,
// limits, duplicate window); the only change ever made to it is adding a
// subject of the contract it lacks (commands.> to an EVENTS stream made
// before commands had their own subject).
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	return bind(ctx, js, cfg, true)
}

// Upgrade adds the contract's subjects to the streams that exist and
// creates none (nor partitions them): for the API, which publishes commands but leaves creating
// the streams (with the operator's settings) to the ingester. An API
// started before the ingester after an upgrade can then publish commands
// at once.
func Upgrade(ctx context.Context, js jetstream.JetStream, log *slog.Logger) error {
	return bind(ctx, js, Config{Logger: log}, false)
}

func bind(ctx context.Context, js jetstream.JetStream, cfg Config, create bool) error {
	events, deadLetter := cfg.Configs()
	for _, want := range []jetstream.StreamConfig{events, deadLetter} {
		if err := ensureStream(ctx, js, want, cfg, create); err != nil {
			return fmt.Errorf("stream %s: %w", want.Name, err)
		}
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, cfg Config, create bool) error {
	log := cfg.Logger
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !create {
		return nil
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, want)
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return err
		}
		// Created meanwhile by another process: bind to it.
		s, err = js.Stream(ctx, want.Name)
	}
	if err != nil {
		return err
	}
	have := s.CachedInfo().Config
	if create && want.Name == Events && cfg.Partitions > 0 {
		if err := partition(ctx, js, have, want, log); err != nil {
			return err
		}
		if s, err = js.Stream(ctx, want.Name); err != nil {
			return err
		}
		have = s.CachedInfo().Config
	}
	var missing []string
	for _, subj := range want.Subjects {
		if !slices.Contains(have.Subjects, subj) {
			missing = append(missing, subj)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	have.Subjects = append(slices.Clone(have.Subjects), missing...)
	if _, err := js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("add subjects %v to the existing stream: %w", missing, err)
	}
	if log != nil {
		log.Info("added subjects to an existing stream; its other settings are kept", "stream", want.Name, "subjects", missing)
	}
	return nil
}

// partition gives an existing events stream the partition transform
// wanted: added to a stream without one (its messages stored so far keep
// their subjects, which the partitions' consumers read too), refused for
// a stream with another partition count.
func partition(ctx context.Context, js jetstream.JetStream, have, want jetstream.StreamConfig, log *slog.Logger) error {
	haveN, err := PartitionsOf(have)
	if err != nil {
		return err
	}
	wantN, _ := PartitionsOf(want)
	switch {
	case haveN == wantN:
		return nil
	case haveN != 1:
		return fmt.Errorf("the stream is partitioned %d ways and this ingester is configured for %d: a partition count cannot change in place (docs/operations.md, \"More than one ingester\")", haveN, wantN)
	}
	have.SubjectTransform = want.SubjectTransform
	if _, err := js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("partition the existing stream %d ways: %w", wantN, err)
	}
	if log != nil {
		log.Info("partitioned the existing stream; messages stored before keep their subjects", "stream", want.Name, "partitions", wantN)
	}
	return nil
}

// CheckPartitions refuses a partition count that differs from the events
// stream's, for the API and the deleter, which wait on the partitions'
// watermarks and commits by name. A missing stream passes (the ingester
// creates it with its own count).
func CheckPartitions(ctx context.Context, js jetstream.JetStream, n int) error {
	s, err := js.Stream(ctx, Events)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	have, err := PartitionsOf(s.CachedInfo().Config)
	if err != nil {
		return err
	}
	if have != max(n, 1) {
		return fmt.Errorf("stream %s is partitioned %d ways, configured %d: give every binary the same partition count", Events, have, max(n, 1))
	}
	return nil
}

// Publish publishes one event envelope for a project, deduplicated by its
// uuid, and waits for the stream's acknowledgement.
func Publish(ctx context.Context, js jetstream.JetStream, projectID uint64, uuid string, data []byte) (*jetstream.PubAck, error) {
	return publishOn(ctx, js, Subject(projectID), uuid, data)
}

// PublishCommand publishes one command envelope (made by the API) for a
// project on its command subject, deduplicated by its uuid, and waits for
// the stream's acknowledgement.
func PublishCommand(ctx context.Context, js jetstream.JetStream, projectID uint64, uuid string, data []byte) (*jetstream.PubAck, error) {
	return publishOn(ctx, js, CommandSubject(projectID), uuid, data)
}

func publishOn(ctx context.Context, js jetstream.JetStream, subject, uuid string, data []byte) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, uuid)
	return js.PublishMsg(ctx, msg)
}
