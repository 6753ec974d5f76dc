package fold

import (
	"context"
	"testing"
)

// foldRetrying folds events in batches of size, as the ingester does,
// and returns the store and the person each event was attributed to (the
// last attribution counts: the events table keeps the newest row of a
// sequence). The writes of batch number failAt (0: none) fail after cut
// landed; the ingester then folds the same batch again in the same
// process, from the store: Reset, every input Redelivered.
func foldRetrying(t *testing.T, events []string, size, failAt int, cut func(Batch) Batch) (*memStore, []Resolved) {
	t.Helper()
	ctx := context.Background()
	store := newMemStore()
	f := New(store)
	attributed := make([]Resolved, len(events)+1)
	apply := func(batch []Input) Batch {
		if err := f.Prepare(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for _, in := range batch {
			res, err := f.Apply(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			attributed[in.Seq] = res
		}
		return f.Flush()
	}
	for n, first := 1, 0; first < len(events); n, first = n+1, first+size {
		var batch []Input
		for i := first; i < min(first+size, len(events)); i++ {
			batch = append(batch, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, events[i])})
		}
		b := apply(batch)
		if n == failAt {
			store.write(cut(b))
			f.Reset()
			for i := range batch {
				batch[i].Redelivered = true
			}
			b = apply(batch)
		}
		store.write(b)
		f.Committed = batch[len(batch)-1].Seq
	}
	return store, attributed
}

// TestRetryInProcessGivesTheSameResult: a batch whose writes failed part
// way and that is folded again in the same process ends in the same rows
// (deleted persons included) as an uninterrupted run, and attributes every
// event to the same person. The refold reads person rows that may already
// hold later events of the batch: a person a command names may be
// deleted, or created, later in the batch.
func TestRetryInProcessGivesTheSameResult(t *testing.T) {
	const size = 25
	for seed := int64(1); seed <= 8; seed++ {
		events := randomEvents(seed, 400, 30)
		ref, want := foldRetrying(t, events, size, 0, nil)
		for failAt := 1; failAt <= len(events)/size; failAt++ {
			for _, cut := range writeCuts {
				got, attributed := foldRetrying(t, events, size, failAt, cut.write)
				if g, w := got.rows(), ref.rows(); g != w {
					t.Fatalf("seed %d, batch %d failed after %q: rows differ:\n%s\nwant\n%s", seed, failAt, cut.name, g, w)
				}
				for seq := range want {
					if attributed[seq] != want[seq] {
						t.Fatalf("seed %d, batch %d failed after %q: event %d (%s) attributed to person %d, want %d",
							seed, failAt, cut.name, seq, events[seq-1], attributed[seq].PersonID, want[seq].PersonID)
					}
				}
			}
		}
	}
}
