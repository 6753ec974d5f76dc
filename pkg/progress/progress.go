// Package progress shares how far the ingester has folded the stream, so
// the API can answer a write only once its own event is visible to reads.
//
// The ingester puts its last committed stream sequence in the KV bucket
// ingest_progress under its consumer name after every batch; API instances
// watch that key.
package progress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the KV bucket holding the watermarks.
const Bucket = "ingest_progress"

// Open binds the bucket as it is, creating it with one replica if missing.
func Open(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	return OpenReplicated(ctx, js, 1)
}

// OpenReplicated binds the bucket as it is, creating it with replicas if
// missing. An existing bucket keeps the settings an operator gave it.
func OpenReplicated(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: Bucket, Description: "last stream sequence each ingester committed to ClickHouse",
			History: 1, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			// Created meanwhile by another process: bind to it.
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", Bucket, err)
	}
	return kv, nil
}

// Publish records a consumer's committed sequence.
func Publish(ctx context.Context, kv jetstream.KeyValue, consumer string, seq uint64) error {
	_, err := kv.Put(ctx, consumer, []byte(strconv.FormatUint(seq, 10)))
	return err
}

// ErrTimeout is returned by Wait when the ingester did not get there in time.
var ErrTimeout = errors.New("the ingester has not folded the change yet")

// Watcher follows one consumer's watermark.
type Watcher struct {
	kv  jetstream.KeyValue
	key string

	mu      sync.Mutex
	seq     uint64
	changed chan struct{} // closed and replaced on every advance
	quit    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// Resync is how often a Watcher reads the watermark itself. A KV watch is
// an ordered consumer; on a NATS cluster, one whose stream lost its
// leader can stop delivering without ending (pkg/ingest's
// TestClusterSurvivesTheLossOfANode saw it). The read catches the
// watermark up within Resync, and a watch found behind twice in a row is
// started again.
const Resync = time.Second

// Watch starts following consumer's watermark.
func Watch(ctx context.Context, kv jetstream.KeyValue, consumer string) (*Watcher, error) {
	w := &Watcher{kv: kv, key: consumer, changed: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	kw, err := kv.Watch(ctx, consumer)
	if err != nil {
		return nil, err
	}
	go w.run(kw)
	return w, nil
}

// run follows the watch and reads the key every Resync until Stop.
func (w *Watcher) run(kw jetstream.KeyWatcher) {
	defer close(w.done)
	defer func() {
		if kw != nil {
			_ = kw.Stop()
		}
	}()
	tick := time.NewTicker(Resync)
	defer tick.Stop()
	// watched: the newest value the watch delivered; read: the value the
	// last read found.
	var watched, read uint64
	for {
		var updates <-chan jetstream.KeyValueEntry
		if kw != nil {
			updates = kw.Updates()
		}
		select {
		case <-w.quit:
			return
		case e, ok := <-updates:
			if !ok {
				kw = nil // ended: the next read starts another
				continue
			}
			if e == nil { // initial values delivered
				continue
			}
			if n, err := strconv.ParseUint(string(e.Value()), 10, 64); err == nil {
				watched = max(watched, n)
				w.advance(n)
			}
		case <-tick.C:
			stalled := kw == nil || read > watched
			read = w.read()
			w.advance(read)
			if stalled && read > watched {
				if kw != nil {
					_ = kw.Stop()
				}
				ctx, cancel := context.WithTimeout(context.Background(), Resync)
				next, err := w.kv.Watch(ctx, w.key)
				cancel()
				if kw = next; err != nil {
					kw = nil
				}
			}
		}
	}
}

// read returns the watermark as stored, 0 when it cannot be read.
func (w *Watcher) read() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), Resync)
	defer cancel()
	e, err := w.kv.Get(ctx, w.key)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(string(e.Value()), 10, 64)
	return n
}

func (w *Watcher) advance(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.seq {
		return
	}
	w.seq = seq
	close(w.changed)
	w.changed = make(chan struct{})
}

// Seq is the last committed sequence seen.
func (w *Watcher) Seq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// reached reports whether the watermark is at seq, and the channel closed
// at its next advance.
func (w *Watcher) reached(seq uint64) (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq >= seq, w.changed
}

// Wait returns when the watermark reaches seq, or ErrTimeout after limit.
func (w *Watcher) Wait(ctx context.Context, seq uint64, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		done, ch := w.reached(seq)
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return ErrTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.stopped.Do(func() { close(w.quit) })
	<-w.done
}
