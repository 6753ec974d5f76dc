// Package shutdown holds the one rule every binary's stop path follows:
// work in hand when a stop is asked for may finish, but only for a bounded
// grace period, so that a dead dependency cannot hold a process forever.
package shutdown

import (
	"context"
	"time"
)

// Grace returns a context that is not cancelled with ctx but grace after
// it: a statement or batch in hand when ctx is cancelled (a SIGINT) may
// finish within grace, and is cut off after it. stop releases the context
// and must be called.
func Grace(ctx context.Context, grace time.Duration) (gctx context.Context, stop context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer *time.Timer
	started := make(chan struct{})
	unregister := context.AfterFunc(ctx, func() {
		timer = time.AfterFunc(grace, cancel)
		close(started)
	})
	return gctx, func() {
		if !unregister() {
			// The AfterFunc ran (or is running): stop its timer.
			<-started
			timer.Stop()
		}
		cancel()
	}
}
