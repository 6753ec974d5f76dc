package transform

import (
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// watchdog interrupts calls that run past their time limit or grow the
// heap past theirs. One goroutine watches every call of a Runtime: a
// goroutine, a timer and a ticker per call cost more than a trivial
// plugin's call, and waiting for that goroutine to end made each call
// wait for the scheduler on a loaded machine. The goroutine runs while
// calls come and ends after a quiet while, so an idle runtime holds none.
type watchdog struct {
	mu      sync.Mutex
	calls   map[*watched]struct{}
	running bool
	sample  time.Duration // heap sampling period
	wake    chan struct{} // a new call with a nearer deadline
	heap    []metrics.Sample
	idle    time.Duration // idleFor; shorter in tests
}

// watched is one call under way.
type watched struct {
	vm       *goja.Runtime
	deadline time.Time
	base     uint64 // heap bytes when the call began
	maxGrow  uint64
}

// idleFor is how long the goroutine waits without a call before it ends.
const idleFor = time.Second

func newWatchdog(sample time.Duration) *watchdog {
	return &watchdog{calls: map[*watched]struct{}{}, sample: sample, wake: make(chan struct{}, 1),
		heap: []metrics.Sample{{Name: heapMetric}}, idle: idleFor}
}

// arm starts watching a call on vm under l; disarm must follow.
func (d *watchdog) arm(w *watched, vm *goja.Runtime, l Limits) {
	d.mu.Lock()
	*w = watched{vm: vm, deadline: time.Now().Add(l.Timeout), base: heapBytes(d.heap), maxGrow: l.MaxHeapGrowth}
	d.calls[w] = struct{}{}
	if !d.running {
		d.running = true
		go d.loop()
	} else if l.Timeout < d.sample {
		select { // a deadline nearer than the next round
		case d.wake <- struct{}{}:
		default:
		}
	}
	d.mu.Unlock()
}

// disarm stops watching w. The watchdog interrupts only calls it holds,
// under mu, so once disarm returns no interrupt of this call can come:
// the caller's ClearInterrupt after it is final (an interrupt set after
// it would stop the runtime's next call at its first instruction).
func (d *watchdog) disarm(w *watched) {
	d.mu.Lock()
	delete(d.calls, w)
	d.mu.Unlock()
}

func (d *watchdog) loop() {
	t := time.NewTimer(d.sample)
	defer t.Stop()
	busy := time.Now()
	for {
		select {
		case <-t.C:
		case <-d.wake:
		}
		d.mu.Lock()
		now := time.Now()
		if len(d.calls) > 0 {
			busy = now
		} else if now.Sub(busy) >= d.idle {
			d.running = false
			d.mu.Unlock()
			return
		}
		next := now.Add(d.sample)
		var h uint64
		if len(d.calls) > 0 {
			h = heapBytes(d.heap)
		}
		for w := range d.calls {
			switch {
			case !now.Before(w.deadline):
				w.vm.Interrupt(ErrTimeout)
				delete(d.calls, w)
			case h > w.base && h-w.base > w.maxGrow:
				w.vm.Interrupt(ErrMemory)
				delete(d.calls, w)
			case w.deadline.Before(next):
				next = w.deadline
			}
		}
		d.mu.Unlock()
		t.Reset(time.Until(next))
	}
}
