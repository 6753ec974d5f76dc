package ingest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestChainCommandsFoldNothing: a transformation chain command, from the
// API's subject, is taken out of the fold even when the ingester runs no
// hook: no person for its distinct id, no events row; the batch commits.
func TestChainCommandsFoldNothing(t *testing.T) {
	n := testenv.StartNATS(t, "")
	publishMessages(t, n.JS, 7, []testenv.Message{
		{Body: `{"event":"e","distinct_id":"a"}`},
		{Body: `{"event":"$set_transformations","distinct_id":"$transformations","properties":{"$transformations":[]}}`, Command: true},
	})
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("ingester"), n.JS, store, 2)
	var persons, events uint64
	row := store.Conn().QueryRow(context.Background(), `SELECT
		(SELECT count() FROM person_distinct_ids FINAL WHERE project_id = 7),
		(SELECT count() FROM events FINAL WHERE project_id = 7)`)
	if err := row.Scan(&persons, &events); err != nil {
		t.Fatal(err)
	}
	if persons != 1 || events != 1 {
		t.Fatalf("distinct ids %d, events %d; want 1 and 1 (the command folds nothing)", persons, events)
	}
}

// dropAll is a hook that drops every event and fails the test when called
// with nothing: the ingester's side of the hook contract.
type dropAll struct {
	t     *testing.T
	calls atomic.Int32
}

func (h *dropAll) Transform(_ context.Context, in []HookInput) ([]fold.Input, error) {
	h.calls.Add(1)
	if len(in) == 0 {
		h.t.Error("hook called with an empty batch")
	}
	return nil, nil
}

// TestHookBatches: a batch of dead letters only never reaches the hook; a
// batch whose events the hook all drops still commits (its messages are
// done), with no rows.
func TestHookBatches(t *testing.T) {
	n := testenv.StartNATS(t, "")
	if err := stream.Ensure(context.Background(), n.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Publish(context.Background(), n.JS, 7, "garbage", []byte(`{not json`)); err != nil {
		t.Fatal(err)
	}
	store := testenv.ClickHouse(t)
	cfg := testConfig("ingester")
	hook := &dropAll{t: t}
	cfg.Hook = hook
	cancel, done := startIngester(t, cfg, n.JS, store)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitFor(t, 30*time.Second, "the dead letter", func() (bool, error) {
		s, err := n.JS.Stream(context.Background(), stream.DeadLetter)
		if err != nil {
			return false, err
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 1, err
	})
	publishMessages(t, n.JS, 7, []testenv.Message{{Body: `{"event":"e","distinct_id":"a"}`}})
	testenv.WaitCommitted(t, store, "ingester", 2, 30*time.Second)
	var rows uint64
	if err := store.Conn().QueryRow(context.Background(), `SELECT count() FROM events WHERE project_id = 7`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("events rows %d (%v), want none: the hook dropped the event", rows, err)
	}
	if hook.calls.Load() == 0 {
		t.Fatal("hook never called")
	}
}
