package chstore

import (
	"math/rand/v2"
	"testing"
)

// TestNewestSnapshotDelta updates a snapshot of 10k persons by parts of
// random rows (new persons, newer versions, tombstones, versions older
// than known) and checks every lookup against a plain map, and that a
// small part shares the base instead of copying it.
func TestNewestSnapshotDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[uint64]newestEntry{}
	var base []newestEntry
	for id := uint64(1); id <= 10_000; id++ {
		e := newestEntry{id: id * 3, vd: id << 1, created: uint32(id)}
		base = append(base, e)
		want[e.id] = e
	}
	snap := (*newestSnapshot)(nil).with(base)
	shared, rebuilt := 0, 0
	for part := 0; part < 200; part++ {
		var found []newestEntry
		for range 1 + rng.IntN(40) {
			id := uint64(1 + rng.IntN(40_000)) // a third known, the rest new
			e := newestEntry{id: id, vd: uint64(rng.IntN(30_000))<<1 | uint64(rng.IntN(8)/7), created: rng.Uint32()}
			found = append(found, e)
			if w, ok := want[id]; !ok || e.vd > w.vd {
				want[id] = e
			}
		}
		next := snap.with(newestOnly(found))
		if &next.entries[0] == &snap.entries[0] {
			shared++
		} else {
			rebuilt++
		}
		snap = next
		for id := uint64(0); id <= 40_001; id++ {
			got, ok := snap.lookup(id)
			w, wok := want[id]
			if ok != wok || got != w {
				t.Fatalf("part %d, id %d: lookup %+v %v, want %+v %v", part, id, got, ok, w, wok)
			}
		}
	}
	if shared < 150 || rebuilt == 0 {
		t.Fatalf("%d parts shared the base, %d rebuilt it: want most shared, some rebuilt", shared, rebuilt)
	}
}

// BenchmarkNewestSnapshotRefresh is the cost a new part of 1,000 rows
// adds to the list that finds it, at 1M persons: the base copied and
// rebuilt against the delta (with).
func BenchmarkNewestSnapshotRefresh(b *testing.B) {
	base := make([]newestEntry, 1_000_000)
	for i := range base {
		base[i] = newestEntry{id: uint64(i+1) * 2, vd: uint64(i+1) << 1, created: uint32(i)}
	}
	snap := newSnapshot(base)
	found := make([]newestEntry, 1000)
	for i := range found {
		found[i] = newestEntry{id: uint64(i+1) * 1999, vd: 5_000_000 << 1}
	}
	b.Run("copy", func(b *testing.B) {
		for range b.N {
			_ = newSnapshot(mergeNewest(snap.entries, found))
		}
	})
	b.Run("delta", func(b *testing.B) {
		for range b.N {
			_ = snap.with(found)
		}
	})
}

// BenchmarkTopForList chooses the first page of 100k candidates arriving
// as the scan returns them (ids, and so created_at, ascending).
func BenchmarkTopForList(b *testing.B) {
	cands := make([]propCandidate, 100_000)
	for i := range cands {
		cands[i] = propCandidate{id: uint64(i) * 10, createdAt: uint32(i)}
	}
	work := make([]propCandidate, len(cands))
	b.ResetTimer()
	for range b.N {
		copy(work, cands)
		_ = topForList(work, 100)
	}
}

// TestTopForListIsSortedPrefix checks the heap's page against a full sort
// on random candidates with many equal created_at (ties broken by id).
func TestTopForListIsSortedPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 50; round++ {
		cands := make([]propCandidate, 500+rng.IntN(2000))
		for i := range cands {
			cands[i] = propCandidate{id: rng.Uint64N(1 << 20), createdAt: uint32(rng.IntN(300))}
		}
		n := 1 + rng.IntN(120)
		want := sortedForList(append([]propCandidate(nil), cands...))[:n]
		got := topForList(cands, n)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d, n %d, at %d: %+v, want %+v", round, n, i, got[i], want[i])
			}
		}
	}
}
