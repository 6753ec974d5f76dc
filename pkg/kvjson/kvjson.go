// Package kvjson reads JSON records kept in JetStream KV buckets, shared by
// the control plane and the plugin store.
package kvjson

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// List returns the latest value of every live key of kv, decoded as T, read
// with one ordered consumer (a watch stopped after the initial values). A
// record that does not decode is handed to bad: returning nil skips it, an
// error stops the listing.
func List[T any](ctx context.Context, kv jetstream.KeyValue, bad func(key string, err error) error) ([]T, error) {
	return listWatch[T](ctx, kv, ">", bad)
}

// listWatch is List over the keys matching pattern (NATS wildcards).
func listWatch[T any](ctx context.Context, kv jetstream.KeyValue, pattern string, bad func(key string, err error) error) ([]T, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(wctx, pattern, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kv.Bucket(), err)
	}
	defer func() {
		_ = w.Stop()
		// Release a producer that may be blocked on a full channel; the
		// loop ends when the subscription's close handler closes it.
		go func() {
			for range w.Updates() {
			}
		}()
	}()
	var out []T
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list %s: watch closed early", kv.Bucket())
			}
			if e == nil {
				return out, nil
			}
			var v T
			if err := json.Unmarshal(e.Value(), &v); err != nil {
				if err := bad(e.Key(), err); err != nil {
					return nil, err
				}
				continue
			}
			out = append(out, v)
		}
	}
}
