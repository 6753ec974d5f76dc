package fold

import (
	"fmt"
	"testing"
)

// refoldStep commits the next refolded batch from events[first:] of size
// events, as the ingester does after a restart: extended, if the Folder
// read rows of a crashed batch beyond it, to the end of their range
// (CommitThrough). It returns the new commit point.
func (r *refoldRun) refoldStep(events []string, first, size, crashed int) int {
	last := min(first+size, len(events))
	for {
		b := r.fold(events, first, last, first < crashed)
		if through := int(r.f.CommitThrough()); through > last {
			r.f.Reset() // nothing written: fold the longer batch again
			last = through
			continue
		}
		r.write(b)
		r.f.Committed = uint64(last)
		return last
	}
}

// TestSecondCrashInsideRefold: a batch of 80 events crashes after (part
// of) its writes; the next process refolds its range in batches of 16 and
// crashes again right after its first commit; a third process finishes.
// Every row, cohort row and attribution must be an uninterrupted run's:
// the rows the first refolded batch committed must not have been hidden
// behind the first crash's rows, for nothing in memory survives the
// second crash.
func TestSecondCrashInsideRefold(t *testing.T) {
	const committed, crashed, refold = 120, 200, 16
	for seed := int64(1); seed <= 10; seed++ {
		events, ref := refoldReference(t, seed)
		for _, cut := range writeCuts {
			// First restart: one refolded batch commits, then the
			// process dies.
			got := crashedRun(t, events, committed, crashed, cut.write)
			c := got.refoldStep(events, committed, refold, crashed)
			// Second restart: only the store is left.
			got.f = New(got.store)
			got.f.Committed = uint64(c)
			for c < len(events) {
				c = got.refoldStep(events, c, refold, crashed)
			}
			name := fmt.Sprintf("seed %d, crash after %q, refolded in batches of %d, second crash after the first", seed, cut.name, refold)
			got.compare(name, ref, events, committed)
		}
	}
}
