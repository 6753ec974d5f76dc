package ingest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
)

// The write lane (docs/architecture.md, "The write lane"). A command on
// commands.<project> waits behind every captured event published before
// it; under a capture backlog that is seconds. With Config.WriteLane the
// ingester reads its partition's command subjects ahead of the main
// consumer (an ordered consumer) and, at the end of a batch folded up to
// sequence P, folds the commands read so far (S > P) right after P. So
// that a replay folds them at the same point, it first publishes one order
// record per command, {seq: S, after: P}, to the stream WRITE_LANE
// (subject lane.<consumer>, message id <consumer>-S) and awaits the acks,
// before the batch's writes. Every fold of the range after that (a retry,
// a restart, a replay into empty tables under the same consumer name)
// folds S right after P and skips S where the main consumer delivers it.

const (
	// LaneStream holds the order records of the write lane.
	LaneStream = "WRITE_LANE"
	// LanePrefix starts the record subjects: lane.<consumer>.
	LanePrefix = "lane."
	// laneTakeMax bounds the commands one batch takes ahead.
	laneTakeMax = 1000
)

// laneRecord says the command at stream sequence Seq was folded right
// after the message at sequence After of the same consumer.
type laneRecord struct {
	Seq   uint64 `json:"seq"`
	After uint64 `json:"after"`
}

// laneMsg is a command read ahead (or named by a record).
type laneMsg struct {
	seq     uint64
	subject string
	data    []byte
	// pub is when the stream stored it (zero for one named by a
	// record at a start): ingester_lane_visible_seconds.
	pub time.Time
}

// lane is the write lane's state. queue is filled by the lane consumer's
// goroutine; the rest is the batch loop's alone.
type lane struct {
	mu    sync.Mutex
	queue []laneMsg
	// newest is the highest sequence queued, blocked the command the
	// lane last refused (not LaneReady): collect ends a batch early
	// for a command the lane may take.
	newest, blocked atomic.Uint64
	// through: every command queued up to it was taken (or is not the
	// lane's: another partition's, or taken before).
	through atomic.Uint64
	// live: the lane may take commands (startLane).
	live atomic.Bool
	cons jetstream.ConsumeContext

	// after holds the recorded commands to fold right after a sequence
	// above the commit point, ahead the commands recorded above it (the
	// main consumer skips them). lastAfter is the highest recorded
	// after: a batch ending there took its commands already.
	after     map[uint64][]laneMsg
	ahead     map[uint64]bool
	lastAfter uint64
	// taken is the highest command taken by a batch not yet committed;
	// visible the lane watermark published.
	taken, visible uint64
	// recs are the records of commands above the commit point, with
	// their places in the lane stream; end is the last place read or
	// published; saved the start point last kept (lanelog.go).
	recs  []laneAt
	end   uint64
	saved laneStart
}

// LaneKey is the progress key of a consumer's lane watermark: every
// command up to it that the lane took is visible (commands are taken in
// sequence order; one the lane left behind is folded in place and waits
// for the main watermark, progress.Partitions.Wait).
func LaneKey(consumer string) string { return progress.LaneKey(consumer) }

// laneSubject is the partition's record subject: records are facts of the
// partition's log, followed by every consumer of it (a rebuild under
// another name included), not of one consumer.
func (i *Ingester) laneSubject() string { return LanePrefix + strconv.Itoa(i.cfg.Partition) }

// startLane loads the order records above the commit point (always: a
// fold with the lane off follows them too, so a rebuild gives what the
// lane's run gave) and, with Config.WriteLane, starts reading the command
// subjects from it. Called after recover, at every start of a lease's
// tenure.
func (i *Ingester) startLane(ctx context.Context) error {
	i.stopLane()
	l := &lane{after: map[uint64][]laneMsg{}, ahead: map[uint64]bool{}}
	// A consumer that has committed takes commands at once: those it
	// folded in place are below its commit point or inside a crashed
	// write's range (takeLane waits past it). A fresh one (a rebuild)
	// first catches up: the commands before that were folded in place by
	// whichever fold wrote them, which no record says.
	l.live.Store(i.folder.Committed > 0)
	if err := i.loadLane(ctx, l); err != nil {
		return err
	}
	i.lane = l
	if !i.cfg.WriteLane {
		return nil
	}
	filter := []string{stream.CommandsPrefix + ">"}
	if n := i.cfg.Streams.Partitions; n > 1 {
		k := strconv.Itoa(i.cfg.Partition)
		filter = []string{stream.CommandsPrefix + k + ".*", stream.CommandsPrefix + "*"}
	}
	cons, err := i.js.OrderedConsumer(ctx, stream.Events, jetstream.OrderedConsumerConfig{
		FilterSubjects: filter, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: i.folder.Committed + 1,
	})
	if err != nil {
		return fmt.Errorf("write lane consumer: %w", err)
	}
	l.cons, err = cons.Consume(func(msg jetstream.Msg) {
		meta, err := msg.Metadata()
		if err != nil {
			return
		}
		l.mu.Lock()
		l.queue = append(l.queue, laneMsg{seq: meta.Sequence.Stream, subject: msg.Subject(), data: msg.Data(), pub: meta.Timestamp})
		l.mu.Unlock()
		l.newest.Store(meta.Sequence.Stream)
	})
	if err != nil {
		return fmt.Errorf("write lane consume: %w", err)
	}
	return nil
}

func (i *Ingester) stopLane() {
	if i.lane != nil && i.lane.cons != nil {
		i.lane.cons.Stop()
	}
	i.lane = nil
}

// reloadLane reads the records again, before a retry: a duplicate record
// (another fold of the partition recorded the command first) failed the
// batch, and the record that stands must be followed.
func (i *Ingester) reloadLane(ctx context.Context) error {
	l := i.lane
	if l == nil {
		return nil
	}
	l.after, l.ahead, l.lastAfter, l.recs = map[uint64][]laneMsg{}, map[uint64]bool{}, 0, nil
	return i.loadLane(ctx, l)
}

// markLaned marks the batch's commands the lane folded already.
func (i *Ingester) markLaned(batch []*pending) {
	for _, p := range batch {
		p.laned = i.lane != nil && i.lane.ahead[p.seq]
	}
}

// laneInputs is the recorded commands to fold right after p, as inputs.
func (i *Ingester) laneInputs(p *pending) []fold.Input {
	if i.lane == nil {
		return nil
	}
	var out []fold.Input
	for _, m := range i.lane.after[p.seq] {
		if in, _, ok := i.laneInput(m, p.seq); ok {
			out = append(out, in)
		}
	}
	return out
}

// laneInput is the input of command m folded after seq. mine is false for
// another partition's message (stored before the stream was partitioned),
// ok false also for one that is not a well-formed command (the main
// consumer dead-letters it).
func (i *Ingester) laneInput(m laneMsg, after uint64) (in fold.Input, mine, ok bool) {
	mine, project, command, err := stream.Route(m.subject, i.cfg.Partition, i.cfg.Streams.Partitions)
	if !mine || err != nil || !command {
		return fold.Input{}, mine, false
	}
	ev, err := event.Parse(m.data)
	if err != nil {
		return fold.Input{}, true, false
	}
	return fold.Input{ProjectID: project, Seq: after, Origin: m.seq, Event: ev}, true, true
}

// withLane puts the recorded commands right after their sequences into
// inputs (the hook's output, in stream order).
func (i *Ingester) withLane(batch []*pending, inputs []fold.Input) []fold.Input {
	if i.lane == nil || len(i.lane.after) == 0 {
		return inputs
	}
	out := make([]fold.Input, 0, len(inputs))
	j := 0
	for _, p := range batch {
		extra := i.laneInputs(p)
		if len(extra) == 0 {
			continue
		}
		for j < len(inputs) && inputs[j].Seq <= p.seq {
			out = append(out, inputs[j])
			j++
		}
		out = append(out, extra...)
	}
	return append(out, inputs[j:]...)
}

// takeLane folds, after the batch's last sequence, the commands read ahead
// that the lane may take (a prefix of them, in sequence order), once
// their order records are in the log. It returns their inputs, folded.
//
// A batch takes commands only when its end is beyond every record's (a
// retry of the batch folds those it took from the records) and beyond
// what an uncommitted write may have reached (intents): a stored row at
// the batch's end must have been written by a fold that took its commands.
func (i *Ingester) takeLane(ctx context.Context, last uint64) ([]eventstore.Row, error) {
	l := i.lane
	if l == nil || l.cons == nil {
		return nil, nil
	}
	l.mu.Lock()
	k := 0
	for k < len(l.queue) && l.queue[k].seq <= last {
		k++ // the main consumer folds them in place
	}
	// Dropped even when nothing is taken: a rebuild catching up must
	// not hold every command of the log.
	l.queue = l.queue[k:]
	// The commands not taken yet, up to laneTakeMax. Those taken by an
	// earlier batch stay queued until the main consumer passes them, and
	// must not count: after a burst, a window of taken commands let each
	// batch take one new command (its end one message further on, since
	// collect ends a batch while commands wait), so 10,000 API deletions
	// took ~10,000 batches.
	queue := make([]laneMsg, 0, min(len(l.queue), laneTakeMax))
	for _, m := range l.queue {
		if len(queue) == laneTakeMax {
			break
		}
		if l.ahead[m.seq] {
			// Taken already (maybe by an earlier tenure, from its
			// records): through passes it.
			l.through.Store(max(l.through.Load(), m.seq))
			continue
		}
		queue = append(queue, m)
	}
	l.mu.Unlock()
	if !l.live.Load() || last <= l.lastAfter || last <= i.intents.overlap {
		return nil, nil
	}
	// The commands' lookups are made a chunk at a time (Prepare, as for
	// a batch), not per command: one per command made a burst of API
	// deletions (each naming a person not in the cache) cost a read of
	// persons and one of distinct ids per command. The chunks grow
	// eightfold (1, 8, 64, 512), so a head the lane cannot take yet
	// costs one command's lookups, and a burst of 1,000 five Prepares.
	// Apply takes each input's state as the fold has it by then, as in
	// a batch prepared whole.
	var taken []fold.Input
	var rows []eventstore.Row
	ins := make([]fold.Input, len(queue))
	mines, oks := make([]bool, len(queue)), make([]bool, len(queue))
	for k, prepared, chunk := 0, 0, 1; k < len(queue); k++ {
		m := queue[k]
		if k == prepared {
			end := min(len(queue), k+chunk)
			if err := i.prepareLane(ctx, queue[k:end], last, ins[k:end], mines[k:end], oks[k:end]); err != nil {
				return nil, err
			}
			prepared, chunk = end, chunk*8
		}
		in, mine, ok := ins[k], mines[k], oks[k]
		if !mine {
			l.through.Store(max(l.through.Load(), m.seq))
			continue // another partition's
		}
		if ok {
			ready, err := i.folder.LaneReady(ctx, in)
			if err != nil {
				return nil, err
			}
			ok = ready
		}
		if !ok {
			l.blocked.Store(m.seq)
			break
		}
		// Folded one by one: whether the next may go depends on this
		// one (a deletion, then a write to the deleted person's id).
		res, err := i.folder.Apply(ctx, in)
		if err != nil {
			return nil, err
		}
		taken = append(taken, in)
		rows = append(rows, eventRow(&in, res))
		l.through.Store(max(l.through.Load(), m.seq))
	}
	if len(taken) == 0 {
		return nil, nil
	}
	if err := i.recordLane(ctx, taken, last); err != nil {
		return nil, err
	}
	msgs := make([]laneMsg, 0, len(taken))
	for _, m := range queue {
		if len(msgs) < len(taken) && m.seq == taken[len(msgs)].Origin {
			msgs = append(msgs, m)
			l.ahead[m.seq] = true
		}
	}
	l.after[last], l.lastAfter = msgs, last
	l.taken = max(l.taken, taken[len(taken)-1].Origin)
	return rows, nil
}

// prepareLane reads the commands msgs as inputs folded after last into
// ins (mine and ok as laneInput says), and prepares those the lane may
// take in one Prepare.
func (i *Ingester) prepareLane(ctx context.Context, msgs []laneMsg, last uint64, ins []fold.Input, mine, ok []bool) error {
	var at []int
	for k, m := range msgs {
		ins[k], mine[k], ok[k] = i.laneInput(m, last)
		if mine[k] && ok[k] {
			at = append(at, k)
		}
	}
	if len(at) == 0 {
		return nil
	}
	prep := make([]fold.Input, len(at))
	for j, k := range at {
		prep[j] = ins[k]
	}
	if err := i.prepare(ctx, prep); err != nil {
		return err
	}
	for j, k := range at {
		ins[k] = prep[j] // with what Prepare found
	}
	return nil
}

// laneWaiting reports whether a command the lane may take arrived after
// seq: collect then ends the batch, so the command waits for one batch's
// fold and write, not a full batch's collection.
//
// Not where takeLane would take nothing (a batch ending at or below a
// record's after, or inside what an uncommitted write may reach): the
// lane's through stays put there, and every batch would end after one
// message (after a restart with a backlog of commands: BatchSize batches
// of one, each its own write).
func (i *Ingester) laneWaiting(seq uint64) bool {
	l := i.lane
	if l == nil || !l.live.Load() || l.newest.Load() <= max(seq, l.through.Load()) ||
		seq <= l.lastAfter || seq <= i.intents.overlap {
		return false
	}
	b := l.blocked.Load()
	return b == 0 || b <= seq
}

// laneCutEvery is how many inputs the fold applies between two looks at
// the lane (two atomic loads: cheap, but not per event).
const laneCutEvery = 256

// laneCut reports whether the fold of a batch should stop before
// inputs[k] for a command the lane may take: the part folded is committed
// with the command at its end, and the rest goes on with the next batch.
// Without it a command that arrives as a full batch starts folding waits
// for the whole fold and the whole write (the PATCH-to-visible tail under
// load: about one batch's cycle). Only between two messages (a recorded command's input
// has its after's sequence), and only where takeLane takes commands and
// where committing is allowed (not inside a crashed batch's range).
//
// Where a batch ends changes no fold: the commands' places are in the
// log (the records), whatever the batch boundaries.
func (i *Ingester) laneCut(inputs []fold.Input, k int) bool {
	if k == 0 || k%laneCutEvery != 0 {
		return false
	}
	prev := inputs[k-1].Seq
	return inputs[k].Seq > prev && i.laneWaiting(prev) && i.folder.CommitThrough() <= prev
}

// cutError: the batch was committed up to a write lane cut; rest is the
// messages after it, in hand, neither written nor acknowledged.
type cutError struct{ rest []*pending }

func (e *cutError) Error() string {
	return fmt.Sprintf("batch cut for the write lane before seq %d", e.rest[0].seq)
}

// splitAfter splits a batch (in sequence order) after seq.
func splitAfter(batch []*pending, seq uint64) (head, rest []*pending) {
	n, _ := slices.BinarySearchFunc(batch, seq+1, func(p *pending, s uint64) int { return cmp.Compare(p.seq, s) })
	return batch[:n], batch[n:]
}
