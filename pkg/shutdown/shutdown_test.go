package shutdown

import (
	"context"
	"testing"
	"time"
)

func TestGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	gctx, stop := Grace(ctx, 50*time.Millisecond)
	defer stop()
	cancel()
	if gctx.Err() != nil {
		t.Fatal("the grace context ended with its parent")
	}
	start := time.Now()
	select {
	case <-gctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the grace context outlived its grace")
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("ended %s after the parent, want about 50ms", d)
	}

	// stop ends it at once, before or after the parent.
	gctx, stop = Grace(context.Background(), time.Hour)
	stop()
	if gctx.Err() == nil {
		t.Error("stop did not end the grace context")
	}
}
