package fold

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

// withCohorts interleaves static cohort commands into events: their rows
// read the distinct id state as of the command, the state a refold after a
// crash must rebuild exactly.
func withCohorts(seed int64, events []string, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	var out []string
	for _, js := range events {
		out = append(out, js)
		if r.Intn(6) == 0 {
			name := "$add_to_static_cohort"
			if r.Intn(3) == 0 {
				name = "$remove_from_static_cohort"
			}
			out = append(out, fmt.Sprintf(`{"event":%q,"distinct_id":"x","properties":{"$cohort_id":%d,"$cohort_distinct_ids":["d%d","d%d"]}}`,
				name, 1+r.Intn(2), r.Intn(ids), r.Intn(ids)))
		}
	}
	return out
}

// refoldRun is one fold of a whole log, possibly interrupted: the store,
// the cohort rows (newest per cohort and id, as ReplacingMergeTree keeps
// them) and the person each event was attributed to.
type refoldRun struct {
	t          *testing.T
	store      *memStore
	f          *Folder
	cohorts    map[string]CohortMember
	attributed []Resolved
}

func newRefoldRun(t *testing.T, n int) *refoldRun {
	store := newMemStore()
	return &refoldRun{t: t, store: store, f: New(store), cohorts: map[string]CohortMember{}, attributed: make([]Resolved, n+1)}
}

// fold folds events[first:last] (sequences first+1..last) as one batch and
// returns what Flush hands out, unwritten.
func (r *refoldRun) fold(events []string, first, last int, redelivered bool) Batch {
	r.t.Helper()
	ctx := context.Background()
	var batch []Input
	for i := first; i < last; i++ {
		batch = append(batch, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(r.t, i+1, events[i]), Redelivered: redelivered})
	}
	if err := r.f.Prepare(ctx, batch); err != nil {
		r.t.Fatal(err)
	}
	for _, in := range batch {
		res, err := r.f.Apply(ctx, in)
		if err != nil {
			r.t.Fatal(err)
		}
		r.attributed[in.Seq] = res
	}
	return r.f.Flush()
}

func (r *refoldRun) write(b Batch) {
	r.store.write(b)
	for _, m := range b.CohortMembers {
		k := fmt.Sprintf("%d/%s", m.CohortID, m.DistinctID)
		if old, ok := r.cohorts[k]; !ok || m.Version >= old.Version {
			r.cohorts[k] = m
		}
	}
}

// commit folds and writes events[first:last] as one batch and commits it.
func (r *refoldRun) commit(events []string, first, last int, redelivered bool) {
	r.write(r.fold(events, first, last, redelivered))
	r.f.Committed = uint64(last)
}

// refoldReference is the log of a seed and its uninterrupted run.
func refoldReference(t *testing.T, seed int64) ([]string, *refoldRun) {
	events := withCohorts(seed, randomEvents(seed, 300, 12+int(seed)), 12+int(seed))
	ref := newRefoldRun(t, len(events))
	for first := 0; first < len(events); first += 40 {
		ref.commit(events, first, min(first+40, len(events)), false)
	}
	return events, ref
}

// crashedRun commits events up to committed in batches of 40, then folds
// committed..crashed as one batch that crashes after cut of its writes,
// and restarts: a new Folder with the store and the commit point.
func crashedRun(t *testing.T, events []string, committed, crashed int, cut func(Batch) Batch) *refoldRun {
	got := newRefoldRun(t, len(events))
	for first := 0; first < committed; first += 40 {
		got.commit(events, first, first+40, false)
	}
	got.write(cut(got.fold(events, committed, crashed, false)))
	got.f = New(got.store)
	got.f.Committed = uint64(committed)
	return got
}

// compare reports every difference from ref, an uninterrupted run of
// events: rows, cohort rows and the attribution of events after from.
func (r *refoldRun) compare(name string, ref *refoldRun, events []string, from int) {
	r.t.Helper()
	if g, w := r.store.rows(), ref.store.rows(); g != w {
		r.t.Errorf("%s: rows differ:\n%s", name, diffLines(g, w))
	}
	if g, w := r.cohortRows(), ref.cohortRows(); g != w {
		r.t.Errorf("%s: cohort rows differ:\n%s", name, diffLines(g, w))
	}
	for seq := from + 1; seq < len(ref.attributed); seq++ {
		if r.attributed[seq] != ref.attributed[seq] {
			r.t.Errorf("%s: event %d (%s) attributed to person %d, want %d", name, seq, events[seq-1], r.attributed[seq].PersonID, ref.attributed[seq].PersonID)
			break
		}
	}
}

func (r *refoldRun) cohortRows() string {
	var out []string
	for k, m := range r.cohorts {
		out = append(out, fmt.Sprintf("%s -> %d deleted=%v v%d", k, m.PersonID, m.IsDeleted, m.Version))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestRefoldAfterRestartInSmallerBatches: a batch crashes after its rows
// were written; the next process refolds its range in several smaller
// batches, and between two of them the distinct ids the first one changed
// leave memory, by eviction or by a failed batch (Reset, then a retry from
// the store). The stored row of such an id is the crashed batch's, of a
// version above the new commit point, whose Prev is the owner before the
// crashed batch: the change the first refolded batch made is hidden
// behind it. The end state must still be an uninterrupted run's: persons,
// distinct ids (first_seq), overrides, cohort rows and attribution.
func TestRefoldAfterRestartInSmallerBatches(t *testing.T) {
	const committed, crashed, refold = 120, 200, 16
	for seed := int64(1); seed <= 10; seed++ {
		events, ref := refoldReference(t, seed)
		for _, cut := range writeCuts {
			for _, loss := range []string{"eviction", "failed batch"} {
				got := crashedRun(t, events, committed, crashed, cut.write)
				if loss == "eviction" {
					got.f.MaxCached = 1
				}
				for first := committed; first < len(events); first += refold {
					last := min(first+refold, len(events))
					if loss == "failed batch" && first == committed+refold {
						// The write fails after the distinct ids; the
						// ingester retries from the store.
						got.write(Batch{DistinctIDs: got.fold(events, first, last, first < crashed).DistinctIDs})
						got.f.Reset()
					}
					got.commit(events, first, last, first < crashed)
				}
				name := fmt.Sprintf("seed %d, crash after %q, refolded in batches of %d, ids lost by %s", seed, cut.name, refold, loss)
				got.compare(name, ref, events, committed)
			}
		}
	}
}

// diffLines lists the lines only in got (+) or only in want (-).
func diffLines(got, want string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var out []string
	for l := range g {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	for l := range w {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
