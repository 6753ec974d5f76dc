package transform

import (
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
	in, err := newInstance(prog, nil, Limits{Timeout: time.Second}.withDefaults())
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
