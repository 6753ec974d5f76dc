package transform

import (
	"errors"
	"testing"
	"time"
)

// TestLateInterruptDoesNotLeak: a time limit that fires as a call ends
// must not interrupt the next call. The timer's function runs on its own
// goroutine; when it ran after bounded cleared the interrupt, the next
// event of a well-behaved plugin failed as timed out (and the live
// instance was thrown away).
func TestLateInterruptDoesNotLeak(t *testing.T) {
	prog, err := compile("index.js", `exports.processEvent = function(e) { return e }`)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 200 * time.Microsecond
	in, err := newInstance(prog, nil, nil, Limits{Timeout: time.Second}.withDefaults(), newWatchdog(time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for i := 0; i < 2000; i++ {
		// Go code ending about when the limit fires (it does not see
		// the interrupt itself).
		in.limits.Timeout = limit
		_ = in.bounded(func() error { time.Sleep(limit); return nil })
		in.limits.Timeout = time.Second
		if _, err := in.call(sample("pageview"), 0); err != nil {
			late++
		}
	}
	if late > 0 {
		t.Fatalf("%d of 2000 calls after a limit that fired late failed", late)
	}
}

// TestWatchdog: one goroutine bounds the calls; a time limit shorter
// than its sampling period still stops a loop in time, and the goroutine
// ends once calls stop coming (an idle runtime holds none).
func TestWatchdog(t *testing.T) {
	prog, err := compile("index.js", `exports.processEvent = function(e) { if (e.event === "loop") for (;;) {} return e }`)
	if err != nil {
		t.Fatal(err)
	}
	dog := newWatchdog(200 * time.Millisecond)
	dog.idle = time.Second
	in, err := newInstance(prog, nil, nil, Limits{Timeout: 10 * time.Millisecond, HeapSample: 200 * time.Millisecond}.withDefaults(), dog, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := in.call(sample("loop"), 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("loop: %v", err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Fatalf("a 10 ms limit stopped the loop after %v", took)
	}
	if _, err := in.call(sample("pageview"), 0); err != nil {
		t.Fatalf("the call after an interrupt: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dog.mu.Lock()
		running := dog.running
		dog.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watchdog's goroutine outlived the calls")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
