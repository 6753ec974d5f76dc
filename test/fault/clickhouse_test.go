package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// ClickHouse killed (SIGKILL) and restarted while the ingester folds and
// the API serves reads and writes; killed again, then the ingester and
// the API are stopped with SIGINT. Asserted: no answer is a 500 or a
// dropped connection; during the outage reads answer 503 with
// Retry-After (the unfiltered list may still answer 200 from a page kept
// at the watermark, which cannot move meanwhile) and writes 202
// (accepted into the log) or 503; the ingester
// resumes by itself after the restart; each binary exits within 30 s of
// SIGINT with ClickHouse dead, having acknowledged nothing it did not
// store; after a restart of everything the state equals an uninterrupted
// run of the same stream.
func TestClickHouseKilledMidIngestAndMidRequest(t *testing.T) {
	s := newSystem(t)
	last, ing, srv, l := s.startBusy(7)
	before := s.committed()
	t.Logf("fault at commit %d of %d, delivered %d", before, last, s.delivered())
	// Answers to requests that raced the kill are not judged by phase:
	// the phase changes before the kill, which takes a moment.
	l.setPhase("clickhouse dying")
	s.ch.Kill()
	time.Sleep(300 * time.Millisecond)
	l.setPhase("clickhouse down")
	time.Sleep(3 * time.Second)
	// The phase changes before the restart: a server that is starting
	// may already answer.
	l.setPhase("clickhouse restarted")
	s.ch.Restart(t)
	// The ingester resumes by itself and finishes the workload.
	testenv.WaitCommitted(t, s.store, "ingester", last, 2*time.Minute)
	l.setPhase("up")
	time.Sleep(500 * time.Millisecond)
	l.finish(t)
	if before >= last {
		t.Errorf("ClickHouse was killed after the workload was folded (commit %d of %d): not mid-ingest", before, last)
	}
	testenv.WaitCommitted(t, s.store, "ingester", s.lastSeq(), time.Minute)
	s.assertEqualsReference("a ClickHouse kill mid-ingest")
	l.assertNo5xx(t)
	l.assertOnly(t, "clickhouse down", "GET", 503)
	// A page kept at the watermark (which cannot move while ClickHouse is
	// down) is exactly what ClickHouse holds: it may still be served.
	l.assertOnly(t, "clickhouse down", "LIST", 200, 503)
	l.assertOnly(t, "clickhouse down", "PATCH", 202, 503)
	// The workload deletes and merges persons: the one read may be gone.
	l.assertOnly(t, "up", "LIST", 200)
	if !l.assertOnly(t, "up", "GET", 200, 404) {
		t.Logf("api log:\n%s", firstLines(srv.Stderr(), "backend unavailable", 10))
	}

	// Stop both with ClickHouse dead, while the ingester holds a batch.
	failed := strings.Count(ing.Stderr(), "batch failed")
	s.ch.Kill()
	s.publishMore(500)
	testenv.WaitFor(t, 30*time.Second, "the ingester failing a batch", func() (bool, error) {
		return strings.Count(ing.Stderr(), "batch failed") > failed, nil
	})
	s.stop(srv, "api")
	s.stop(ing, "ingester")
	held := s.delivered()
	s.ch.Restart(t)
	t.Logf("stopped holding up to seq %d, committed %d", held, s.committed())

	// Restart everything; the next start delivers from the last commit
	// (the consumer acknowledges nothing: what the stopped ingester held
	// beyond it is delivered again, and the state must show it once).
	ing = s.start(testenv.Build(t, module+"ingester"), "run")
	testenv.WaitCommitted(t, s.store, "ingester", s.lastSeq(), 2*time.Minute)
	s.stop(ing, "ingester")
	s.assertEqualsReference("ClickHouse kills and SIGINTs")
}
