package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamOutcomes is the ingester's record of what the log alone does not
// fix about transformations (docs/architecture.md, "Transformations"):
//
//   - chain: a chain command folded at seq, so that a restart knows the
//     chains of the commands below its commit point without reading the
//     log from the start;
//   - failure: a step stopped at its time or memory limit on the event
//     at seq, a fact of that run: every later fold of the event applies
//     it without running the step;
//   - mark: every event of the project up to seq has been run and its
//     interruptions recorded, so an event at or below it without a failure record ran
//     in time, and a later fold re-runs it with a much larger limit.
//
// Records are published, and acknowledged, before the batch they belong
// to is committed. They are facts of the log, not of one consumer: a
// replay into an empty database reads the same records.
const StreamOutcomes = "TRANSFORM_OUTCOMES"

const outcomesPrefix = "transform_outcomes."

// Kinds of outcome records.
const (
	recordChain   = "chain"
	recordFailure = "failure"
	recordMark    = "mark"
)

type outcome struct {
	Kind     string `json:"kind"`
	Project  uint64 `json:"project_id,omitempty"`
	Seq      uint64 `json:"seq"`
	Refs     []Ref  `json:"refs,omitempty"`
	ConfigID uint64 `json:"plugin_config_id,omitempty"`
	Version  string `json:"version,omitempty"`
	Error    string `json:"error,omitempty"`
}

// outcomes is the record in memory: loaded once, then kept up to date by
// what this process publishes.
type outcomes struct {
	js       jetstream.JetStream
	mu       sync.Mutex
	marks    map[uint64]uint64             // project -> seq
	failures map[uint64]map[uint64]outcome // seq -> config id -> record
}

func openOutcomes(ctx context.Context, js jetstream.JetStream, replicas int, chains *Chains) (*outcomes, error) {
	cfg := jetstream.StreamConfig{Name: StreamOutcomes, Subjects: []string{outcomesPrefix + ">"}, Storage: jetstream.FileStorage,
		Replicas: max(replicas, 1), Duplicates: 10 * time.Minute,
		Description: "personhub: transformation chains folded, interrupted steps and how far every interruption is recorded"}
	s, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = js.Stream(ctx, StreamOutcomes)
	}
	if err != nil {
		return nil, fmt.Errorf("transform: stream %s: %w", StreamOutcomes, err)
	}
	o := &outcomes{js: js, marks: map[uint64]uint64{}, failures: map[uint64]map[uint64]outcome{}}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return o, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			var rec outcome
			if err := json.Unmarshal(msg.Data(), &rec); err != nil {
				return nil, fmt.Errorf("transform: %s: %w", StreamOutcomes, err)
			}
			o.apply(rec, chains)
			if meta, err := msg.Metadata(); err == nil && meta.Sequence.Stream >= last {
				return o, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("transform: %s: read stopped before seq %d", StreamOutcomes, last)
		}
	}
}

func (o *outcomes) apply(rec outcome, chains *Chains) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch rec.Kind {
	case recordChain:
		chains.Set(rec.Project, rec.Seq, rec.Refs)
	case recordFailure:
		m := o.failures[rec.Seq]
		if m == nil {
			m = map[uint64]outcome{}
			o.failures[rec.Seq] = m
		}
		if _, ok := m[rec.ConfigID]; !ok { // the first record stands
			m[rec.ConfigID] = rec
		}
	case recordMark:
		o.marks[rec.Project] = max(o.marks[rec.Project], rec.Seq)
	}
}

// plan is how a step of the chain runs on the event at seq: a recorded
// interruption applies; else an event at or below the mark ran in time
// once, and gets the long limit.
func (o *outcomes) plan(project, seq uint64, versions map[uint64]string, long time.Duration) func(uint64) Plan {
	o.mu.Lock()
	recs, below := o.failures[seq], seq <= o.marks[project]
	o.mu.Unlock()
	return func(config uint64) Plan {
		if r, ok := recs[config]; ok && r.Version == versions[config] {
			return Plan{Recorded: r.Error}
		}
		if below {
			return Plan{Timeout: long}
		}
		return Plan{}
	}
}

func (o *outcomes) markAt(project uint64) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.marks[project]
}

// publish writes records, waiting for each acknowledgement, then applies
// them in memory. The message id makes a record written twice (a retried
// batch) one message.
func (o *outcomes) publish(ctx context.Context, recs []outcome, chains *Chains) error {
	for _, rec := range recs {
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		msg := nats.NewMsg(outcomesPrefix + rec.Kind)
		msg.Data = data
		id := rec.Kind + "-" + strconv.FormatUint(rec.Project, 10) + "-" + strconv.FormatUint(rec.Seq, 10) + "-" + strconv.FormatUint(rec.ConfigID, 10)
		msg.Header.Set(jetstream.MsgIDHeader, id)
		if _, err := o.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("transform: record %s: %w", id, err)
		}
		o.apply(rec, chains)
	}
	return nil
}
