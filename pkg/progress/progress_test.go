package progress

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/testenv"
)

// stalledKV is the real bucket whose watches deliver nothing, as a KV
// watch that lost its stream's leader on a cluster does (the watch
// itself is real, so the server side is as usual).
type stalledKV struct {
	jetstream.KeyValue
	watches atomic.Int32
}

func (s *stalledKV) Watch(ctx context.Context, key string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	s.watches.Add(1)
	kw, err := s.KeyValue.Watch(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return stalledWatch{kw}, nil
}

type stalledWatch struct{ jetstream.KeyWatcher }

func (stalledWatch) Updates() <-chan jetstream.KeyValueEntry { return nil }

// TestWatcherResyncsAStalledWatch: a watermark published while the watch
// delivers nothing is still seen within about Resync, and the watch
// found behind is started again.
func TestWatcherResyncsAStalledWatch(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	kv, err := Open(ctx, n.JS)
	if err != nil {
		t.Fatal(err)
	}
	stalled := &stalledKV{KeyValue: kv}
	w, err := Watch(ctx, stalled, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := Publish(ctx, kv, "c", 42); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := w.Wait(ctx, 42, 5*Resync); err != nil {
		t.Fatalf("watermark not seen through a stalled watch: %v (at %d)", err, w.Seq())
	}
	if d := time.Since(start); d > 2*Resync+500*time.Millisecond {
		t.Errorf("seen after %v, want within about %v", d, Resync)
	}
	if err := Publish(ctx, kv, "c", 43); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(ctx, 43, 5*Resync); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*Resync, "the stalled watch started again", func() (bool, error) {
		return stalled.watches.Load() >= 2, nil
	})
	w.Stop()
	w.Stop() // twice is fine
}
