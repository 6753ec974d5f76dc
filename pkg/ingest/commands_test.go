package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestForgedCommandsAreDeadLettered: a command, or a property only
// commands carry, published straight to events.<project> (as any pipeline
// with the events permission could) changes nothing and is dead-lettered
// with the reason; the same command from commands.<project> is obeyed.
func TestForgedCommandsAreDeadLettered(t *testing.T) {
	n := testenv.StartNATS(t, "")
	actor := `"$actor":{"key_id":"k1","key_label":"stolen","organization_id":"o1"}`
	publishMessages(t, n.JS, 7, []testenv.Message{
		{Body: `{"event":"e","distinct_id":"a","$set":{"x":1}}`}, // 1: person 1
		{Body: `{"event":"e","distinct_id":"b"}`},                // 2: person 2
		{Body: `{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":true,` + actor + `}}`},
		{Body: `{"event":"$split_person","distinct_id":"a","properties":{"$person_id":1,"$split_distinct_ids":["a"]}}`},
		{Body: `{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":1}}`},
		{Body: `{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{` + actor + `}}`},
		{Body: `{"event":"e","distinct_id":"a","$set":{"x":3},"properties":{"$person_id":2}}`},
		// 8: the API's own command, on its subject.
		{Body: `{"event":"$delete_person","distinct_id":"b","properties":{"$person_id":2,"$delete_events":true,` + actor + `}}`, Command: true},
		// 9: static cohort membership is the API's too.
		{Body: `{"event":"$add_to_static_cohort","distinct_id":"a","properties":{"$cohort_id":1,"$cohort_distinct_ids":["a"]}}`},
	})
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("ingester"), n.JS, store, 9)

	ctx := context.Background()
	p, err := store.GetPerson(ctx, 7, 1)
	if err != nil {
		t.Fatalf("person 1 after forged commands: %v", err)
	}
	if fmt.Sprintf("%v %v", p.DistinctIDs, p.Properties["x"]) != "[a] 1" {
		t.Fatalf("person 1 changed by forged commands: %v %v", p.DistinctIDs, p.Properties)
	}
	if _, err := store.GetPerson(ctx, 7, 2); !errors.Is(err, chstore.ErrNotFound) {
		t.Fatal("the command from commands.7 was not obeyed: person 2 still exists")
	}
	var requests, activity, events, members uint64
	row := store.Conn().QueryRow(ctx, `SELECT
		(SELECT count() FROM cohort_people FINAL WHERE project_id = 7),
		(SELECT count() FROM person_deletion_requests FINAL WHERE project_id = 7 AND person_id = 1),
		(SELECT count() FROM activity_log FINAL WHERE project_id = 7 AND item_id = '1'),
		(SELECT count() FROM events FINAL WHERE project_id = 7)`)
	if err := row.Scan(&members, &requests, &activity, &events); err != nil {
		t.Fatal(err)
	}
	if members != 0 || requests != 0 || activity != 0 || events != 3 {
		t.Fatalf("forged commands left traces: %d cohort members, %d deletion requests, %d activity entries of person 1; %d events stored, want 3", members, requests, activity, events)
	}

	dlq, err := n.JS.Stream(ctx, stream.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"3": "event name $delete_person is reserved", "4": "event name $split_person is reserved",
		"5": "event name $delete_person_events is reserved", "6": "property $actor is reserved",
		"7": "property $person_id is reserved", "9": "event name $add_to_static_cohort is reserved",
	}
	for i := uint64(1); i <= uint64(len(want)); i++ {
		msg, err := dlq.GetMsg(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		seq, reason := msg.Header.Get(stream.HeaderSeq), msg.Header.Get(stream.HeaderReason)
		if !strings.HasPrefix(reason, ForgedCommand+": ") || !strings.Contains(reason, want[seq]) || msg.Subject != "dlq.events.7" {
			t.Fatalf("dead letter %d: seq %s on %s, reason %q", i, seq, msg.Subject, reason)
		}
	}

	// Rebuilding from a log written before commands had their own
	// subject: commands on events.<p> up to the given sequence count.
	legacy := testenv.ClickHouse(t)
	cfg := testConfig("legacy")
	cfg.LegacyCommandsUntil = 3
	runUntil(t, cfg, n.JS, legacy, 9)
	if _, err := legacy.GetPerson(ctx, 7, 1); !errors.Is(err, chstore.ErrNotFound) {
		t.Fatal("a legacy command at or below LegacyCommandsUntil was not obeyed")
	}
	if err := legacy.Conn().QueryRow(ctx, "SELECT count() FROM events FINAL WHERE project_id = 7").Scan(&events); err != nil || events != 4 {
		t.Fatalf("legacy run stored %d events (%v), want 4 (commands above the bound still dead-lettered)", events, err)
	}
}

// TestDeletionAfterKeptPersonEvents: a person whose events were deleted
// with keep_person (the request verified by the real deleter) and who is
// deleted later gets a new pending request; it is not shadowed by the
// verified row of the first.
func TestDeletionAfterKeptPersonEvents(t *testing.T) {
	n := testenv.StartNATS(t, "")
	actor := `"$actor":{"key_id":"k1","organization_id":"o1"}`
	publishMessages(t, n.JS, 4, []testenv.Message{
		{Body: `{"event":"e","distinct_id":"a"}`},
		{Body: `{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":1,` + actor + `}}`, Command: true},
	})
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("ingester"), n.JS, store, 2)
	ctx := context.Background()
	runner, err := deletion.New(store.Conn(), deletion.DefaultConfig(), quietLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := runner.RunOnce(ctx); err != nil || sum.Verified != 1 {
		t.Fatalf("deleter run: %+v %v", sum, err)
	}
	request := func() (status string, seq uint64) {
		t.Helper()
		if err := store.Conn().QueryRow(ctx, "SELECT status, request_seq FROM person_deletion_requests FINAL WHERE project_id = 4 AND person_id = 1").Scan(&status, &seq); err != nil {
			t.Fatal(err)
		}
		return status, seq
	}
	if status, seq := request(); status != deletion.StatusVerified || seq != 2 {
		t.Fatalf("first request: %s at %d", status, seq)
	}
	if _, err := testenv.Publish(ctx, n.JS, 4, testenv.Message{Body: `{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":true,` + actor + `}}`, Command: true},
		"00000000-0000-4000-8000-000000000003", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	runUntil(t, testConfig("ingester"), n.JS, store, 3)
	if status, seq := request(); status != deletion.StatusPending || seq != 3 {
		t.Fatalf("the deletion after the kept person's request: %s at %d, want pending at 3", status, seq)
	}
}
