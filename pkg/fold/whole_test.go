package fold

import "testing"

// wholeReads counts the projects memStore read whole, over every store
// of the package's tests.
var wholeReads int

// TestWholeProjectsFoldTheSame runs the fold's equivalence tests again
// with every step reading its project whole (a miss is enough): batching,
// crashes between writes, refolds, retries, eviction, the write lane and
// the rules give the same rows as row by row. Each must have read a
// project whole at least once.
func TestWholeProjectsFoldTheSame(t *testing.T) {
	defer func(d int) { defaultDense = d }(defaultDense)
	defaultDense = 1
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"Rules", TestRules},
		{"BatchingDoesNotMatter", TestBatchingDoesNotMatter},
		{"CrashBetweenWrites", TestCrashBetweenWrites},
		{"SecondCrashInsideRefold", TestSecondCrashInsideRefold},
		{"RefoldAfterRestartInSmallerBatches", TestRefoldAfterRestartInSmallerBatches},
		{"RetryInProcessGivesTheSameResult", TestRetryInProcessGivesTheSameResult},
		{"EvictionDoesNotChangeResults", TestEvictionDoesNotChangeResults},
		{"DeletePersonEventsActivityAfterARedelivery", TestDeletePersonEventsActivityAfterARedelivery},
		{"LaneIsReplayedByItsRecord", TestLaneIsReplayedByItsRecord},
		{"LaneCommandAfterItsEvent", TestLaneCommandAfterItsEvent},
		{"PersonUUIDAfterACrash", TestPersonUUIDAfterACrash},
		{"OverridesAttributeLikeTheReference", TestOverridesAttributeLikeTheReference},
		{"TimestampRulesReplay", TestTimestampRulesReplay},
		{"DeleteFilteredEvents", TestDeleteFilteredEvents},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := wholeReads
			c.test(t)
			if wholeReads == before {
				t.Fatal("no project was read whole")
			}
		})
	}
}

// TestWholeProjectsAcrossEvictions: three projects take turns in a cache
// that holds two of them. Each turn, the project returning was evicted
// by the others: it is read whole again (its steps miss densely, and the
// eviction left it room), the oldest loses its wholeness to eviction, and
// the rows are those of a fold that never reads a project whole and
// never evicts.
func TestWholeProjectsAcrossEvictions(t *testing.T) {
	events := [3][]string{randomEvents(31, 1200, 60), randomEvents(32, 1200, 60), randomEvents(33, 1200, 60)}
	fold := func(f *Folder, store *memStore) {
		seq := 1
		for turn := 0; turn < 6; turn++ {
			for p := range events {
				part := events[p][turn*200 : (turn+1)*200]
				runProject(t, f, store, uint64(p+1), part, seq, 10, false)
				seq += len(part)
			}
		}
	}
	ref := newMemStore()
	plain := New(ref)
	plain.DenseMisses = -1
	fold(plain, ref)

	store := newMemStore()
	f := New(store)
	f.MaxCached, f.DenseMisses = 150, 5
	fold(f, store)
	for p := uint64(1); p <= 3; p++ {
		if got, want := joinLines(store.snapshot(p)), joinLines(ref.snapshot(p)); got != want {
			t.Fatalf("project %d:\n%s\nwant\n%s", p, got, want)
		}
	}
	if got, want := store.rows(), ref.rows(); got != want {
		t.Fatalf("rows differ:\n%s\nwant\n%s", got, want)
	}
	if store.projectLoads < 4 {
		t.Fatalf("%d whole reads, want the three first reads and one after an eviction at least", store.projectLoads)
	}
	if ref.projectLoads != 0 {
		t.Fatalf("DenseMisses -1 read %d projects whole", ref.projectLoads)
	}
}

// TestWholeProjectSavesTheReads: once a project is read whole, its steps
// read nothing by key, new ids included; a project over the cache's room
// is not read whole, nor tried again within wholeSpacing steps.
func TestWholeProjectSavesTheReads(t *testing.T) {
	events := randomEvents(41, 600, 400)
	store := run(t, events[:300], 50)
	f := New(store)
	f.Committed, f.DenseMisses = 300, 10
	store.loads = 0
	runInto(t, f, store, events[300:], 301, 50, false)
	if store.projectLoads != 1 || store.loads != 0 {
		t.Fatalf("%d whole reads and %d reads by key, want 1 and 0", store.projectLoads, store.loads)
	}

	small := New(store)
	small.Committed, small.DenseMisses, small.MaxCached = 600, 10, 100
	store.loads, store.projectLoads = 0, 0
	more := randomEvents(42, 200, 400)
	runInto(t, small, store, more, 601, 50, false)
	if store.projectLoads != 0 || store.loads == 0 {
		t.Fatalf("a project over the bound: %d whole reads, %d by key", store.projectLoads, store.loads)
	}
	if small.whole.read[1] != 1 || small.WholeLoads() != 0 {
		t.Fatalf("a project over the bound: tried at step %d, %d whole reads; want one try, at the first step", small.whole.read[1], small.WholeLoads())
	}
}
