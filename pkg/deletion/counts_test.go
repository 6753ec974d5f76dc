package deletion

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestCountBatchBoundsEachPersonBySequence: a batch's count of "mine"
// (the rows its mutation deletes) stops at each person's own request
// sequence, inclusive, while "all" counts every row; another project's
// rows and persons outside the batch are not counted; a person twice in a
// batch is bounded by its first request, as the mutation (eventstore.Purge's
// transform) bounds it. It dates the rows "mine" and those above (spanOf, keepsApart), and counts
// the events rows in the span of the count after the mutations.
func TestCountBatchBoundsEachPersonBySequence(t *testing.T) {
	f := newFixture(t, nil, nil)
	insertEvents(t, f.conn,
		ev{1, 10, 5}, ev{1, 10, 10}, ev{1, 10, 15}, // bounded at 10: 2 of 3
		ev{1, 20, 7}, ev{1, 20, 30}, // bounded at 29: 1 of 2
		ev{1, 30, 8}, // not in the batch
		ev{2, 10, 9}, // another project
	)
	ctx, cancel := step(context.Background())
	defer cancel()
	batch := []Request{
		{ProjectID: 1, PersonID: 10, RequestSeq: 10},
		{ProjectID: 1, PersonID: 20, RequestSeq: 29},
		{ProjectID: 1, PersonID: 10, RequestSeq: 15},
	}
	c, err := f.runner.countBatch(ctx, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		got  map[uint64]uint64
		want map[uint64]uint64
	}{
		{"events mine", c.events, map[uint64]uint64{10: 2, 20: 1}},
		{"events all", c.eventsAll, map[uint64]uint64{10: 3, 20: 2}},
		{"copies mine", c.copies, map[uint64]uint64{10: 2, 20: 1}},
		{"copies all", c.copiesAll, map[uint64]uint64{10: 3, 20: 2}},
		{"hourly", c.hourly, map[uint64]uint64{10: 3, 20: 2}},
	} {
		if len(w.got) != len(w.want) {
			t.Errorf("%s: %v, want %v", w.name, w.got, w.want)
			continue
		}
		for id, n := range w.want {
			if w.got[id] != n {
				t.Errorf("%s: %v, want %v", w.name, w.got, w.want)
				break
			}
		}
	}
	// insertEvents dates the i-th row 2026-(1+i%3)-(1+i%27) 12:00 UTC:
	// person 10's rows "mine" are rows 0 and 1 and the one above row 2;
	// person 20's are row 3 and above row 4. January (the span) holds
	// rows 0 and 3.
	day := func(m time.Month, d int) uint32 { return uint32(time.Date(2026, m, d, 12, 0, 0, 0, time.UTC).Unix()) }
	want := map[uint64][2]uint32{10: {day(time.January, 1), day(time.February, 2)}, 20: {day(time.January, 4), day(time.January, 4)}}
	if !maps.Equal(c.times, want) {
		t.Errorf("times: %v, want %v", c.times, want)
	}
	want = map[uint64][2]uint32{10: {day(time.March, 3), day(time.March, 3)}, 20: {day(time.February, 5), day(time.February, 5)}}
	if !maps.Equal(c.above, want) {
		t.Errorf("above: %v, want %v", c.above, want)
	}
	jan := span{from: uint32(time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()),
		to: uint32(time.Date(2026, time.February, 1, 0, 0, 0, 0, time.UTC).Unix())}
	after, err := f.runner.countBatch(ctx, batch, &jan)
	if err != nil {
		t.Fatal(err)
	}
	if w := map[uint64]uint64{10: 1, 20: 1}; !maps.Equal(after.inSpan, w) {
		t.Errorf("in January: %v, want %v", after.inSpan, w)
	}
	// After the mutations: the rows to delete in every month, no hourly sums.
	if !maps.Equal(after.events, c.events) || !maps.Equal(after.copies, c.copies) || len(after.hourly) != 0 {
		t.Errorf("after: events %v, copies %v, hourly %v; want events %v, copies %v, no hourly", after.events, after.copies, after.hourly, c.events, c.copies)
	}
}
