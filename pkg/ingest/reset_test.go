package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestResetDistinctIDReplays: $reset_person_distinct_id commands mixed into
// a workload give the same tables after injected write failures and after
// a replay into empty tables; the reset id's next event starts a fresh
// person, with a uuid of its own, while its former owner keeps the others; the command forged on
// events.<project> is dead-lettered and changes nothing.
func TestResetDistinctIDReplays(t *testing.T) {
	n := testenv.StartNATS(t, "")
	actor := `"$actor":{"key_id":"k1","key_label":"test","organization_id":"o1"}`
	reset := func(d string) testenv.Message {
		return testenv.Message{Body: fmt.Sprintf(`{"event":"$reset_person_distinct_id","distinct_id":%q,"properties":{%s}}`, d, actor), Command: true}
	}
	msgs := []testenv.Message{
		{Body: `{"event":"e","distinct_id":"anon","$set":{"x":1}}`},                                    // 1: person 1
		{Body: `{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"}}`}, // 2
		{Body: `{"event":"$reset_person_distinct_id","distinct_id":"anon","properties":{}}`},           // 3: forged
		reset("anon"), // 4: anon leaves person 1
		{Body: `{"event":"e","distinct_id":"anon","$set":{"y":2}}`}, // 5: person 5
	}
	publishMessages(t, n.JS, 3, msgs)
	// In another project, a workload with resets of its ids interleaved.
	var work []testenv.Message
	for i, m := range testenv.Workload(11, 1500, 60) {
		work = append(work, m)
		if i%9 == 0 {
			work = append(work, reset(fmt.Sprintf("u%d", i%60)))
		}
	}
	publishMessages(t, n.JS, 4, work)
	last := uint64(len(msgs) + len(work))

	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	ctx := context.Background()
	p1, err := ref.GetPerson(ctx, 3, 1)
	if err != nil || fmt.Sprint(p1.DistinctIDs) != "[user]" || p1.Properties["x"] == nil {
		t.Fatalf("person 1 after the reset: %+v %v", p1, err)
	}
	p5, err := ref.GetPerson(ctx, 3, 5)
	if err != nil || fmt.Sprint(p5.DistinctIDs) != "[anon]" || p5.Properties["x"] != nil {
		t.Fatalf("the reset id's next event: %+v %v", p5, err)
	}
	// Every person ever created, deleted and split ones included, has a
	// uuid of its own: the reset id's fresh person does not take person
	// 1's (created from that id).
	if p5.UUID == p1.UUID {
		t.Fatalf("the fresh person shares its former owner's uuid %s", p1.UUID)
	}
	var shared uint64
	if err := ref.Conn().QueryRow(ctx, "SELECT count() FROM (SELECT project_id, uuid FROM persons FINAL GROUP BY project_id, uuid HAVING count() > 1)").Scan(&shared); err != nil || shared != 0 {
		t.Fatalf("uuids shared by several persons: %d %v", shared, err)
	}
	var entries uint64
	if err := ref.Conn().QueryRow(ctx, "SELECT count() FROM activity_log FINAL WHERE project_id = 3 AND item_id = '1' AND activity = 'reset_person_distinct_id'").Scan(&entries); err != nil || entries != 1 {
		t.Fatalf("activity entries of the reset: %d %v", entries, err)
	}
	dlq, err := n.JS.Stream(ctx, stream.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := dlq.GetMsg(ctx, 1)
	if err != nil || msg.Header.Get(stream.HeaderSeq) != "3" || !strings.Contains(msg.Header.Get(stream.HeaderReason), "$reset_person_distinct_id is reserved") {
		t.Fatalf("forged reset: %v %v", msg, err)
	}

	wantSameAfterFailuresAndReplay(t, n.JS, ref, last)
}
