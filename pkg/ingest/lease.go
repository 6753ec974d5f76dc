package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// One running ingester per consumer (partition). Each start deletes and
// recreates its durable consumer from the last commit (delivery.go), so a
// second ingester started on the same partition by mistake would pull the
// consumer from under the first, and both would write the partition's
// batches. The lease keeps it out: a key per consumer in the KV bucket
// ingest_leases, whose entries expire LeaseTTL after their last write.
//
//   - A start creates the key (a create fails while it exists) and waits,
//     logging the holder, until it can: a second ingester is a standby
//     that takes over when the first stops (a stop deletes the key) or dies
//     (the key expires). It touches neither the consumer nor ClickHouse
//     before.
//   - The holder renews the key every LeaseTTL/5 with the revision it last
//     wrote. A renewal that finds another revision while the key still
//     holds this tenure's value adopts that revision (an earlier renewal
//     timed out on the client but landed: ownRenewal). Any other value
//     means the key expired and someone else holds it: the ingester stops writing at once
//     (errLeaseLost ends this tenure), then stands by like a second
//     ingester and, once it takes the lease again, folds from the last
//     commit as a fresh start does (Run). A NATS outage longer than the
//     TTL loses the lease with nobody else around, and the ingester
//     resumes by itself.
//   - The fence: a batch is written only while the last successful renewal
//     started less than LeaseTTL/2 ago, and its writes get that moment as
//     their deadline, moved on by each renewal made meanwhile (fence). The key expires no earlier than LeaseTTL after that
//     renewal started, so a holder cut off from NATS has stopped writing
//     (its inserts cancelled) half a TTL before anyone else can hold the
//     lease. While the fence is closed writes fail and are retried; a
//     renewal that succeeds with the old revision proves nobody held the
//     key meanwhile, and opens it again.

// LeaseBucket is the KV bucket of the ingesters' leases.
const LeaseBucket = "ingest_leases"

// errLeaseLost: another ingester holds this consumer's lease now.
var errLeaseLost = errors.New("another ingester took over this consumer's lease (it expired while this one could not renew it); not writing until this one holds it again")

// errLeaseLapsed: the lease could not be renewed lately; writes wait.
var errLeaseLapsed = errors.New("lease not renewed within half its TTL (NATS unreachable?); not writing until it is")

type lease struct {
	kv  jetstream.KeyValue
	key string
	ttl time.Duration
	val []byte
	log *slog.Logger

	mu      sync.Mutex
	rev     uint64
	renewed time.Time // start of the last successful write of the key
	lost    bool
	stop    chan struct{}
	done    chan struct{}
}

// holder is the value of a lease key: who holds it, for the log of the
// ingester waiting for it.
type holder struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// openLeases binds the bucket, creating it when missing.
func openLeases(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: LeaseBucket, Description: "which ingester runs each consumer; entries expire unless renewed",
			History: 1, TTL: ttl, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, LeaseBucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", LeaseBucket, err)
	}
	return kv, nil
}

// acquireLease waits until the consumer's lease is free and takes it.
// cancel is called with errLeaseLost when the lease is lost later.
func acquireLease(ctx context.Context, js jetstream.JetStream, key string, ttl time.Duration, replicas int, log *slog.Logger, cancel context.CancelCauseFunc) (*lease, error) {
	kv, err := openLeases(ctx, js, ttl, replicas)
	if err != nil {
		return nil, err
	}
	if st, err := kv.Status(ctx); err == nil && st.TTL() != ttl {
		// The bucket's TTL is the lease's: every ingester must agree.
		ttl = st.TTL()
		log.Info("lease TTL taken from the existing bucket", "ttl", ttl)
	}
	host, _ := os.Hostname()
	val, _ := json.Marshal(holder{Host: host, PID: os.Getpid(), Started: time.Now().UTC()})
	l := &lease{kv: kv, key: key, ttl: ttl, val: val, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	var last string
	for {
		start := time.Now()
		rev, err := kv.Create(ctx, key, val)
		if err == nil {
			l.rev, l.renewed = rev, start
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			log.Warn("cannot take the consumer's lease", "consumer", key, "err", err)
		} else if e, gerr := kv.Get(ctx, key); gerr == nil && string(e.Value()) != last {
			last = string(e.Value())
			log.Warn("another ingester runs this consumer; waiting for its lease to end (it stops, or its lease expires)", "consumer", key, "holder", last, "ttl", ttl)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(ttl/5, time.Second)):
		}
	}
	go l.keep(cancel)
	return l, nil
}

// keep renews the lease until release.
func (l *lease) keep(cancel context.CancelCauseFunc) {
	defer close(l.done)
	tick := time.NewTicker(l.ttl / 5)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		if !l.renew(true) {
			cancel(errLeaseLost)
			return
		}
	}
}

// renew writes the key once, at the revision last written, and reports
// false when the lease is lost. A refusal for the revision where the
// key still holds this tenure's value (ownRenewal) renews again at once
// from the adopted revision, when retry allows.
func (l *lease) renew(retry bool) bool {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	start := time.Now()
	ctx, done := context.WithTimeout(context.Background(), l.ttl/5)
	next, err := l.kv.Update(ctx, l.key, l.val, rev)
	done()
	switch {
	case err == nil:
		l.mu.Lock()
		l.rev, l.renewed = next, start
		l.mu.Unlock()
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists):
		if l.ownRenewal() {
			return !retry || l.renew(false)
		}
		l.mu.Lock()
		l.lost = true
		l.mu.Unlock()
		l.log.Error("lease lost", "consumer", l.key, "err", err)
		return false
	default:
		l.log.Warn("cannot renew the lease", "consumer", l.key, "err", err)
	}
	return true
}

// ownRenewal reports whether a renewal refused for its revision met this
// tenure's own value: an earlier renewal timed out on the client but
// landed in the server (seen on a loaded two-core machine 20 minutes into
// a 50M-message ingest). Nobody else writes this value (it names
// this process and the moment it took the lease), so the key is still
// ours: its revision is adopted and renewed from at once (renew). renewed
// stays at the last renewal seen to succeed, so the fence only gets
// stricter meanwhile.
func (l *lease) ownRenewal() bool {
	ctx, done := context.WithTimeout(context.Background(), l.ttl/5)
	defer done()
	e, err := l.kv.Get(ctx, l.key)
	if err != nil || !bytes.Equal(e.Value(), l.val) {
		return false
	}
	l.mu.Lock()
	l.rev = e.Revision()
	l.mu.Unlock()
	l.log.Warn("a lease renewal that timed out had landed; holding on with its revision", "consumer", l.key, "revision", e.Revision())
	return true
}

// fence returns a context for a batch's writes, or an error when the
// lease does not allow writing now. The context ends when the lease
// might lapse: half a TTL after the last successful renewal, counted
// from the renewal current at that moment, so renewals made while the
// batch is written move the end on. A batch whose statements together
// take longer than half a TTL (a loaded ClickHouse: a retry's restore of
// 20k keys took over 5 s at a load average of 15-49 on two cores) then
// finishes while the lease holds, instead of being cancelled and retried
// for ever. Its Deadline is read per statement (clickhouse-go sets each
// statement's socket deadline from it), so every statement still ends,
// at the latest, half a TTL after the renewal that was current when it
// began, and the key expires no earlier than a whole TTL after that.
func (l *lease) fence(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if l == nil {
		return ctx, func() {}, nil
	}
	lost, until := l.bound()
	if lost {
		return nil, nil, errLeaseLost
	}
	if !time.Now().Before(until) {
		return nil, nil, errLeaseLapsed
	}
	inner, cancel := context.WithCancelCause(ctx)
	f := &fenced{Context: inner, l: l}
	stop := make(chan struct{})
	go f.watch(until, cancel, stop)
	var once sync.Once
	return f, func() {
		once.Do(func() {
			close(stop)
			cancel(context.Canceled)
		})
	}, nil
}

// bound says whether the lease is lost and until when it surely holds.
func (l *lease) bound() (lost bool, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.renewed.Add(l.ttl / 2)
}

// fenced is a fence's context. Its Deadline is the lease's current bound:
// it moves with each renewal, which the context package does not expect
// of a deadline, so nothing derives a fixed deadline from it in this
// package; derived contexts (context.WithTimeout in the store) ask
// their parent again, and a statement takes the bound of its start.
type fenced struct {
	context.Context
	l *lease
}

func (f *fenced) Deadline() (time.Time, bool) {
	_, until := f.l.bound()
	if d, ok := f.Context.Deadline(); ok && d.Before(until) {
		return d, true
	}
	return until, true
}

// watch cancels the writes when the lease is lost, or when its bound
// passes without a renewal having moved it.
func (f *fenced) watch(until time.Time, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-f.Context.Done():
			return
		case <-t.C:
		}
		lost, next := f.l.bound()
		switch {
		case lost:
			cancel(errLeaseLost)
			return
		case time.Now().Before(next):
			t.Reset(time.Until(next))
		default:
			cancel(errLeaseLapsed)
			return
		}
	}
}

// release stops renewing and frees the lease for a successor at once.
func (l *lease) release() {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	lost, rev := l.lost, l.rev
	l.mu.Unlock()
	if lost {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Only our own revision: a successor's key stays.
	if err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
		l.log.Warn("cannot release the lease; a successor waits for it to expire", "consumer", l.key, "err", err)
	}
}

// errTakenOver: another ingester committed this consumer's batches while
// this one had lost its lease.
var errTakenOver = errors.New("another ingester folded this consumer while this one had lost its lease; exiting, so that a restart reads what it recorded (transformation chains and outcomes)")

// takenOver, on taking a lost lease again, checks that nobody committed
// meanwhile. The fold restarts from ClickHouse either way (recover); what
// a fresh process also reloads is the hook's record of the log, which
// only a restart reads again.
func (i *Ingester) takenOver(ctx context.Context) error {
	if !i.retake {
		return nil
	}
	c, err := i.store.LastCommitted(ctx, i.cfg.Consumer)
	if err != nil {
		return err
	}
	if c != i.heldThrough {
		i.log.Error("lease taken again after another ingester committed", "consumer", i.cfg.Consumer, "held_through", i.heldThrough, "committed_seq", c)
		return errTakenOver
	}
	i.retake = false
	return nil
}
