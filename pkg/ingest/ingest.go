// Package ingest is the ingester: a durable JetStream consumer that folds
// events into persons in batches and writes them to ClickHouse.
//
// The contract with the stream: a batch is committed (its marker written)
// only after ClickHouse accepted every row of it, and the marker is the
// ingester's progress: the consumer acknowledges nothing (AckNone) and is
// recreated from the last marker at every start and after a lost
// delivery. A message that can never be folded is published to the
// dead-letter stream before its batch commits, so it never blocks the
// stream.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/shutdown"
	"github.com/personhub/personhub/pkg/stream"
)

// Config tunes the ingester.
type Config struct {
	// Consumer is the durable consumer name; also the key of the commit
	// markers in ClickHouse. With several partitions it is the base of
	// each partition's name (stream.ConsumerName).
	Consumer string
	// Partition is the partition of the events stream this ingester
	// folds, 0..Streams.Partitions-1 (partition.go).
	Partition int
	// LeaseTTL is how long the consumer's lease outlives its holder
	// (lease.go): a successor waits at most this long after a crash.
	LeaseTTL time.Duration
	// BatchSize is the most messages folded and written at once.
	BatchSize int
	// BatchWait is the longest a message waits for its batch to fill.
	BatchWait time.Duration
	// MaxCachedPersons bounds the persons held in memory between batches.
	MaxCachedPersons int
	// DenseMisses is the misses of one project's distinct ids in one
	// step that make the fold read the project whole (fold.DenseMisses;
	// zero: fold.DefaultDenseMisses, negative: never).
	DenseMisses int
	// StallWait is how long the ingester waits for the next message when
	// the last one said the stream holds more for the consumer
	// (NumPending > 0). Past it, messages in flight were lost in the
	// client (a full buffer: "slow consumer, messages dropped") and no
	// later delivery shows the hole, so the consumer is recreated from
	// the last commit (collect). A caught-up ingester that waits this
	// long asks the server how many messages the consumer delivered:
	// a whole burst lost after the last one received leaves no other
	// trace (lostAtTail).
	StallWait time.Duration
	// Streams creates the streams and the progress bucket when they are
	// missing; existing ones are bound as they are.
	Streams stream.Config
	// LegacyCommandsUntil honours commands found on events.<project>
	// subjects at or below this stream sequence, as versions before the
	// command subject published them; 0 honours none. Set it only to
	// rebuild from a log written before the upgrade (docs/operations.md).
	LegacyCommandsUntil uint64
	// MaxPersonBytes bounds a person's properties as stored JSON; a change
	// beyond it is refused with an ingestion warning (docs/events.md). 0:
	// no bound. A fold rule: replays must use the same value to get the
	// same persons.
	MaxPersonBytes int
	// WriteLane folds API commands ahead of the capture backlog, in the
	// order its records in the log say (lane.go). On by default: it is
	// what keeps an API write visible within 1 s under load (docs/performance.md). Off,
	// the records already in the log are still followed.
	WriteLane bool
	// GrowFor is the longest a batch grows beyond BatchSize while the
	// stream holds more behind it (grow.go): its persons are written
	// once at its end, not once per BatchSize messages that touch them. 0: batches end at BatchSize. On by default
	// (30 s): an API write in the
	// write lane cuts a grown batch and waits only for its own persons'
	// rows (the lead, chstore.BatchMarker.Lead), not for the batch's.
	GrowFor time.Duration
	// GrowPersons ends a grown batch once it has this many changed
	// persons: they are held in memory with their properties decoded
	// (the bench's fill, new persons of four properties, peaked at
	// 948 MiB with 200,000 of them beside a cache of 500,000). 0: no
	// bound but GrowFor and MaxCachedPersons.
	GrowPersons int
	// Hook, when set, transforms each batch's events before the fold
	// (hook.go). Not a setting: the composition root sets it.
	Hook Hook
	// ShutdownGrace is how long after Run's context is cancelled the
	// batch in hand may still take to commit (retries included). Past it
	// the batch is abandoned unacknowledged, so a dead ClickHouse cannot
	// hold a shutdown; the next start delivers it again from the last
	// commit.
	ShutdownGrace time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Consumer == "":
		return errors.New("consumer name is empty")
	case c.BatchSize < 1 || c.BatchSize > 1_000_000:
		return fmt.Errorf("batch size %d out of range 1..1000000", c.BatchSize)
	case c.BatchWait <= 0:
		return errors.New("batch wait must be positive")
	case c.StallWait <= 0:
		return errors.New("stall wait must be positive")
	case c.MaxPersonBytes < 0:
		return fmt.Errorf("max person bytes %d is negative", c.MaxPersonBytes)
	case c.ShutdownGrace <= 0:
		return errors.New("shutdown grace must be positive")
	case c.LeaseTTL < time.Second:
		return errors.New("lease TTL must be at least 1s")
	case c.GrowFor < 0:
		return fmt.Errorf("grow-for %s is negative", c.GrowFor)
	case c.GrowPersons < 0:
		return fmt.Errorf("grow persons %d is negative", c.GrowPersons)
	}
	if err := stream.ValidatePartition(c.Partition, max(c.Streams.Partitions, 1)); err != nil {
		return err
	}
	return c.Streams.Validate()
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Consumer: "ingester", BatchSize: 20000, BatchWait: 200 * time.Millisecond, MaxCachedPersons: 500_000, DenseMisses: fold.DefaultDenseMisses,
		StallWait:      10 * time.Second,
		MaxPersonBytes: fold.DefaultMaxPersonBytes, ShutdownGrace: 10 * time.Second, LeaseTTL: 10 * time.Second,
		WriteLane: true, GrowFor: 30 * time.Second, GrowPersons: 200_000}
}

// Store is what the ingester needs from ClickHouse.
type Store interface {
	fold.Loader
	WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error
	// WriteRows writes rows without a commit marker: a grown batch's
	// events rows ahead of its end (grow.go).
	WriteRows(ctx context.Context, events []eventstore.Row, b fold.Batch) error
	LastCommitted(ctx context.Context, consumer string) (uint64, error)
	// SettleWriter ends the consumer's statements an earlier tenure (or
	// a failed attempt) left running on the server, before recovery
	// reads what they wrote (chstore/writer.go).
	SettleWriter(ctx context.Context, consumer string) error
	// The intents and the lookup that keep one events row per message
	// (dedupe.go).
	WriteIntent(ctx context.Context, consumer string, first, through uint64) error
	LastIntent(ctx context.Context, consumer string) (uint64, error)
	WrittenEvents(ctx context.Context, rows []eventstore.Row) (map[uint64]bool, error)
	RestoreCopies(ctx context.Context, rows []eventstore.Row, written map[uint64]bool) error
	// The repair of person_order keys a crashed attempt left (repair.go).
	BeginOrderRepair(ctx context.Context, consumer string, committed uint64, mine func(project uint64) bool) (chstore.OrderRepair, error)
	RepairOrder(ctx context.Context, consumer string, r chstore.OrderRepair, committed uint64, mine func(project uint64) bool) error
	// ForgetCounts: the live counts are read again from the commit point
	// (livecount.go), which another process may have moved.
	ForgetCounts(consumer string)
}

// Ingester consumes the events stream.
type Ingester struct {
	progress jetstream.KeyValue
	cfg      Config
	js       jetstream.JetStream
	store    Store
	log      *slog.Logger
	metrics  *metrics
	folder   *fold.Folder
	// wholeSeen is the folder's whole project reads already counted.
	wholeSeen int
	intents   intents
	// inherit: the consumer whose commit a partition starts from when it
	// has none of its own (partition.go); lease: this consumer's.
	inherit string
	lease   *lease
	// retake: the lease was lost and is being taken again; heldThrough
	// is the commit point this process had reached then (Run).
	retake      bool
	heldThrough uint64
	// repair is the person_order repair owed since a start or a failed
	// write (repair.go).
	repair chstore.OrderRepair
	// next is the stream sequence the consumer must deliver next (see
	// collect); 0 right after the consumer was (re)created.
	next uint64
	// nextDelivery is the consumer sequence it must deliver next.
	nextDelivery uint64
	// behind: the last message delivered said the stream holds more for
	// the consumer (collect's stall check).
	behind bool
	// cons is the consumer subscribe created, asked by lostAtTail.
	cons jetstream.Consumer
	// served is the consumer's delivered count that lostAtTail last saw
	// beyond what this ingester received; 0 when it saw none.
	served uint64
	// dropDelivery, set by tests only, makes collect lose a delivered
	// message as the client does when its buffer is full.
	dropDelivery func(seq uint64) bool
	// lane is the write lane, nil when off (lane.go).
	lane *lane
	// regrows counts grown batches failed in a row, for the backoff
	// (grow.go).
	regrows int
	// growCap bounds grown batches' changed persons after one failed
	// (0: none); capKept counts grown commits since it last moved
	// (grow.go, dirtyBound).
	growCap, capKept int
	// refoldThrough: messages up to it may have been folded (and rows
	// of theirs written) by a grown batch that failed: they are folded
	// again as redeliveries, as a retry of a batch in hand is.
	refoldThrough uint64
	// slab hands out pendings (newPending): one allocation per
	// slabSize messages instead of one each.
	slab []pending
	// inputs is foldUpTo's buffer of the batch's inputs, kept between
	// batches (20,000 inputs of ~250 bytes: 5% of the ingester's
	// allocation in the bench's ingest when made for each). Nothing keeps it past
	// foldUpTo: the fold takes inputs by value, the chunk keeps events
	// rows, and the hook and the lane return slices of their own.
	inputs []fold.Input
}

// slabSize is how many pendings one allocation holds. A slab stays in
// memory while any of its pendings is in a batch; batches hold
// thousands, so little is kept beyond them.
const slabSize = 256

// New returns an ingester; Run starts it.
func New(cfg Config, js jetstream.JetStream, store Store, logger *slog.Logger, reg prometheus.Registerer) (*Ingester, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := fold.New(store)
	f.MaxCached = cfg.MaxCachedPersons
	f.DenseMisses = cfg.DenseMisses
	f.MaxPersonBytes = cfg.MaxPersonBytes
	base := cfg.Consumer
	cfg.Consumer = stream.ConsumerName(base, cfg.Partition, cfg.Streams.Partitions)
	i := &Ingester{cfg: cfg, js: js, store: store, log: logger, metrics: newMetrics(reg), folder: f}
	if cfg.Consumer != base {
		i.inherit = base
	}
	return i, nil
}

// ForgedCommand starts the dead-letter reason of a message that uses a
// reserved name (a command, or a property only commands carry) on a
// subject other than the API's command subject.
const ForgedCommand = "forged command"

// pending is one message of the batch being built.
type pending struct {
	msg jetstream.Msg
	seq uint64
	// delivery: the consumer sequence (gap check, collect).
	delivery uint64
	in       fold.Input
	skip     bool // already committed: acknowledge only
	// foreign: of another partition (stored before the stream was
	// partitioned): acknowledge only, on every attempt.
	foreign bool
	// last: the stream had nothing more for the consumer when this was
	// delivered, so the batch need not wait to fill.
	last bool
	// unparsed: the body still has to be parsed (parseAll).
	unparsed bool
	// command: the message came from the API's command subject (or is
	// a legacy one, see Config.LegacyCommandsUntil), so it may carry
	// reserved names.
	command bool
	// laned: a command the write lane folded ahead (lane.go): only
	// acknowledged here.
	laned bool
	dead  string // reason, when the message goes to the dead-letter stream
}

// Run consumes until ctx is cancelled. On cancellation it stops pulling,
// flushes the batch in hand, acknowledges it and returns nil.
func (i *Ingester) Run(ctx context.Context) error {
	for {
		err := i.run(ctx)
		if !errors.Is(err, errLeaseLost) || ctx.Err() != nil {
			return err
		}
		// Lost while NATS was unreachable for longer than the lease
		// (a restart of a single server, an election): wait for the
		// lease again, then fold from the last commit as a fresh start
		// does (recover). If another ingester committed meanwhile, this
		// process's memory of the log outside the fold (the transform
		// hook's record of chains and interruptions) may miss what it
		// recorded, so the process exits instead (takenOver).
		i.retake, i.heldThrough = true, i.folder.Committed
		i.metrics.leaseLosses.Inc()
		i.log.Warn("lease lost; waiting to take it again, then folding from the last commit", "consumer", i.cfg.Consumer)
	}
}

// run is one tenure of the lease: it returns errLeaseLost when the lease
// was lost, any other error when the ingester must stop.
func (i *Ingester) run(ctx context.Context) error {
	// Every statement names the consumer, so the next tenure can end
	// those still running when this one ends (recover).
	ctx = chstore.AsWriter(ctx, i.cfg.Consumer)
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	streams := i.cfg.Streams
	streams.Logger = i.log
	// Always checked: an ingester folding all of a partitioned stream
	// would write beside the partitions' ingesters.
	streams.Partitions = max(streams.Partitions, 1)
	// JetStream calls are retried while a cluster elects a leader
	// (cluster.go).
	err := i.whileUnavailable(ctx, "bind the streams", func() error { return stream.Ensure(ctx, i.js, streams) })
	if err != nil {
		return stopped(ctx, err)
	}
	err = i.whileUnavailable(ctx, "bind the progress bucket", func() (err error) {
		i.progress, err = progress.OpenReplicated(ctx, i.js, streams.Replicas)
		return err
	})
	if err != nil {
		return stopped(ctx, err)
	}
	// Nothing of the consumer or ClickHouse is touched before the lease.
	err = i.whileUnavailable(ctx, "take the lease", func() (err error) {
		i.lease, err = acquireLease(ctx, i.js, i.cfg.Consumer, i.cfg.LeaseTTL, streams.Replicas, i.log, lost)
		return err
	})
	if err != nil {
		return stopped(ctx, err)
	}
	defer i.lease.release()
	if err := i.takenOver(ctx); err != nil {
		return stopped(ctx, err)
	}
	if err := i.recover(ctx); err != nil {
		return stopped(ctx, err)
	}
	err = i.whileUnavailable(ctx, "start the write lane", func() error { return i.startLane(ctx) })
	if err != nil {
		return stopped(ctx, err)
	}
	defer i.stopLane()
	var iter jetstream.MessagesContext
	err = i.whileUnavailable(ctx, "create the consumer", func() (err error) {
		iter, err = i.subscribe(ctx)
		return err
	})
	if err != nil {
		return stopped(ctx, err)
	}
	// Stopping the iterator first means no new message arrives while the
	// last batch is flushed; the flush must finish before Run returns.
	defer func() { iter.Stop() }()
	i.log.Info("ingester consuming", "consumer", i.cfg.Consumer, "committed_seq", i.folder.Committed)
	for {
		batch, err := i.collect(ctx, iter, nil, 0)
		if err == nil && i.growing(batch) {
			var failed error
			batch, err, failed = i.grow(ctx, iter, batch)
			var regrow *regrowError
			switch {
			case errors.As(failed, &regrow):
				iter.Stop()
				if iter, err = i.resubscribe(ctx); err == nil {
					continue
				}
			case failed != nil:
				return stopped(ctx, failed)
			}
		}
		for len(batch) > 0 {
			perr := i.processUntilDone(ctx, batch)
			var ext *extendError
			var cut *cutError
			var through uint64
			switch {
			case errors.As(perr, &cut):
				// The write lane cut the batch (lane.go): its rest
				// goes on with the messages that follow.
				batch = cut.rest
			case errors.As(perr, &ext):
				through = ext.through
			case perr != nil:
				return perr
			}
			if ext == nil && cut == nil {
				break
			}
			if err != nil {
				// Collection ended (a gap, a stop): nothing of this
				// batch (or of its rest, after a cut) was written or
				// acknowledged, so it comes again from the commit point.
				break
			}
			batch, err = i.collect(ctx, iter, batch, through)
		}
		var gap *gapError
		var stall *stallError
		lost := errors.Is(err, jetstream.ErrNoHeartbeat)
		if errors.As(err, &gap) || errors.As(err, &stall) || lost {
			// The batch before the gap is committed; the messages from
			// the gap on come again, in order, from a new consumer.
			switch {
			case lost:
				// The consumer's server went quiet: on a cluster, its
				// leader was lost (cluster.go).
				i.log.Warn("consumer stopped sending heartbeats; recreated from the last commit", "committed_seq", i.folder.Committed)
			case stall != nil:
				i.metrics.gaps.Inc()
				i.log.Warn("messages lost in delivery at the tail (none came though the stream holds more); consumer recreated from the last commit",
					"waited", i.cfg.StallWait, "committed_seq", i.folder.Committed)
			default:
				i.metrics.gaps.Inc()
				i.log.Warn("messages lost in delivery; consumer recreated from the last commit", "expected_delivery", gap.want, "delivered", gap.got, "committed_seq", i.folder.Committed)
			}
			iter.Stop()
			if iter, err = i.resubscribe(ctx); err == nil {
				continue
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				i.log.Info("ingester stopped", "committed_seq", i.folder.Committed)
			}
			return stopped(ctx, err)
		}
	}
}

// recover reads the last committed sequence; rows above it belong to a
// batch that was being written when the process stopped, and reach at
// most as far as the intents say. It first ends the consumer's statements
// still running on the server: a killed ingester's last insert may still
// be writing, and what recovery reads must be final.
func (i *Ingester) recover(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := i.store.SettleWriter(ctx, i.cfg.Consumer)
		var seq uint64
		if err == nil {
			seq, err = i.store.LastCommitted(ctx, i.cfg.Consumer)
		}
		if err == nil {
			err = i.readIntents(ctx)
		}
		if err == nil && seq == 0 {
			seq, err = i.inherited(ctx)
		}
		if err == nil {
			err = i.beginRepair(ctx, seq)
		}
		if err == nil {
			i.folder.Reset()
			i.folder.Committed = seq
			// The live counts restart from the commit point too. After a
			// lost lease takenOver already exits if another ingester
			// committed; this keeps the counts right should the commit
			// point move any other way (one read per start).
			i.store.ForgetCounts(i.cfg.Consumer)
			return nil
		}
		i.log.Warn("cannot settle the consumer's statements, read commit markers or repair person_order", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff(attempt)):
		}
	}
}

// processUntilDone processes a batch, retrying until it is committed. A
// failure may leave part of the batch written, so before each retry the
// fold starts over from what ClickHouse holds, and the batch is marked as
// redelivered. The messages stay in hand, so order is kept (the consumer
// acknowledges nothing and never delivers them again).
//
// A shutdown lets the batch in hand finish, retries included, for up to
// ShutdownGrace; then it gives up without acknowledging, and the messages
// are delivered again to the next run (which starts from the last commit).
// Nothing is ever acknowledged that ClickHouse did not accept.
func (i *Ingester) processUntilDone(ctx context.Context, batch []*pending) error {
	gctx, stop := shutdown.Grace(ctx, i.cfg.ShutdownGrace)
	defer stop()
	for attempt := 0; ; attempt++ {
		fctx, cancel := context.WithTimeout(gctx, 5*time.Minute)
		err := i.process(fctx, batch)
		cancel()
		var ext *extendError
		var cut *cutError
		if err == nil || errors.As(err, &ext) || errors.As(err, &cut) || errors.Is(err, errLeaseLost) {
			return err
		}
		i.metrics.failures.Inc()
		i.log.Error("batch failed; retrying from the stored state", "err", err, "first_seq", batch[0].seq, "messages", len(batch), "attempt", attempt+1)
		// A stop asked for during the wait retries at once: the grace
		// period is better spent trying than sleeping.
		stopping := ctx.Done()
		if ctx.Err() != nil {
			stopping = nil
		}
		select {
		case <-time.After(backoff(attempt)):
		case <-stopping:
		case <-gctx.Done():
		}
		if gctx.Err() != nil {
			return fmt.Errorf("shutting down with an uncommitted batch (not acknowledged; the next start delivers it again from seq %d): %w", i.folder.Committed+1, err)
		}
		if err := i.recover(gctx); err != nil {
			return fmt.Errorf("shutting down with an uncommitted batch (not acknowledged): %w", err)
		}
		if err := i.reloadLane(gctx); err != nil {
			return fmt.Errorf("reload the write lane's records before a retry: %w", err)
		}
		for _, p := range batch {
			p.skip = p.foreign || p.seq <= i.folder.Committed
			p.in.Redelivered = true
		}
	}
}

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 8)
	return min(d, 10*time.Second)
}

// decode parses one message into a fold input or a dead letter.
func (i *Ingester) decode(msg jetstream.Msg) *pending {
	p := i.newPending()
	p.msg = msg
	meta, ok := ackMeta(msg.Reply())
	if !ok {
		m, err := msg.Metadata()
		if err != nil {
			p.dead = "no JetStream metadata: " + err.Error()
			return p
		}
		meta = ackInfo{stream: m.Sequence.Stream, consumer: m.Sequence.Consumer, delivered: m.NumDelivered, pending: m.NumPending}
	}
	p.seq, p.delivery = meta.stream, meta.consumer
	p.last = meta.pending == 0
	i.behind = !p.last
	i.metrics.lag.Set(float64(meta.pending))
	if p.seq <= i.folder.Committed {
		p.skip = true
		return p
	}
	mine, project, command, err := stream.Route(msg.Subject(), i.cfg.Partition, i.cfg.Streams.Partitions)
	if !mine {
		// Stored before the stream was partitioned, for another
		// partition: acknowledged with the batch, folded there.
		p.skip, p.foreign = true, true
		return p
	}
	if err != nil {
		p.dead = err.Error()
		return p
	}
	p.command = command || p.seq <= i.cfg.LegacyCommandsUntil
	// The body is parsed later, for the whole batch at once (parseAll).
	p.in = fold.Input{ProjectID: project, Seq: p.seq, Redelivered: meta.delivered > 1 || p.seq <= i.refoldThrough}
	p.unparsed = true
	return p
}

// newPending returns a zeroed pending from the slab.
func (i *Ingester) newPending() *pending {
	if len(i.slab) == 0 {
		i.slab = make([]pending, slabSize)
	}
	p := &i.slab[0]
	i.slab = i.slab[1:]
	return p
}

// parseAll parses the batch's message bodies on all cores: parsing is the
// largest part of the ingester's work and each message is independent.
func parseAll(batch []*pending) {
	workers := min(runtime.GOMAXPROCS(0), 1+len(batch)/512)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < len(batch); j += workers {
				p := batch[j]
				if !p.unparsed {
					continue
				}
				p.unparsed = false
				// The client gives each message its own payload, never
				// written again: the Event may share it (ParseOwned).
				ev, err := event.ParseOwned(p.msg.Data())
				if err != nil {
					p.dead = err.Error()
					continue
				}
				if reason := ev.Reserved(); reason != "" && !p.command {
					p.dead = ForgedCommand + ": " + reason + "; only the API publishes those, on " + stream.CommandsPrefix + "<project_id>"
					continue
				}
				p.in.Event = ev
			}
		}()
	}
	wg.Wait()
}

// extendError: the batch ends inside the range a crashed batch wrote
// (fold.Folder.CommitThrough) and must not be committed before it reaches
// through. Nothing of it was written; the fold was reset.
type extendError struct{ through uint64 }

func (e *extendError) Error() string {
	return fmt.Sprintf("batch must extend through seq %d, the end of a crashed batch's rows", e.through)
}

// process folds a batch, writes it, and acknowledges it.
func (i *Ingester) process(ctx context.Context, batch []*pending) error {
	start := time.Now()
	c, err := i.foldUpTo(ctx, batch)
	if err != nil {
		return err
	}
	var rest []*pending
	if c.cut != 0 {
		// Folded up to a write lane command's cut (lane.go): the rest
		// waits for the next batch, unwritten and unacknowledged.
		batch, rest = splitAfter(batch, c.cut)
	}
	last := batch[len(batch)-1].seq
	if through := i.folder.CommitThrough(); through > last {
		// Rows of a crashed batch reach beyond this one (refold.go):
		// committing here would hide this batch's rows behind them.
		i.folder.Reset()
		return &extendError{through: through}
	}
	if err := i.deadLetter(ctx, batch); err != nil {
		return err
	}
	if err := i.commit(ctx, c, batch[len(batch)-1], len(batch), start); err != nil {
		return err
	}
	if len(rest) > 0 {
		i.metrics.laneCuts.Inc()
		return &cutError{rest: rest}
	}
	return nil
}

// chunk is what the fold of some messages of a batch gave: one chunk is
// a whole batch, except when the batch grows with the backlog (grow.go).
type chunk struct {
	// events are the rows not yet written; written counts those a
	// grown batch wrote ahead of its commit.
	events  []eventstore.Row
	written int
	// firstSeq is the batch's first sequence to commit; foldable says
	// it has one (see foldUpTo).
	firstSeq uint64
	foldable bool
	// cut: the fold stopped after this sequence for the write lane
	// (laneCut); 0: it folded every message.
	cut uint64
}

// add takes in the fold of the batch's next messages.
func (c *chunk) add(next chunk) {
	if len(c.events) == 0 {
		c.events = next.events // written ahead (writeAhead): no copy
	} else {
		c.events = append(c.events, next.events...)
	}
	if c.firstSeq == 0 {
		c.firstSeq = next.firstSeq
	}
	c.foldable = c.foldable || next.foldable
}

// foldUpTo parses and folds messages of a batch (or of a grown batch's
// chunk), in memory: nothing is written. The fold may stop early for a
// write lane command (chunk.cut).
func (i *Ingester) foldUpTo(ctx context.Context, batch []*pending) (chunk, error) {
	parseAll(batch)
	i.markLaned(batch)
	buf := slices.Grow(i.inputs[:0], len(batch))
	defer func() {
		// Cleared: the inputs hold the batch's events, not to be kept
		// alive by the buffer.
		clear(buf[:cap(buf)])
		i.inputs = buf[:0]
	}()
	inputs := buf
	var firstLaned uint64
	for _, p := range batch {
		if p.foldable() {
			inputs = append(inputs, p.in)
		} else if p.laned && firstLaned == 0 {
			firstLaned = p.seq
		}
	}
	// foldable: the batch has messages to commit, even when the hook
	// leaves none to fold (all dropped, or its own commands), or when
	// they are all commands the lane folded ahead: their sequences must
	// be committed too (the deleter waits on a DELETE's), or a stream
	// ending in one would never commit it.
	foldable := len(inputs) > 0 || firstLaned > 0
	var firstSeq uint64
	if len(inputs) > 0 {
		firstSeq = inputs[0].Seq
	} else {
		firstSeq = firstLaned
	}
	inputs, err := i.transform(ctx, batch, inputs)
	if err != nil {
		return chunk{}, err
	}
	if i.lane != nil {
		inputs = i.withLane(batch, inputs)
		foldable = foldable || len(inputs) > 0
		if foldable && firstSeq == 0 {
			firstSeq = inputs[0].Seq
		}
	}
	var cut uint64
	if len(inputs) > laneCutEvery && i.laneCut(inputs, laneCutEvery) {
		// A command came before the fold began: the batch's reads
		// (Prepare) are spared too.
		inputs, cut = inputs[:laneCutEvery], inputs[laneCutEvery-1].Seq
	}
	if err := i.prepare(ctx, inputs); err != nil {
		return chunk{}, err
	}
	events := make([]eventstore.Row, 0, len(inputs))
	for k := range inputs {
		if cut == 0 && i.laneCut(inputs, k) {
			cut = inputs[k-1].Seq
			break
		}
		res, err := i.folder.Apply(ctx, inputs[k])
		if err != nil {
			return chunk{}, err
		}
		events = append(events, eventRow(&inputs[k], res))
	}
	return chunk{events: events, firstSeq: firstSeq, foldable: foldable, cut: cut}, nil
}

// leadMinPersons: a batch writing fewer persons writes the lane's along
// with the rest (a lead costs a round of inserts of its own; the whole of
// a small batch is written about as fast). A variable for tests.
var leadMinPersons = 1000

// commit ends a batch folded up to message end (messages long): the
// write lane's commands, the rows, the commit marker.
func (i *Ingester) commit(ctx context.Context, c chunk, end *pending, messages int, start time.Time) error {
	last := end.seq
	laned, err := i.takeLane(ctx, last)
	if err != nil {
		return err
	}
	c.events = append(c.events, laned...)
	c.foldable = c.foldable || len(laned) > 0
	if c.firstSeq == 0 && len(laned) > 0 {
		c.firstSeq = last
	}
	folded := i.folder.Flush()
	i.metrics.foldSeconds.Observe(time.Since(start).Seconds())
	if c.foldable {
		// Written only under the lease, and only for as long as it
		// surely holds (lease.go).
		wctx, release, err := i.lease.fence(ctx)
		if err != nil {
			return err
		}
		defer release()
		ctx := wctx
		wstart := time.Now()
		marker := chstore.BatchMarker{Consumer: i.cfg.Consumer, FirstSeq: c.firstSeq, LastSeq: last, Events: c.written + len(c.events), Mine: i.mine}
		if len(laned) > 0 && len(folded.Persons) >= leadMinPersons {
			// The lane's persons are written first and the lane's
			// watermark moves once they landed (lanelog.go,
			// laneVisible): an API write waits for its own rows, not
			// for the batch's (a grown batch's may be 200,000 persons).
			lead := make(map[[2]uint64]bool, len(laned))
			for _, r := range laned {
				if r.PersonID != 0 {
					lead[[2]uint64{r.ProjectID, r.PersonID}] = true
				}
			}
			marker.Lead = func(project, id uint64) bool { return lead[[2]uint64{project, id}] }
			marker.LeadDone = func() error {
				i.laneVisible(ctx, last)
				return nil
			}
		}
		write, err := i.unwritten(ctx, c.events)
		if err != nil {
			return err
		}
		if err := i.store.WriteBatch(ctx, write, folded, marker); err != nil {
			return err
		}
		i.folder.Committed = last
		i.laneCommitted(ctx, last)
		if err := i.repairIfDue(ctx, last); err != nil {
			// Committed: the retry skips the batch and tries the
			// repair again (recover).
			return err
		}
		// Readers waiting for their write learn it is visible. A lost
		// update is repaired by the next batch.
		if err := progress.Publish(ctx, i.progress, i.cfg.Consumer, last); err != nil {
			i.log.Warn("publish progress", "err", err)
		}
		i.keepLaneStart(ctx, last)
		i.metrics.flushSeconds.Observe(time.Since(wstart).Seconds())
		i.metrics.personRows.Add(float64(len(folded.Persons)))
		i.metrics.distinctIDRows.Add(float64(len(folded.DistinctIDs)))
		i.metrics.warnings.Add(float64(len(folded.Warnings)))
	}
	if i.lane != nil && end.last {
		i.lane.live.Store(true) // caught up: commands from here on are new
	}
	i.metrics.events.Add(float64(c.written + len(c.events)))
	i.metrics.batches.Inc()
	i.metrics.batchSize.Observe(float64(messages))
	i.metrics.committed.Set(float64(i.folder.Committed))
	return nil
}

// deadLetter publishes the batch's unfoldable messages, waiting for each
// acknowledgement, before the batch is acknowledged.
func (i *Ingester) deadLetter(ctx context.Context, batch []*pending) error {
	for _, p := range batch {
		if p.dead == "" {
			continue
		}
		msg := nats.NewMsg(stream.DeadLetterSubject(p.msg.Subject()))
		msg.Data = p.msg.Data()
		msg.Header.Set(stream.HeaderReason, p.dead)
		msg.Header.Set(stream.HeaderSubject, p.msg.Subject())
		msg.Header.Set(stream.HeaderSeq, strconv.FormatUint(p.seq, 10))
		// Dedupe a dead letter written twice across a redelivery.
		msg.Header.Set(jetstream.MsgIDHeader, "dlq-"+strconv.FormatUint(p.seq, 10))
		if _, err := i.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("dead-letter seq %d: %w", p.seq, err)
		}
		i.metrics.deadLettered.Inc()
		i.log.Warn("event dead-lettered", "seq", p.seq, "subject", p.msg.Subject(), "reason", p.dead)
	}
	return nil
}

// foldable: the message is folded by this batch (not committed before,
// not a dead letter, not a command the write lane folded ahead).
func (p *pending) foldable() bool { return !p.skip && p.dead == "" && !p.laned }

// eventRow is the events table row of a folded event (of its own
// sequence: a lane command's row is its message's, wherever it was folded).
func eventRow(in *fold.Input, res fold.Resolved) eventstore.Row {
	ev := &in.Event
	return eventstore.Row{
		ProjectID: in.ProjectID, UUID: ev.UUID, Event: ev.Event, DistinctID: ev.DistinctID,
		PersonID: res.PersonID, PersonUUID: res.PersonUUID, Timestamp: ev.Timestamp,
		Properties: ev.StoredProperties(), Seq: in.Own(),
	}
}

// prepare runs the folder's Prepare and counts the projects it read
// whole (fold/whole.go).
func (i *Ingester) prepare(ctx context.Context, inputs []fold.Input) error {
	err := i.folder.Prepare(ctx, inputs)
	if n := i.folder.WholeLoads(); n > i.wholeSeen {
		i.metrics.wholeReads.Add(float64(n - i.wholeSeen))
		i.wholeSeen = n
	}
	return err
}
