package fold

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/person"
)

// The uuid rule as a table: event sequences (sequence = position + 1) and
// the uuid of the live person owning each listed distinct id, as the rule
// that must give it: "D" (person.UUIDFor(D): the person was created from
// id D, never owned before) or "D@S" (person.UUIDForReuse(D, S): created
// at sequence S from id D, which had an owner before, or by a split).
var uuidCases = []struct {
	name   string
	events []string
	want   map[string]string
}{
	{"first event of an id",
		[]string{`{"distinct_id":"a"}`},
		map[string]string{"a": "a"}},
	{"merge creating one person for both ids: the event's id names it",
		[]string{`{"event":"$identify","distinct_id":"u","properties":{"$anon_distinct_id":"x"}}`},
		map[string]string{"u": "u", "x": "u"}},
	{"reset id's next event",
		[]string{`{"distinct_id":"a"}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a"}`, `{"distinct_id":"a"}`},
		map[string]string{"a": "a@4", "b": "a"}},
	{"reset twice: each fresh person its own",
		[]string{`{"distinct_id":"a"}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a"}`, `{"distinct_id":"a"}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a"}`, `{"distinct_id":"a"}`},
		map[string]string{"a": "a@6", "b": "a"}},
	{"deleted person's id seen again",
		[]string{`{"distinct_id":"a"}`, `{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1}}`, `{"distinct_id":"a"}`},
		map[string]string{"a": "a@3"}},
	{"id merged in, its person deleted, seen again",
		[]string{`{"event":"$identify","distinct_id":"u","properties":{"$anon_distinct_id":"x"}}`,
			`{"event":"$delete_person","distinct_id":"u","properties":{"$person_id":1}}`, `{"distinct_id":"x"}`, `{"distinct_id":"u"}`},
		map[string]string{"x": "x@3", "u": "u@4"}},
	{"merge after a delete: the event's id had an owner",
		[]string{`{"distinct_id":"u"}`, `{"event":"$delete_person","distinct_id":"u","properties":{"$person_id":1}}`,
			`{"event":"$identify","distinct_id":"u","properties":{"$anon_distinct_id":"new"}}`},
		map[string]string{"u": "u@3", "new": "u@3"}},
	{"split: the person keeps its uuid, each moved id gets one of its own",
		[]string{`{"distinct_id":"a"}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$create_alias","distinct_id":"b","properties":{"alias":"c"}}`,
			`{"event":"$split_person","distinct_id":"b","properties":{"$person_id":1,"$split_distinct_ids":["a","c"]}}`},
		map[string]string{"a": "a@4", "b": "a", "c": "c@4"}},
	{"an id whose text is another id and a sequence",
		[]string{`{"distinct_id":"x"}`, `{"event":"$delete_person","distinct_id":"x","properties":{"$person_id":1}}`,
			`{"distinct_id":"x:4"}`, `{"distinct_id":"x"}`},
		map[string]string{"x:4": "x:4", "x": "x@4"}},
}

// wantUUID is the uuid a rule of uuidCases names.
func wantUUID(t *testing.T, rule string) uuid.UUID {
	t.Helper()
	d, at, reused := strings.Cut(rule, "@")
	if !reused {
		return person.UUIDFor(1, d)
	}
	seq, err := strconv.ParseUint(at, 10, 64)
	if err != nil {
		t.Fatalf("bad rule %q", rule)
	}
	return person.UUIDForReuse(1, d, seq)
}

func TestPersonUUIDRule(t *testing.T) {
	for _, tc := range uuidCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 2, 100} {
				store := run(t, tc.events, size)
				for d, rule := range tc.want {
					row, ok := store.dids[didKey{1, d}]
					if !ok || row.IsDeleted {
						t.Fatalf("batch size %d: %s has no owner", size, d)
					}
					if got, want := store.persons[personKey{1, row.PersonID}].UUID, wantUUID(t, rule); got != want {
						t.Errorf("batch size %d: person of %s has uuid %s, want %s (%s)", size, d, got, want, rule)
					}
				}
				wantUniqueUUIDs(t, store)
			}
		})
	}
}

// wantUniqueUUIDs checks that no two person rows of the store, deleted
// ones included, share a uuid.
func wantUniqueUUIDs(t *testing.T, store *memStore) {
	t.Helper()
	seen := map[uuid.UUID]uint64{}
	for k, p := range store.persons {
		if other, ok := seen[p.UUID]; ok {
			t.Fatalf("persons %d and %d share uuid %s", other, k.id, p.UUID)
		}
		seen[p.UUID] = k.id
	}
}

// TestPersonUUIDsAreUnique: over random workloads of merges, deletes,
// splits and resets, folded in batches of any size, every person ever
// created has a uuid of its own, and the uuids do not depend on batching.
func TestPersonUUIDsAreUnique(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		events := randomEvents(seed, 500, 20)
		ref := run(t, events, 1)
		wantUniqueUUIDs(t, ref)
		for _, size := range []int{7, 500} {
			got := run(t, events, size)
			for k, p := range ref.persons {
				if g := got.persons[k]; g.UUID != p.UUID {
					t.Fatalf("seed %d, batch size %d: person %d has uuid %s, want %s", seed, size, k.id, g.UUID, p.UUID)
				}
			}
		}
	}
}

// TestPersonUUIDAfterACrash: a batch that resets and deletes ids and then
// sees them again, whose writes stop part way, folded again by a new
// Folder (the batch redelivered, possibly cut into other batches), gives
// the fresh persons the uuids of an uninterrupted run: the rule reads the
// distinct id's state, which the refold rebuilds from prev_* exactly as
// the first fold had it.
func TestPersonUUIDAfterACrash(t *testing.T) {
	events := []string{
		`{"distinct_id":"a"}`, // 1: person 1
		`{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
		`{"distinct_id":"c"}`, // 3: person 3
		// The batch cut by the crash:
		`{"event":"$reset_person_distinct_id","distinct_id":"a"}`,
		`{"distinct_id":"a"}`, // 5: fresh person of a
		`{"event":"$delete_person","distinct_id":"x","properties":{"$person_id":3}}`,
		`{"distinct_id":"c"}`, // 7: fresh person of c
		`{"event":"$split_person","distinct_id":"x","properties":{"$person_id":1,"$split_distinct_ids":["b"]}}`,
		`{"distinct_id":"new"}`,
	}
	ref := run(t, events, 3)
	wantUniqueUUIDs(t, ref)
	for _, cut := range writeCuts {
		for _, resize := range []int{6, 2, 1} {
			store := foldCrashed(t, events, 3, len(events), cut.write, resize)
			if got, want := store.rows(), ref.rows(); got != want {
				t.Fatalf("cut %q, batches of %d: rows differ:\n%s\nwant\n%s", cut.name, resize, got, want)
			}
		}
	}
}
