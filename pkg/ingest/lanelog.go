package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
)

// The write lane's records in the log: reading them at a start, writing
// them before a batch's rows, and the start point that spares a start
// the records it no longer needs.
//
// A start needs the records of commands above the commit point only (a
// record of a command at or below it changed nothing still to fold: its
// after is below the command, so at or below the commit point too). The
// lane takes commands in sequence order, so those records are the tail of
// the partition's subject. After each commit the ingester keeps, in the
// progress bucket under LaneStartKey, the place in the lane stream of the
// first record of a command above it (or the place after the last record
// when there is none), with the commit point it was made for. It is kept
// after the commit, so it is never ahead of the commit in ClickHouse: a
// start whose commit point is at or above the kept one reads from the
// kept place; any other start (a consumer new to the bucket, tables
// rebuilt under the same name, a lost key) reads the subject whole.

// laneAt is a record of a command above the commit point: the command's
// sequence and the record's place in the lane stream.
type laneAt struct{ cmd, pos uint64 }

// laneStart is the value under LaneStartKey: every record of a command
// above Commit is at or after Start in the lane stream.
type laneStart struct {
	Commit uint64 `json:"commit"`
	Start  uint64 `json:"start"`
}

// LaneStartKey is the progress key of a consumer's lane start point.
func LaneStartKey(consumer string) string { return consumer + ".lanestart" }

// laneStream binds the record stream, creating it when the lane is on; nil
// when it does not exist and the lane is off (no lane ever ran).
func (i *Ingester) laneStream(ctx context.Context) (jetstream.Stream, error) {
	s, err := i.js.Stream(ctx, LaneStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !i.cfg.WriteLane {
			return nil, nil
		}
		s, err = i.js.CreateStream(ctx, jetstream.StreamConfig{Name: LaneStream, Subjects: []string{LanePrefix + ">"},
			Storage: jetstream.FileStorage, Replicas: max(i.cfg.Streams.Replicas, 1), Duplicates: 10 * time.Minute,
			Description: "personhub: the write lane's order records, where each API command taken ahead was folded"})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = i.js.Stream(ctx, LaneStream)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", LaneStream, err)
	}
	return s, nil
}

// readLaneStart is the place to read the records from: the kept start
// point when it was made for a commit point at or below this one, else 1
// (a whole read is always correct, only slower).
func (i *Ingester) readLaneStart(ctx context.Context) laneStart {
	whole := laneStart{Start: 1}
	if i.progress == nil {
		return whole
	}
	e, err := i.progress.Get(ctx, LaneStartKey(i.cfg.Consumer))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			i.log.Warn("read the write lane's start point; reading its records whole", "err", err)
		}
		return whole
	}
	var s laneStart
	if err := json.Unmarshal(e.Value(), &s); err != nil || s.Start == 0 || s.Commit > i.folder.Committed {
		return whole
	}
	return s
}

// loadLane reads the consumer's records from the start point: those above
// the commit point are the commands the main consumer skips, and those
// applied after a sequence above it are folded there again (with their
// bodies, read from the events stream). The first record of a command
// stands.
func (i *Ingester) loadLane(ctx context.Context, l *lane) error {
	s, err := i.laneStream(ctx)
	if s == nil || err != nil {
		l.saved = laneStart{Start: 1} // nothing to skip, nothing to keep
		return err
	}
	l.saved = i.readLaneStart(ctx)
	subj := i.laneSubject()
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return err
	}
	l.end = max(l.end, info.State.LastSeq)
	if info.State.Subjects[subj] == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: l.saved.Start})
	if err != nil {
		return err
	}
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		return nil
	}
	events, err := i.js.Stream(ctx, stream.Events)
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return fmt.Errorf("read %s: %w", LaneStream, err)
		}
		i.metrics.laneRecordsRead.Inc()
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		var rec laneRecord
		if err := json.Unmarshal(msg.Data(), &rec); err != nil {
			return fmt.Errorf("%s record: %w", LaneStream, err)
		}
		if !seen[rec.Seq] {
			seen[rec.Seq] = true
			if err := i.loadRecord(ctx, l, events, rec, meta.Sequence.Stream); err != nil {
				return err
			}
		}
		if meta.NumPending == 0 {
			return nil
		}
	}
}

func (i *Ingester) loadRecord(ctx context.Context, l *lane, events jetstream.Stream, rec laneRecord, pos uint64) error {
	l.lastAfter = max(l.lastAfter, rec.After)
	if rec.Seq <= i.folder.Committed {
		return nil
	}
	l.ahead[rec.Seq] = true
	l.recs = append(l.recs, laneAt{cmd: rec.Seq, pos: pos})
	if rec.After <= i.folder.Committed {
		return nil
	}
	raw, err := events.GetMsg(ctx, rec.Seq)
	if err != nil {
		return fmt.Errorf("command %d of a write lane record: %w", rec.Seq, err)
	}
	l.after[rec.After] = append(l.after[rec.After], laneMsg{seq: rec.Seq, subject: raw.Subject, data: raw.Data})
	slices.SortFunc(l.after[rec.After], func(a, b laneMsg) int { return cmp.Compare(a.seq, b.seq) })
	return nil
}

// recordLane publishes the order records of the commands taken after
// last, awaiting every ack. A record published twice (a retried batch)
// keeps the first: the message id dedupes within the window, and loadLane
// keeps the first record of a command beyond it.
func (i *Ingester) recordLane(ctx context.Context, taken []fold.Input, last uint64) error {
	acks := make([]jetstream.PubAckFuture, 0, len(taken))
	for _, in := range taken {
		data, _ := json.Marshal(laneRecord{Seq: in.Origin, After: last})
		msg := nats.NewMsg(i.laneSubject())
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, i.laneSubject()+"-"+strconv.FormatUint(in.Origin, 10))
		f, err := i.js.PublishMsgAsync(msg)
		if err != nil {
			return fmt.Errorf("write lane record of seq %d: %w", in.Origin, err)
		}
		acks = append(acks, f)
	}
	for k, f := range acks {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				// Another fold of the partition recorded the command
				// first (its record stands): fold again from the
				// records (processUntilDone reloads them).
				return fmt.Errorf("write lane: seq %s already recorded by another fold", f.Msg().Header.Get(jetstream.MsgIDHeader))
			}
			i.lane.recs = append(i.lane.recs, laneAt{cmd: taken[k].Origin, pos: ack.Sequence})
			i.lane.end = max(i.lane.end, ack.Sequence)
		case err := <-f.Err():
			return fmt.Errorf("write lane record: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// laneCommitted runs after a batch committed through last: the lane
// watermark moves to the commands taken, records at or below the commit
// point are forgotten.
func (i *Ingester) laneCommitted(ctx context.Context, last uint64) {
	l := i.lane
	if l == nil {
		return
	}
	i.laneVisible(ctx, last)
	for p := range l.after {
		if p <= last {
			delete(l.after, p)
		}
	}
	for s := range l.ahead {
		if s <= last {
			delete(l.ahead, s)
		}
	}
}

// laneVisible moves the lane's watermark to the last command taken, once
// the rows of the commands taken for a batch ending at last are written:
// the whole batch's (laneCommitted), or its lead, the lane's persons
// written ahead of the rest (chstore.BatchMarker.Lead). Either way every
// command up to it is visible: those of earlier batches committed.
func (i *Ingester) laneVisible(ctx context.Context, last uint64) {
	l := i.lane
	if l == nil {
		return
	}
	var stored []time.Time
	for p, msgs := range l.after {
		if p <= last {
			for k := range msgs {
				if !msgs[k].pub.IsZero() {
					stored = append(stored, msgs[k].pub)
					msgs[k].pub = time.Time{} // observed once
				}
			}
		}
	}
	if l.taken > l.visible {
		l.visible = l.taken
		if err := progress.Publish(ctx, i.progress, LaneKey(i.cfg.Consumer), l.visible); err != nil {
			i.log.Warn("publish lane progress", "err", err)
		}
		i.metrics.laneCommands.Set(float64(l.visible))
	}
	for _, t := range stored {
		i.metrics.laneVisible.Observe(time.Since(t).Seconds())
	}
}

// keepLaneStart moves the start point past the records of commands
// committed through last. Called after the watermarks are published: a
// reader waits on those, not on this.
func (i *Ingester) keepLaneStart(ctx context.Context, last uint64) {
	l := i.lane
	if l == nil {
		return
	}
	l.recs = slices.DeleteFunc(l.recs, func(r laneAt) bool { return r.cmd <= last })
	start := l.end + 1
	for _, r := range l.recs {
		start = min(start, r.pos)
	}
	if start <= l.saved.Start {
		return // no record passed: the kept point stands
	}
	next := laneStart{Commit: last, Start: start}
	data, _ := json.Marshal(next)
	// A lost put leaves the earlier point, which stays correct: a start
	// then reads a few records more.
	if _, err := i.progress.Put(ctx, LaneStartKey(i.cfg.Consumer), data); err != nil {
		i.log.Warn("keep the write lane's start point", "err", err)
		return
	}
	l.saved = next
}
