package fold

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/personhub/personhub/pkg/event"
)

// laneRun folds a log whose commands may go ahead by the write lane, as
// the ingester does: after is the record (command sequence -> the
// sequence it was applied after); decide makes the run take commands
// itself at each batch's end, the ingester's lane, up to window sequences
// ahead, and record them in after.
type laneRun struct {
	t      *testing.T
	events []string
	after  map[uint64]uint64
	decide bool
	window int
}

func isLaneCandidate(t *testing.T, seq int, js string) bool {
	e := ev(t, seq, js)
	return e.Reserved() != "" || e.Event == event.Set
}

// fold folds main sequences from..to (1-based, inclusive) in batches of
// size into f, writing each batch (cut for the batch ending at crashAt).
func (r *laneRun) fold(f *Folder, store *memStore, from, to, size int, redelivered bool, crashAt int, cut func(Batch) Batch) {
	r.t.Helper()
	ctx := context.Background()
	for first := from; first <= to; first += size {
		last := min(first+size-1, to)
		var batch []Input
		for s := first; s <= last; s++ {
			if p, ok := r.after[uint64(s)]; !ok || p >= uint64(s) {
				batch = append(batch, Input{ProjectID: 1, Seq: uint64(s), Event: ev(r.t, s, r.events[s-1]), Redelivered: redelivered})
			}
			batch = append(batch, r.laneAfter(uint64(s))...)
		}
		if err := f.Prepare(ctx, batch); err != nil {
			r.t.Fatal(err)
		}
		for _, in := range batch {
			if _, err := f.Apply(ctx, in); err != nil {
				r.t.Fatal(err)
			}
		}
		if r.decide {
			r.take(ctx, f, uint64(last))
		}
		b := f.Flush()
		if last == crashAt {
			store.write(cut(b))
			return
		}
		store.write(b)
		f.Committed = uint64(last)
	}
}

// laneAfter is the inputs of the commands recorded after p, in order.
func (r *laneRun) laneAfter(p uint64) []Input {
	var out []Input
	for s := p + 1; s <= uint64(len(r.events)); s++ {
		if r.after[s] == p {
			out = append(out, Input{ProjectID: 1, Seq: p, Origin: s, Event: ev(r.t, int(s), r.events[s-1])})
		}
	}
	return out
}

// take is the lane at a batch's end p: the pending commands after p (a
// prefix: it stops at the first one not LaneReady) are recorded after p
// and folded.
func (r *laneRun) take(ctx context.Context, f *Folder, p uint64) {
	for s := p + 1; s <= min(p+uint64(r.window), uint64(len(r.events))); s++ {
		js := r.events[s-1]
		if !isLaneCandidate(r.t, int(s), js) {
			continue
		}
		in := Input{ProjectID: 1, Seq: p, Origin: s, Event: ev(r.t, int(s), js)}
		if err := f.Prepare(ctx, []Input{in}); err != nil {
			r.t.Fatal(err)
		}
		ok, err := f.LaneReady(ctx, in)
		if err != nil {
			r.t.Fatal(err)
		}
		if !ok {
			return
		}
		r.after[s] = p
		if _, err := f.Apply(ctx, in); err != nil {
			r.t.Fatal(err)
		}
	}
}

// laneEvents is randomEvents with API property writes mixed in.
func laneEvents(seed int64, n, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	var out []string
	for _, js := range randomEvents(seed, n, ids) {
		out = append(out, js)
		if r.Intn(5) == 0 {
			out = append(out, fmt.Sprintf(`{"event":"$set","distinct_id":"d%d","$set":{"api":%d},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`, r.Intn(ids), r.Intn(100)))
		}
	}
	return out
}

// TestLaneIsReplayedByItsRecord: a log folded with the lane taking
// commands ahead gives, folded again from its record in any batching, or
// after a crash that left any part of a batch's rows written, the same
// rows, versions and uuids.
func TestLaneIsReplayedByItsRecord(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		events := laneEvents(seed, 300, 20+int(seed))
		first := &laneRun{t: t, events: events, after: map[uint64]uint64{}, decide: true, window: 40}
		ref := newMemStore()
		first.fold(New(ref), ref, 1, len(events), 30, false, 0, nil)
		if len(first.after) < 10 {
			t.Fatalf("seed %d: the lane took %d commands; the test needs more", seed, len(first.after))
		}
		replay := &laneRun{t: t, events: events, after: first.after}
		for _, size := range []int{1, 7, 1000} {
			got := newMemStore()
			replay.fold(New(got), got, 1, len(events), size, false, 0, nil)
			sameStore(t, fmt.Sprintf("seed %d, replay in batches of %d", seed, size), got, ref)
		}
		for _, cut := range writeCuts {
			for _, resize := range []int{30, 11} {
				store := newMemStore()
				f := New(store)
				replay.fold(f, store, 1, 120, 30, false, 0, nil)
				replay.fold(f, store, 121, 180, 60, false, 180, cut.write)
				f = New(store)
				f.Committed = 120
				replay.fold(f, store, 121, 180, resize, true, 0, nil)
				replay.fold(f, store, 181, len(events), resize, false, 0, nil)
				sameStore(t, fmt.Sprintf("seed %d, cut %q, refold in batches of %d", seed, cut.name, resize), store, ref)
			}
		}
	}
}

func sameStore(t *testing.T, what string, got, want *memStore) {
	t.Helper()
	if g, w := joinLines(got.snapshot(1)), joinLines(want.snapshot(1)); g != w {
		t.Fatalf("%s: state differs:\n%s\nwant\n%s", what, g, w)
	}
	if g, w := got.rows(), want.rows(); g != w {
		t.Fatalf("%s: rows differ:\n%s\nwant\n%s", what, g, w)
	}
	for k, p := range want.persons {
		if g := got.persons[k]; g.Version != p.Version || g.IsDeleted != p.IsDeleted || g.UUID != p.UUID {
			t.Fatalf("%s: person %d version %d deleted %v, want %d %v", what, k.id, g.Version, g.IsDeleted, p.Version, p.IsDeleted)
		}
	}
}

// TestLaneCommandAfterItsEvent: a command applied after event P changes
// what P changed in the same batch (the tie at version P), is overridden
// by a later event that was queued before it, and a lane deletion
// tombstones ids P assigned.
func TestLaneCommandAfterItsEvent(t *testing.T) {
	actor := `"properties":{"$actor":{"key_id":"k","organization_id":"o"}}`
	events := []string{
		`{"distinct_id":"a","$set":{"x":1,"y":1}}`,                              // 1: person 1
		`{"distinct_id":"a","$set":{"x":3}}`,                                    // 2: queued before the API write
		`{"event":"$set","distinct_id":"a","$set":{"x":2,"y":2},` + actor + `}`, // 3: lane, after 1
		`{"distinct_id":"b","$set":{"z":1}}`,                                    // 4: person 4
		`{"event":"$delete_person","distinct_id":"x","properties":{"$person_id":4,"$actor":{"key_id":"k","organization_id":"o"}}}`, // 5: lane, after 4
	}
	run := &laneRun{t: t, events: events, after: map[uint64]uint64{3: 1, 5: 4}}
	for _, size := range []int{1, 5} {
		store := newMemStore()
		run.fold(New(store), store, 1, len(events), size, false, 0, nil)
		p := store.persons[personKey{1, 1}]
		if fmt.Sprintf("%v %v %d", p.Properties["x"], p.Properties["y"], p.Version) != "3 2 2" {
			t.Fatalf("batches of %d: person 1 x, y, version = %v %v %d; want 3 2 2 (the API write after seq 1, event 2 after it)", size, p.Properties["x"], p.Properties["y"], p.Version)
		}
		if p4 := store.persons[personKey{1, 4}]; !p4.IsDeleted || p4.Version != 4 {
			t.Fatalf("batches of %d: person 4 deleted %v version %d; want deleted at 4", size, p4.IsDeleted, p4.Version)
		}
		if d := store.dids[didKey{1, "b"}]; !d.IsDeleted || d.Version != 4 {
			t.Fatalf("batches of %d: id b %+v; want a tombstone at 4", size, d)
		}
		if len(store.persons) != 2 {
			t.Fatalf("batches of %d: %d persons, want 2", size, len(store.persons))
		}
	}
}
