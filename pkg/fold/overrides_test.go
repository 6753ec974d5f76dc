package fold

import (
	"fmt"
	"testing"
)

// overrideAttribution is how the analysis reads an event's person
// (pkg/insight): the override of its distinct id when there is one (none
// when the override is a tombstone), else the person the event was
// attributed to when it was folded.
func overrideAttribution(store *memStore, distinctID string, folded Resolved) uint64 {
	if o, ok := store.overrides[didKey{1, distinctID}]; ok {
		if o.IsDeleted {
			return 0
		}
		return o.PersonID
	}
	return folded.PersonID
}

// referenceAttribution is the definition: the current, live owner of the
// event's distinct id (0: none).
func referenceAttribution(store *memStore, distinctID string) uint64 {
	d, ok := store.dids[didKey{1, distinctID}]
	if !ok || d.IsDeleted {
		return 0
	}
	if p, ok := store.persons[personKey{1, d.PersonID}]; !ok || p.IsDeleted {
		return 0
	}
	return d.PersonID
}

// TestOverridesAttributeLikeTheReference: over random workloads with
// merges, splits, resets and deletions, folded in batches whose writes
// may fail part way and be folded again, every captured event's person as
// the overrides give it equals its distinct id's current live owner. And
// the overrides stay few: an id whose owner never changed has none.
func TestOverridesAttributeLikeTheReference(t *testing.T) {
	const size = 25
	for seed := int64(1); seed <= 6; seed++ {
		events := randomEvents(seed, 400, 30)
		for _, failAt := range []int{0, 3, 9} {
			for _, cut := range writeCuts {
				store, attributed := foldRetrying(t, events, size, failAt, cut.write)
				checked := 0
				for seq := 1; seq <= len(events); seq++ {
					e := ev(t, seq, events[seq-1])
					if e.Reserved() != "" {
						continue // the API's commands are not analysed
					}
					got := overrideAttribution(store, e.DistinctID, attributed[seq])
					if want := referenceAttribution(store, e.DistinctID); got != want {
						t.Fatalf("seed %d, batch %d failed after %q: event %d (%s) attributed to %d by the overrides, want %d (override %+v)",
							seed, failAt, cut.name, seq, events[seq-1], got, want, store.overrides[didKey{1, e.DistinctID}])
					}
					checked++
				}
				if checked < 200 {
					t.Fatalf("seed %d: only %d events checked", seed, checked)
				}
			}
		}
	}
}

// TestOverridesOnlyForChangedOwners: an id keeps no override while its
// first owner keeps it; a merge, a reset or a deletion makes one, and
// every later row of the id is one too.
func TestOverridesOnlyForChangedOwners(t *testing.T) {
	cases := []struct {
		name   string
		events []string
		want   map[string]string // distinct id -> override ("" none)
	}{
		{"first owners only", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b"}`, `{"distinct_id":"a","$set":{"x":1}}`},
			map[string]string{"a": "", "b": ""}},
		{"identify a new id", []string{`{"distinct_id":"anon"}`, `{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"}}`},
			map[string]string{"anon": "", "user": ""}},
		{"merge moves the source's ids", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b"}`, `{"event":"$create_alias","distinct_id":"b","properties":{"alias":"a"}}`},
			map[string]string{"a": "2", "b": ""}},
		{"created and merged in one batch", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b"}`, `{"event":"$merge_dangerously","distinct_id":"b","properties":{"alias":"a"}}`},
			map[string]string{"a": "2", "b": ""}},
		{"reset, then a new person", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b","event":"$create_alias","properties":{"alias":"a"}}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a","properties":{"$actor":{"key_id":"k"}}}`},
			map[string]string{"a": "deleted", "b": ""}},
		{"reset id comes back", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b","event":"$create_alias","properties":{"alias":"a"}}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a","properties":{"$actor":{"key_id":"k"}}}`, `{"distinct_id":"a"}`},
			map[string]string{"a": "4", "b": ""}},
		{"deleted person", []string{`{"distinct_id":"a"}`, `{"distinct_id":"b"}`,
			`{"event":"$delete_person","distinct_id":"x","properties":{"$person_id":1,"$actor":{"key_id":"k"}}}`},
			map[string]string{"a": "deleted", "b": ""}},
		{"split", []string{`{"distinct_id":"a"}`, `{"event":"$identify","distinct_id":"a","properties":{"$anon_distinct_id":"b"}}`,
			`{"event":"$split_person","distinct_id":"x","properties":{"$person_id":1,"$split_distinct_ids":["b"],"$actor":{"key_id":"k"}}}`},
			map[string]string{"a": "", "b": fmt.Sprint(SplitPersonID(3, 0))}},
	}
	for _, c := range cases {
		for _, size := range []int{1, 100} {
			store := run(t, c.events, size)
			for id, want := range c.want {
				got := ""
				if o, ok := store.overrides[didKey{1, id}]; ok {
					got = fmt.Sprint(o.PersonID)
					if o.IsDeleted {
						got = "deleted"
					}
				}
				if got != want {
					t.Errorf("%s (batches of %d): override of %q = %q, want %q", c.name, size, id, got, want)
				}
			}
		}
	}
}
