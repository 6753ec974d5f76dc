package fold

// A distinct id row above the commit point is read as its Prev owner
// (committedView): the owner before the batch that wrote it. That is the
// owner as of the commit point only while the uncommitted batch starts
// right after it. After a restart the range of a batch that crashed after
// its writes, c+1..c+K, may be folded again as several smaller batches
// (the consumer delivers what it has; BatchSize may have changed). Once
// the first of them commits at c+k < c+K, an id it changed (at s1 <= c+k)
// has its new row hidden by the crashed batch's row (version s2 > c+k,
// ReplacingMergeTree keeps the newest), whose Prev is the owner as of c:
// reading the id again from the store (after eviction, or after a failed
// batch's Reset) would lose s1's change, and with it the attribution of
// later events, cohort rows and the rows and overrides written from it.
//
// So the Folder keeps, for such ids only, the row it wrote and committed
// below a stored row of higher version, and reads it instead of the
// stored row until the commit point passes the hiding row's version: by
// then the refold has folded that row's event again and written the same
// owner at that version or later. Kept across Reset and eviction; bounded
// by the ids one crashed batch changed, and empty in normal running.
//
// In memory only: a second crash inside the range (before the commit
// point passes c+K) would restart from a commit point inside it, where
// the hidden rows are not recoverable from the store (merges drop them).
// So the ingester never commits there: CommitThrough tells it how far a
// batch must reach, and a batch that reaches it hides none of its rows.
// The keep stays as a guard for a caller that commits inside a range
// (and the fold tests that do); with the ingester it is forgotten at the
// next batch. See docs/architecture.md.
type hiddenRows struct {
	// above is, per id, the highest version of a stored row read above
	// the commit point: rows written below it are hidden.
	above map[didKey]uint64
	// committed is the id's row as of the commit point, written and
	// committed by this Folder but hidden behind above.
	committed map[didKey]DistinctIDRow
	// flushed are the hidden rows handed out by the last Flush; they
	// join committed once their batch is (their versions <= Committed).
	flushed []DistinctIDRow
}

func newHiddenRows() hiddenRows {
	return hiddenRows{above: map[didKey]uint64{}, committed: map[didKey]DistinctIDRow{}}
}

// settle runs before each batch: the previous batch's hidden rows are
// kept if it was committed (else it failed and is folded again), and ids
// whose hiding row the commit point has passed are forgotten.
func (f *Folder) settle() {
	h := &f.hidden
	for _, r := range h.flushed {
		if r.Version <= f.Committed {
			h.committed[didKey{r.ProjectID, r.DistinctID}] = r
		}
	}
	h.flushed = h.flushed[:0]
	for k, v := range h.above {
		if v <= f.Committed {
			delete(h.above, k)
			delete(h.committed, k)
		}
	}
}

// storedView is the row of k as of the commit point, given the newest
// stored row r.
func (f *Folder) storedView(k didKey, r DistinctIDRow) DistinctIDRow {
	if r.Version <= f.Committed {
		return r
	}
	if r.Version > f.hidden.above[k] {
		f.hidden.above[k] = r.Version
	}
	f.through = max(f.through, r.Version)
	if c, ok := f.hidden.committed[k]; ok {
		return c
	}
	return f.committedView(r)
}

// noteFlushed remembers a row Flush hands out if a stored row hides it.
func (f *Folder) noteFlushed(k didKey, r DistinctIDRow) {
	if f.hidden.above[k] > r.Version {
		f.hidden.flushed = append(f.hidden.flushed, r)
	}
}

// CommitThrough is the highest version above the commit point of any
// stored distinct id row the Folder has read: the end of the range a
// crashed batch wrote. A batch that ends below it must not be committed
// (fold it again, extended to at least this sequence): a row it writes for
// such an id would be hidden behind the crashed batch's row, and only
// memory, lost in a second crash, would remember it. Zero, or at most
// Committed, when there is nothing to cover.
func (f *Folder) CommitThrough() uint64 {
	if f.through <= f.Committed {
		return 0
	}
	return f.through
}
