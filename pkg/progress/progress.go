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
	mu      sync.Mutex
	seq     uint64
	changed chan struct{} // closed and replaced on every advance
	stop    func() error
}

// Watch starts following consumer's watermark.
func Watch(ctx context.Context, kv jetstream.KeyValue, consumer string) (*Watcher, error) {
	w := &Watcher{changed: make(chan struct{})}
	kw, err := kv.Watch(ctx, consumer)
	if err != nil {
		return nil, err
	}
	w.stop = kw.Stop
	go func() {
		for e := range kw.Updates() {
			if e == nil { // initial values delivered
				continue
			}
			if n, err := strconv.ParseUint(string(e.Value()), 10, 64); err == nil {
				w.advance(n)
			}
		}
	}()
	return w, nil
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

// Wait returns when the watermark reaches seq, or ErrTimeout after limit.
func (w *Watcher) Wait(ctx context.Context, seq uint64, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		w.mu.Lock()
		done, ch := w.seq >= seq, w.changed
		w.mu.Unlock()
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
func (w *Watcher) Stop() { _ = w.stop() }
