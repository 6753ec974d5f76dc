package deletion

import (
	"context"
	"fmt"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestHourlyBoundedByTheDeletedHours: a run mutates and recounts the
// hourly counts only in the hours of the rows it deletes (spanOf). The
// person's event above its request in one of those hours is counted
// again, its later one in another month is left as it was, and the counts
// come out equal to the events left either way; another person's event in
// the same hour is untouched. A person whose rows above its request all lie
// outside the span is bounded by the batch's sequence alone (keepsApart),
// one with such a row inside it by its own.
func TestHourlyBoundedByTheDeletedHours(t *testing.T) {
	f := newFixture(t, nil, nil)
	at := func(month time.Month, day, hour, minute int) time.Time {
		return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC)
	}
	type row struct {
		person, seq uint64
		ts          time.Time
	}
	rows := []row{
		{30, 1, at(time.January, 5, 10, 0)}, {30, 2, at(time.January, 5, 10, 30)}, {30, 3, at(time.January, 20, 8, 0)}, // deleted
		{30, 20, at(time.January, 5, 10, 45)}, // above the request, in a deleted hour
		{30, 21, at(time.June, 1, 9, 0)},      // above the request, outside the span
		{31, 4, at(time.January, 5, 10, 15)},  // another person, same hour
		// In the same batch: 32's request (50) lifts the batch's largest
		// sequence above 30's row 20, which must stay all the same; 40's
		// row above its request lies outside the span, so 40 needs no
		// bound of its own and no recount.
		{32, 5, at(time.January, 5, 11, 0)},
		{40, 6, at(time.January, 6, 9, 0)}, {40, 22, at(time.July, 1, 9, 0)},
	}
	ctx := context.Background()
	batch, err := f.conn.PrepareBatch(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := batch.Append(uint64(1), uuid.New(), "$pageview", fmt.Sprintf("d%d", r.person), r.person,
			uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(r.person))), r.ts, uint16(0), "{}", r.seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	before31 := hourlyOf(t, f.conn, 1, 31, false)
	request(t, f.runner, Request{ProjectID: 1, PersonID: 30, RequestSeq: 10})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 32, RequestSeq: 50})
	request(t, f.runner, Request{ProjectID: 1, PersonID: 40, RequestSeq: 10})
	commit(t, f.conn, 50)
	if sum := f.runOnce(t); sum.Verified != 3 || sum.EventsDeleted != 5 || sum.Mutations != 1 || sum.Recounted != 1 {
		t.Fatalf("run: %+v, want 3 verified, 5 events deleted in 1 mutation, 1 recounted", sum)
	}
	for _, w := range []struct {
		person uint64
		left   []uint64
	}{{30, []uint64{20, 21}}, {32, nil}, {40, []uint64{22}}} {
		got := eventsOf(t, f.conn, 1, w.person)
		ok := len(got) == len(w.left)
		for _, seq := range w.left {
			ok = ok && got[seq] == 1
		}
		if !ok {
			t.Errorf("events of 1/%d left: %v, want seqs %v", w.person, got, w.left)
		}
		got2, want := hourlyOf(t, f.conn, 1, w.person, false), hourlyOf(t, f.conn, 1, w.person, true)
		if len(want) != len(w.left) || !maps.Equal(got2, want) {
			t.Errorf("hourly counts of 1/%d: %v, want those of its events left %v", w.person, got2, want)
		}
	}
	if got := hourlyOf(t, f.conn, 1, 31, false); len(got) != 1 || !maps.Equal(got, before31) {
		t.Fatalf("hourly counts of 1/31: %v, were %v", got, before31)
	}
}

// TestSpanOf: the span covers whole UTC hours around the deleted rows of
// every person of the batch, and every hour when one person's hourly sums
// drifted or nothing is dated.
func TestSpanOf(t *testing.T) {
	h := uint32(3600)
	c := counts{hourly: map[uint64]uint64{1: 2, 2: 1, 3: 5}, copiesAll: map[uint64]uint64{1: 2, 2: 1, 3: 4},
		times: map[uint64][2]uint32{1: {10*h + 5, 12*h + 1}, 2: {9 * h, 9 * h}, 5: {9 * h, math.MaxUint32}}}
	for _, c2 := range []struct {
		name string
		b    []uint64
		want span
	}{
		{"one person", []uint64{1}, span{from: 10 * h, to: 13 * h}},
		{"two persons, an exact hour", []uint64{1, 2}, span{from: 9 * h, to: 13 * h}},
		{"drift", []uint64{1, 3}, span{all: true}},
		{"nothing dated", []uint64{4}, span{all: true}},
		{"the last hour of DateTime", []uint64{5}, span{all: true}},
	} {
		var b []Request
		for _, id := range c2.b {
			b = append(b, Request{ProjectID: 1, PersonID: id})
		}
		if got := c.spanOf(b); got != c2.want {
			t.Errorf("%s: %+v, want %+v", c2.name, got, c2.want)
		}
	}
}

// TestKeepsApart: a person's rows above its request keep it apart from a
// span only when they all lie outside it.
func TestKeepsApart(t *testing.T) {
	h := uint32(3600)
	c := counts{above: map[uint64][2]uint32{1: {2 * h, 3 * h}, 2: {20 * h, 30 * h}, 3: {5 * h, 20 * h}, 4: {10 * h, 10 * h}}}
	sp := span{from: 10 * h, to: 12 * h}
	for id, want := range map[uint64]bool{1: true, 2: true, 3: false, 4: false, 5: false} {
		if got := c.keepsApart(id, sp); got != want {
			t.Errorf("person %d: %v, want %v", id, got, want)
		}
	}
	if c.keepsApart(1, span{all: true}) {
		t.Error("apart from every hour")
	}
}
