package fault

import (
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
	s.nats.ShutdownServer()
	l.setPhase("nats dying")
	time.Sleep(300 * time.Millisecond)
	l.setPhase("nats down")
	time.Sleep(2 * time.Second)
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
	l.assertOnly(t, "nats down", "PATCH", 503)
	l.assertOnly(t, "up", "GET", 200, 404)

	testenv.WaitCommitted(t, s.store, "ingester", s.lastSeq(), time.Minute)
	s.stop(srv, "api")
	s.stop(ing, "ingester")
	s.assertEqualsReference("a NATS restart")
}
