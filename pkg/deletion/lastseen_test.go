package deletion

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/testenv"
)

// seenEvent is an events row with its distinct id, time and properties.
type seenEvent struct {
	person, seq uint64
	did         string
	at          time.Time
	props       string
}

func insertSeen(t *testing.T, conn driver.Conn, evs ...seenEvent) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.props == "" {
			e.props = "{}"
		}
		if err := batch.Append(uint64(1), uuid.New(), "$pageview", e.did, e.person, uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(e.person))),
			e.at.Truncate(time.Second), uint16(e.at.Nanosecond()/1e6), e.props, e.seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// lastSeenOf returns project 1's last seen times per distinct id: from
// person_last_seen, or (fromEvents) the newest time of the events left
// whose view feeds it (those without $actor).
func lastSeenOf(t *testing.T, conn driver.Conn, fromEvents bool) map[string]uint64 {
	t.Helper()
	sql := "SELECT distinct_id, max(seen_ms) FROM person_last_seen WHERE project_id = 1 GROUP BY distinct_id"
	if fromEvents {
		sql = "SELECT distinct_id, max(toUInt64(timestamp) * 1000 + timestamp_ms) FROM events WHERE project_id = 1 AND visitParamHas(properties, '$actor') = 0 GROUP BY distinct_id"
	}
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var id string
		var ms uint64
		if err := rows.Scan(&id, &ms); err != nil {
			t.Fatal(err)
		}
		out[id] = ms
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// failLastSeenWrite fails the first write of person_last_seen's rows, as a
// run killed between the rows' deletion and their new write would leave
// them.
type failLastSeenWrite struct {
	driver.Conn
	failed bool
}

func (c *failLastSeenWrite) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if !c.failed && strings.HasPrefix(query, "INSERT INTO person_last_seen") {
		c.failed = true
		return nil, errors.New("injected: the run stops before the last seen times are written")
	}
	return c.Conn.PrepareBatch(ctx, query, opts...)
}

// TestLastSeenFollowsDeletions: the deleter rewrites the last seen time of
// each distinct id whose events it deletes from the events it keeps: an
// id that a later person took keeps that person's time (older than the
// deleted ones), an id left without events has none, an event of the
// person above its request keeps its id's time, and other ids are
// untouched. A run stopped after the old rows went and before the new
// ones were written deleted no event yet: the next run does it again.
func TestLastSeenFollowsDeletions(t *testing.T) {
	conn := testenv.ClickHouse(t).Conn()
	faulty := &failLastSeenWrite{Conn: conn}
	f := newFixture(t, faulty, nil)
	at := func(day, hour, ms int) time.Time { return time.Date(2026, 3, day, hour, 0, 0, ms*1e6, time.UTC) }
	insertSeen(t, conn,
		// Person 20, deleted at 10.
		seenEvent{person: 20, seq: 1, did: "shared", at: at(5, 10, 900)},
		seenEvent{person: 20, seq: 2, did: "only20", at: at(6, 9, 1)},
		seenEvent{person: 20, seq: 3, did: "shared", at: at(7, 9, 0), props: `{"$actor":"k"}`}, // a command: not behaviour
		seenEvent{person: 20, seq: 15, did: "late", at: at(2, 8, 5)},                           // above the request
		// Person 21 took "shared" after the deletion; person 22 is apart.
		seenEvent{person: 21, seq: 12, did: "shared", at: at(1, 8, 250)},
		seenEvent{person: 22, seq: 4, did: "other", at: at(9, 1, 7)},
	)
	before := lastSeenOf(t, conn, false)
	if want := lastSeenOf(t, conn, true); !maps.Equal(before, want) || before["shared"] != uint64(at(5, 10, 900).UnixMilli()) {
		t.Fatalf("person_last_seen before the run: %v, want %v (shared at the 5th's .900)", before, want)
	}
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 10})
	commit(t, conn, 15)

	if sum := f.runOnce(t); sum.Failed != 1 || sum.Mutations != 0 {
		t.Fatalf("run with a failed write: %+v, want its request failed before the purge", sum)
	}
	if got := eventsOf(t, conn, 1, 20); len(got) != 4 {
		t.Fatalf("events of 1/20 after the failed run: %v, want all 4", got)
	}
	if sum := f.runOnce(t); sum.Verified != 1 || sum.EventsDeleted != 3 || sum.LastSeen != 2 {
		t.Fatalf("next run: %+v, want 1 verified, 3 events deleted, 2 ids rewritten (shared, only20)", sum)
	}
	got, want := lastSeenOf(t, conn, false), lastSeenOf(t, conn, true)
	if !maps.Equal(got, want) {
		t.Fatalf("person_last_seen after the run: %v, want that of the events left %v", got, want)
	}
	if _, ok := got["only20"]; ok || got["shared"] != uint64(at(1, 8, 250).UnixMilli()) ||
		got["late"] != before["late"] || got["other"] != before["other"] {
		t.Fatalf("person_last_seen after the run: %v (before %v)", got, before)
	}

	// A later request of the person (its event at 15): nothing else moves.
	request(t, f.runner, Request{ProjectID: 1, PersonID: 20, RequestSeq: 16, Version: uint64(time.Now().UnixNano())})
	commit(t, conn, 16)
	if sum := f.runOnce(t); sum.Verified != 1 || sum.LastSeen != 1 {
		t.Fatalf("second request: %+v", sum)
	}
	got = lastSeenOf(t, conn, false)
	if _, ok := got["late"]; ok || !maps.Equal(got, lastSeenOf(t, conn, true)) || len(got) != 2 {
		t.Fatalf("person_last_seen after the second request: %v, want shared and other only", got)
	}
}
