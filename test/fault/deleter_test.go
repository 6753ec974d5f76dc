package fault

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/reference"
)

// The deleter killed with SIGKILL mid-run (after it issued a mutation),
// then run on a schedule and stopped with SIGINT while ClickHouse is dead:
// it exits within 30 s, and after a restart one more run leaves the
// deletion requests and the events exactly as one uninterrupted run does.
func TestDeleterKilledMidRunAndStoppedWithClickHouseDead(t *testing.T) {
	deleter := testenv.Build(t, module+"deleter")
	s := newSystem(t)
	last := testenv.PublishWorkload(t, s.nats.JS, 0, testenv.Workload(11, 3000, 60))

	// Reference: the same events folded, then one uninterrupted run. The
	// workload's deletions mostly name persons that do not exist: delete
	// (with their events) twenty that do.
	ref := reference.Run(t, s.nats.JS, "reference", last)
	last = publishDeletions(t, s, ref, 20)
	reference.Fold(t, s.nats.JS, ref, "reference", last)
	if n := count(t, ref, "SELECT count() FROM person_deletion_requests FINAL"); n < 5 {
		t.Fatalf("the workload queued %d deletion requests; the test needs several", n)
	}
	p := testenv.StartProcess(t, deleter, []string{"CLICKHOUSE_ADDR=" + testenv.ClickHouseAddr(t), "CLICKHOUSE_DATABASE=" + ref.Database()}, "run-now")
	if _, err := p.Wait(t, 2*time.Minute); err != nil {
		t.Fatalf("reference deletion run: %v\n%s", err, p.Stderr())
	}

	reference.Fold(t, s.nats.JS, s.store, "ingester", last)
	small := []string{"DELETER_BATCH_SIZE=1"}
	mutations := "SELECT count() FROM system.mutations WHERE database = 'fault' AND table = 'events'"
	p = s.startWith(deleter, small, "run-now")
	testenv.WaitFor(t, time.Minute, "a mutation issued", func() (bool, error) {
		return count(t, s.store, mutations) > 0, nil
	})
	p.Kill()
	open := "SELECT count() FROM person_deletion_requests FINAL WHERE status != 'verified'"
	if count(t, s.store, open) == 0 {
		t.Fatal("the run finished before SIGKILL: not mid-run")
	}

	// Scheduled runs; ClickHouse dies during one; SIGINT.
	issued := count(t, s.store, mutations)
	p = s.startWith(deleter, append(small, "DELETER_SCHEDULE=@every 1s"), "run")
	testenv.WaitFor(t, time.Minute, "the scheduled run issuing a mutation", func() (bool, error) {
		return count(t, s.store, mutations) > issued, nil
	})
	s.ch.Kill()
	s.stop(p, "deleter")
	s.ch.Restart(t)

	for attempt := 0; ; attempt++ {
		p = s.start(deleter, "run-now")
		_, err := p.Wait(t, 2*time.Minute)
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatalf("deletion run after the restart: %v\n%s", err, p.Stderr())
		}
	}
	if got, want := testenv.Snapshot(t, s.store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after a SIGKILL and a stop with ClickHouse dead differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}

func count(t *testing.T, st *chstore.Store, query string) uint64 {
	t.Helper()
	var n uint64
	if err := st.Conn().QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// publishDeletions publishes person deletions with their events for n
// live persons of st, as the API does, and returns the last sequence.
func publishDeletions(t *testing.T, s *system, st *chstore.Store, n int) uint64 {
	t.Helper()
	rows, err := st.Conn().Query(context.Background(), "SELECT id FROM persons FINAL WHERE is_deleted = 0 AND project_id = 1 ORDER BY id LIMIT ?", n)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var events []testenv.Message
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		events = append(events, testenv.DeletePerson(id))
	}
	// Numbered so that all land in project 1 (PublishWorkload spreads
	// event i over project 1+i%3).
	var last uint64
	for i, e := range events {
		last = testenv.PublishWorkload(t, s.nats.JS, 3_000_000+3*i, []testenv.Message{e})
	}
	return last
}
