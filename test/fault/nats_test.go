package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// The NATS server restarted (same port, same store folder) while the
// ingester folds and the API serves reads and writes. Asserted: no 500 or
// dropped connection; while NATS is down, person writes answer 503 with
// Retry-After and reads (ClickHouse is up) 200 or 404; the ingester
// resumes by itself; the state equals an uninterrupted run.
func TestNATSRestarted(t *testing.T) {
	s := newSystem(t)
	last, ing, srv, l := s.startBusy(13)
	before := s.committed()
	t.Logf("fault at commit %d of %d, delivered %d", before, last, s.delivered())
	l.setPhase("nats dying")
	s.nats.ShutdownServer()
	time.Sleep(300 * time.Millisecond)
	l.setPhase("nats down")
	// Longer than a write's publish timeout (5 s), so writes sent while
	// NATS is down are answered 503 before it comes back.
	time.Sleep(6 * time.Second)
	l.setPhase("nats restarting")
	s.nats.StartServer(t)
	testenv.WaitCommitted(t, s.store, "ingester", last, 2*time.Minute)
	l.setPhase("up")
	time.Sleep(500 * time.Millisecond)
	l.finish(t)
	if before >= last {
		t.Errorf("NATS was restarted after the workload was folded (commit %d of %d)", before, last)
	}
	l.assertNo5xx(t)
	l.assertOnly(t, "nats down", "GET", 200, 404)
	l.assertOnly(t, "nats down", "LIST", 200)
	// A write is answered within its publish timeout (5 s), so with one
	// write in flight per worker, each spans phases: 503 when NATS stayed
	// down for the whole timeout, 202 when it came back in time (the
	// change is in the log), never anything else, and never a hang.
	refused := 0
	for phase, answers := range l.answers {
		if !strings.Contains(phase, "nats down") {
			continue
		}
		for k, v := range answers {
			switch {
			case k == "PATCH 503":
				refused += v
			case strings.HasPrefix(k, "PATCH ") && k != "PATCH 202":
				t.Errorf("during %s: %d answers %q, want 202 or 503", phase, v, k)
			}
		}
	}
	if refused == 0 {
		t.Errorf("no PATCH answered 503 while NATS was down: %v", l.answers)
	}
	l.assertOnly(t, "up", "GET", 200, 404)
	l.assertOnly(t, "up", "LIST", 200)

	testenv.WaitCommitted(t, s.store, "ingester", s.lastSeq(), time.Minute)
	s.stop(srv, "api")
	s.stop(ing, "ingester")
	s.assertEqualsReference("a NATS restart")
	t.Logf("ingester log:\n%s", ing.Stderr())
}
