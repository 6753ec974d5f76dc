package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// lingeringStore dies at the write after commits: it starts that batch's
// events insert under the consumer's name, as the ingester does, sends
// its rows and leaves the statement open on the server (as a killed
// process's last insert runs on there), then fails every write.
type lingeringStore struct {
	*chstore.Store
	consumer string
	mu       sync.Mutex
	commits  int
	open     chan driver.Batch
	dead     chan struct{}
}

func (s *lingeringStore) WriteBatch(ctx context.Context, events []eventstore.Row, b fold.Batch, m chstore.BatchMarker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.dead:
		return errors.New("dead")
	default:
	}
	if s.commits > 0 {
		s.commits--
		return s.Store.WriteBatch(ctx, events, b, m)
	}
	// Its own context: the statement outlives the ingester.
	batch, err := s.Conn().PrepareBatch(chstore.AsWriter(context.Background(), s.consumer),
		`INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
	if err != nil {
		return err
	}
	for _, e := range events {
		err := batch.Append(e.ProjectID, e.UUID, e.Event, e.DistinctID, e.PersonID, e.PersonUUID, e.Timestamp, uint16(e.Timestamp.Nanosecond()/1e6), e.Properties, e.Seq)
		if err != nil {
			return err
		}
	}
	s.open <- batch
	close(s.dead)
	return errors.New("killed while its events insert runs on the server")
}

// TestRecoveryWaitsForTheLastTenuresInsert: an ingester dies while the
// server still runs its last batch's events insert; the next tenure must
// not read what the batch left (the rows of an uncommitted write, dedupe.go)
// until that insert has ended. Here the insert ends a second into the
// next tenure: a recovery that read at once would find none of its rows
// and write them again, two events rows of one message (the analysis
// counts rows) and events_hourly counting both; CI saw the second after
// SIGKILLs (cmd/ingester TestSIGKILLMidStream).
func TestRecoveryWaitsForTheLastTenuresInsert(t *testing.T) {
	n, last, store := crashSetup(t, 5, 250, 20)
	cfg := testConfig("lingering")
	cfg.BatchSize, cfg.BatchWait, cfg.GrowFor = 80, time.Second, 0
	dying := &lingeringStore{Store: store, consumer: cfg.Consumer, commits: 1, open: make(chan driver.Batch, 1), dead: make(chan struct{})}
	runUntilClosed(t, cfg, n, dying, dying.dead)
	open := <-dying.open
	sent := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		sent <- open.Send()
	}()
	runUntil(t, cfg, n.JS, store, last)
	if err := <-sent; err != nil {
		t.Fatalf("the last tenure's insert: %v", err)
	}
	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	wantOneRowPerMessage(t, store, ref)
	if got, want := testenv.Snapshot(t, store), testenv.Snapshot(t, ref); got != want {
		t.Fatalf("state after a tenure whose insert outlived it differs from an uninterrupted run:\n%s", testenv.FirstDiff(got, want))
	}
}
