package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// timedWorkload is testenv.Workload with a third of its $set events made
// timestamp-aware (docs/events.md, "Timestamp-aware $set"), their moments
// ($set_timestamp) out of log order, or true (the event's timestamp).
func timedWorkload(seed int64, n, ids int) []testenv.Message {
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	msgs := testenv.Workload(seed, n, ids)
	for i, m := range msgs {
		const prefix = `{"event":"e","distinct_id":`
		if m.Command || i%3 != 0 || !strings.HasPrefix(m.Body, prefix) || !strings.Contains(m.Body, `"$set":{`) {
			continue
		}
		flag := "true"
		if i%2 == 0 {
			flag = fmt.Sprintf("%q", base.Add(time.Duration(i*7919%5000)*time.Second).Format(time.RFC3339))
		}
		msgs[i].Body = `{"event":"e","properties":{"$set_timestamp":` + flag + `},"distinct_id":` + m.Body[len(prefix):]
	}
	return msgs
}

// TestTimestampAwareCrashesAndReplay: with timestamp-aware writes in the
// log, crashes at every write stage and a replay into empty tables end in
// the state of an uninterrupted run, the persons' property_times included
// (testenv.Snapshot).
func TestTimestampAwareCrashesAndReplay(t *testing.T) {
	n := testenv.StartNATS(t, "")
	events := timedWorkload(5, 2000, 120)
	publishMessages(t, n.JS, 1, events)
	last := uint64(len(events))

	ref := testenv.ClickHouse(t)
	runUntil(t, testConfig("reference"), n.JS, ref, last)
	var timed uint64
	if err := ref.Conn().QueryRow(context.Background(), "SELECT count() FROM persons FINAL WHERE property_times != ''").Scan(&timed); err != nil {
		t.Fatal(err)
	}
	if timed == 0 {
		t.Fatal("no person recorded a moment: the workload tests nothing")
	}
	wantSameAfterFailuresAndReplay(t, n.JS, ref, last)
}
