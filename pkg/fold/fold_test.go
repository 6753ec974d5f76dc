package fold

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
)

// The fold rules as a table: event sequences and the persons they leave.
var ruleCases = []struct {
	name   string
	events []string
	want   []string
}{
	{"first event creates a person",
		[]string{`{"distinct_id":"a"}`},
		[]string{`[a] {}`}},
	{"set_once then set on creation, set wins",
		[]string{`{"distinct_id":"a","$set_once":{"x":1,"y":1},"$set":{"x":2}}`},
		[]string{`[a] {"x":2,"y":1}`}},
	{"set inside properties, top level wins",
		[]string{`{"distinct_id":"a","properties":{"$set":{"x":1,"z":3}},"$set":{"x":2}}`},
		[]string{`[a] {"x":2,"z":3}`}},
	{"set_once does not overwrite",
		[]string{`{"distinct_id":"a","$set":{"x":1}}`, `{"distinct_id":"a","$set_once":{"x":2,"y":2}}`},
		[]string{`[a] {"x":1,"y":2}`}},
	{"unset list and object",
		[]string{`{"distinct_id":"a","$set":{"x":1,"y":2,"z":3}}`, `{"distinct_id":"a","$unset":["x"]}`, `{"distinct_id":"a","properties":{"$unset":{"y":true}}}`},
		[]string{`[a] {"z":3}`}},
	{"delete_person_property is applied",
		[]string{`{"distinct_id":"a","$set":{"x":1,"y":2}}`, `{"event":"$delete_person_property","distinct_id":"a","properties":{"$unset":["x"]}}`},
		[]string{`[a] {"y":2}`}},
	{"identify: anonymous person takes the identified id",
		[]string{`{"distinct_id":"anon","$set":{"a":1}}`, `{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"},"$set":{"email":"u@x"}}`},
		[]string{`[anon user] {"a":1,"email":"u@x"} identified`}},
	{"identify: neither has a person, one created with both",
		[]string{`{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"}}`},
		[]string{`[anon user] {} identified`}},
	{"identify: target exists, anon joins",
		[]string{`{"distinct_id":"user","$set":{"t":1}}`, `{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"}}`},
		[]string{`[anon user] {"t":1} identified`}},
	{"identify merges two persons: target props win, source removed",
		[]string{`{"distinct_id":"anon","$set":{"x":"anon","a":1}}`, `{"distinct_id":"user","$set":{"x":"user"}}`,
			`{"event":"$identify","distinct_id":"user","properties":{"$anon_distinct_id":"anon"},"$set":{"s":1}}`},
		[]string{`[anon user] {"a":1,"s":1,"x":"user"} identified`}},
	{"already identified source is not merged by identify",
		[]string{`{"event":"$identify","distinct_id":"u1","properties":{"$anon_distinct_id":"a1"}}`, `{"distinct_id":"u2"}`,
			`{"event":"$identify","distinct_id":"u2","properties":{"$anon_distinct_id":"u1"}}`},
		[]string{`[a1 u1] {} identified`, `[u2] {} identified`}},
	{"merge_dangerously merges an identified source",
		[]string{`{"event":"$identify","distinct_id":"u1","properties":{"$anon_distinct_id":"a1"},"$set":{"k":1}}`, `{"distinct_id":"u2"}`,
			`{"event":"$merge_dangerously","distinct_id":"u2","properties":{"alias":"u1"}}`},
		[]string{`[a1 u1 u2] {"k":1} identified`}},
	{"create_alias merges, marks identified only through the merge",
		[]string{`{"distinct_id":"x"}`, `{"event":"$create_alias","distinct_id":"y","properties":{"alias":"x"}}`},
		[]string{`[x y] {}`}},
	{"create_alias of two persons merges",
		[]string{`{"distinct_id":"x","$set":{"p":1}}`, `{"distinct_id":"y"}`, `{"event":"$create_alias","distinct_id":"y","properties":{"alias":"x"}}`},
		[]string{`[x y] {"p":1} identified`}},
	{"illegal ids never merge",
		[]string{`{"distinct_id":"a"}`, `{"event":"$identify","distinct_id":"a","properties":{"$anon_distinct_id":"null"}}`,
			`{"event":"$identify","distinct_id":"a","properties":{"$anon_distinct_id":"\"undefined\""}}`,
			`{"event":"$create_alias","distinct_id":"Anonymous","properties":{"alias":"a"}}`},
		[]string{`[Anonymous] {}`, `[a] {} identified`}},
	{"same ids: no merge",
		[]string{`{"event":"$identify","distinct_id":"a","properties":{"$anon_distinct_id":"a"}}`},
		[]string{`[a] {} identified`}},
	{"delete removes the person and its ids; a reused id starts afresh",
		[]string{`{"distinct_id":"a","$set":{"x":1}}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$delete_person","distinct_id":"b","properties":{"$person_id":1}}`, `{"distinct_id":"a","$set":{"y":2}}`},
		[]string{`[a] {"y":2}`}},
	{"delete of an unknown or deleted person does nothing",
		[]string{`{"distinct_id":"a"}`, `{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":7}}`},
		[]string{`[a] {}`}},
	{"split moves the listed ids to persons of their own",
		[]string{`{"distinct_id":"a","$set":{"x":1}}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$create_alias","distinct_id":"b","properties":{"alias":"c"}}`,
			`{"event":"$split_person","distinct_id":"b","properties":{"$person_id":1,"$split_distinct_ids":["a","c","zzz"]}}`,
			`{"distinct_id":"c","$set":{"c":1}}`},
		[]string{`[a] {}`, `[b] {"x":1} identified`, `[c] {"c":1}`}},
	{"reset detaches an id; its next event starts a fresh person",
		[]string{`{"distinct_id":"a","$set":{"x":1}}`, `{"event":"$identify","distinct_id":"b","properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$reset_person_distinct_id","distinct_id":"a"}`, `{"distinct_id":"a","$set":{"y":2}}`},
		[]string{`[a] {"y":2}`, `[b] {"x":1} identified`}},
	{"reset of an unknown id or a deleted person's id changes nothing",
		[]string{`{"distinct_id":"a"}`, `{"event":"$reset_person_distinct_id","distinct_id":"zzz"}`, `{"distinct_id":"b"}`,
			`{"event":"$delete_person","distinct_id":"b","properties":{"$person_id":3}}`, `{"event":"$reset_person_distinct_id","distinct_id":"b"}`,
			`{"distinct_id":"a","$set":{"y":1}}`},
		[]string{`[a] {"y":1}`}},
	{"chained merges carry every id",
		[]string{`{"distinct_id":"a","$set":{"a":1}}`, `{"distinct_id":"b","$set":{"b":1}}`, `{"distinct_id":"c","$set":{"c":1}}`,
			`{"event":"$merge_dangerously","distinct_id":"b","properties":{"alias":"a"}}`,
			`{"event":"$merge_dangerously","distinct_id":"c","properties":{"alias":"b"}}`},
		[]string{`[a b c] {"a":1,"b":1,"c":1} identified`}},
}

func TestRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			// Batch sizes 1 (every event flushed and reloaded) and 100
			// (everything in memory) must agree.
			for _, size := range []int{1, 2, 100} {
				got := run(t, tc.events, size).snapshot(1)
				if joinLines(got) != joinLines(tc.want) {
					t.Errorf("batch size %d:\n got %q\nwant %q", size, got, tc.want)
				}
			}
		})
	}
}

func TestNoChangeWritesNoRow(t *testing.T) {
	store := newMemStore()
	f := New(store)
	ctx := context.Background()
	for seq, js := range []string{`{"distinct_id":"a","$set":{"x":1}}`, `{"distinct_id":"a","$set":{"x":1}}`, `{"distinct_id":"a","$set_once":{"x":2}}`, `{"distinct_id":"a"}`} {
		in := Input{ProjectID: 1, Seq: uint64(seq + 1), Event: ev(t, seq+1, js)}
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
		b := f.Flush()
		want := 0
		if seq == 0 {
			want = 1
		}
		if len(b.Persons) != want {
			t.Fatalf("event %d wrote %d person rows, want %d", seq+1, len(b.Persons), want)
		}
	}
}

func TestWarningForAlreadyIdentified(t *testing.T) {
	store := newMemStore()
	f := New(store)
	runInto(t, f, store, ruleCases[10].events, 1, 10, false)
	// runInto flushed the warnings into the store's batch; fold again to
	// see a warning come out of Flush.
	f2 := New(store)
	f2.Committed = 3
	ctx := context.Background()
	in := Input{ProjectID: 1, Seq: 5, Event: ev(t, 5, `{"event":"$identify","distinct_id":"u2","properties":{"$anon_distinct_id":"u1"}}`)}
	if _, err := f2.Apply(ctx, in); err != nil {
		t.Fatal(err)
	}
	b := f2.Flush()
	if len(b.Warnings) != 1 || b.Warnings[0].Type != WarningCannotMergeAlreadyIdentified {
		t.Fatalf("warnings = %+v", b.Warnings)
	}
}

// randomEvents makes a deterministic mixed workload over few ids, so that
// merges, chains and refused merges all happen.
func randomEvents(seed int64, n, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	id := func() string { return fmt.Sprintf("d%d", r.Intn(ids)) }
	var out []string
	for i := 0; i < n; i++ {
		var js string
		switch k := r.Intn(14); {
		case k == 13:
			js = fmt.Sprintf(`{"event":"$reset_person_distinct_id","distinct_id":%q,"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`, id())
		case k == 12 && i > 0:
			js = fmt.Sprintf(`{"event":"$delete_person_events","distinct_id":"x","properties":{"$person_id":%d,"$actor":{"key_id":"k","organization_id":"o"}}}`, 1+r.Intn(i))
		case k == 10 && i > 0:
			js = fmt.Sprintf(`{"event":"$delete_person","distinct_id":"x","properties":{"$person_id":%d,"$delete_events":%v,"$actor":{"key_id":"k","organization_id":"o"}}}`, 1+r.Intn(i), r.Intn(2) == 0)
		case k == 11 && i > 0:
			js = fmt.Sprintf(`{"event":"$split_person","distinct_id":"x","properties":{"$person_id":%d,"$split_distinct_ids":[%q,%q],"$actor":{"key_id":"k","organization_id":"o"}}}`, 1+r.Intn(i), id(), id())
		case k < 3:
			js = fmt.Sprintf(`{"distinct_id":%q,"$set":{"k%d":%d}}`, id(), r.Intn(5), r.Intn(3))
		case k < 4:
			js = fmt.Sprintf(`{"distinct_id":%q,"$set_once":{"k%d":%d}}`, id(), r.Intn(5), r.Intn(3))
		case k < 5:
			js = fmt.Sprintf(`{"distinct_id":%q,"$unset":["k%d"]}`, id(), r.Intn(5))
		case k < 6:
			js = fmt.Sprintf(`{"event":"$identify","distinct_id":%q,"properties":{"$anon_distinct_id":%q}}`, id(), id())
		case k < 7:
			js = fmt.Sprintf(`{"event":"$create_alias","distinct_id":%q,"properties":{"alias":%q}}`, id(), id())
		case k < 8:
			js = fmt.Sprintf(`{"event":"$merge_dangerously","distinct_id":%q,"properties":{"alias":%q}}`, id(), id())
		default:
			js = fmt.Sprintf(`{"distinct_id":%q}`, id())
		}
		out = append(out, js)
	}
	return out
}

// TestBatchingDoesNotMatter: any batch size gives the same final state and
// the same versions as folding one event at a time.
func TestBatchingDoesNotMatter(t *testing.T) {
	events := randomEvents(7, 600, 40)
	ref := run(t, events, 1)
	for _, size := range []int{3, 17, 1000} {
		got := run(t, events, size)
		if joinLines(got.snapshot(1)) != joinLines(ref.snapshot(1)) {
			t.Fatalf("batch size %d differs:\n%s\nvs\n%s", size, joinLines(got.snapshot(1)), joinLines(ref.snapshot(1)))
		}
		for k, p := range ref.persons {
			if g := got.persons[k]; g.Version != p.Version || g.IsDeleted != p.IsDeleted || g.UUID != p.UUID {
				t.Fatalf("batch size %d: person %d version %d/%d deleted %v/%v", size, k.id, g.Version, p.Version, g.IsDeleted, p.IsDeleted)
			}
		}
	}
}

// writeCuts are the states a failed WriteBatch can leave: a prefix of the
// batch's rows in the order they are written (persons first, then
// distinct ids).
var writeCuts = []struct {
	name  string
	write func(b Batch) Batch
}{
	{"nothing", func(b Batch) Batch { return Batch{} }},
	{"half the persons", func(b Batch) Batch { return Batch{Persons: b.Persons[:len(b.Persons)/2]} }},
	{"persons", func(b Batch) Batch { return Batch{Persons: b.Persons} }},
	{"persons and half the ids", func(b Batch) Batch {
		return Batch{Persons: b.Persons, DistinctIDs: b.DistinctIDs[:len(b.DistinctIDs)/2]}
	}},
	{"everything", func(b Batch) Batch { return b }},
}

// TestCrashBetweenWrites simulates a crash after part of a batch's rows
// were written (rows are written persons first, then distinct ids): a fresh
// Folder reading the store gets the batch again, possibly cut into
// different batches, and must end in the same state as an uninterrupted run:
// the same rows, first_seq and overrides included.
func TestCrashBetweenWrites(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		events := randomEvents(seed, 300, 25+int(seed))
		ref := run(t, events, 40)
		for _, cut := range writeCuts {
			for _, resize := range []int{40, 13} {
				store := foldCrashed(t, events, 120, 160, cut.write, resize)
				if got, want := joinLines(store.snapshot(1)), joinLines(ref.snapshot(1)); got != want {
					t.Fatalf("seed %d, cut %q, batches of %d: state differs:\n%s\nwant\n%s", seed, cut.name, resize, got, want)
				}
				if got, want := store.rows(), ref.rows(); got != want {
					t.Fatalf("seed %d, cut %q, batches of %d: rows differ:\n%s\nwant\n%s", seed, cut.name, resize, got, want)
				}
				for k, p := range ref.persons {
					if g := store.persons[k]; g.Version != p.Version || g.IsDeleted != p.IsDeleted || g.UUID != p.UUID {
						t.Fatalf("seed %d, cut %q: person %d version %d deleted %v uuid %s, want %d %v %s", seed, cut.name, k.id, g.Version, g.IsDeleted, g.UUID, p.Version, p.IsDeleted, p.UUID)
					}
				}
			}
		}
	}
}

// foldCrashed folds events[:committed] in batches of 40, then
// events[committed:crashed] as one batch whose writes stop after cut, and
// restarts: a new Folder gets events committed+1..crashed again
// (redelivered), in batches of resize, and the rest for the first time.
func foldCrashed(t *testing.T, events []string, committed, crashed int, cut func(Batch) Batch, resize int) *memStore {
	t.Helper()
	store := newMemStore()
	f := New(store)
	runInto(t, f, store, events[:committed], 1, 40, false)
	ctx := context.Background()
	var batch []Input
	for i := committed; i < crashed; i++ {
		batch = append(batch, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, events[i])})
	}
	if err := f.Prepare(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, in := range batch {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	store.write(cut(f.Flush()))
	f = New(store)
	f.Committed = uint64(committed)
	runInto(t, f, store, events[committed:crashed], committed+1, resize, true)
	if crashed < len(events) {
		runInto(t, f, store, events[crashed:], crashed+1, resize, false)
	}
	return store
}

// foldFrom folds events[from:] (project 1, the sequence of events[i] is
// i+1) as one batch into f and flushes it.
func foldFrom(t *testing.T, f *Folder, events []string, from int, redelivered bool) Batch {
	t.Helper()
	ctx := context.Background()
	var batch []Input
	for i := from; i < len(events); i++ {
		batch = append(batch, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, events[i]), Redelivered: redelivered})
	}
	if err := f.Prepare(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, in := range batch {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	return f.Flush()
}

// TestDeletePersonEventsActivityAfterARedelivery: a $delete_person_events
// redelivered over a stored row of a later state (the email changed after
// it) records no second activity entry naming the person as it is now;
// the first delivery's entry, written before the persons, stands. Before,
// the redelivery rewrote the entry with the later name (CI,
// TestStackStopsWithClickHouseDead).
func TestDeletePersonEventsActivityAfterARedelivery(t *testing.T) {
	events := []string{
		`{"distinct_id":"a","$set":{"email":"old@x.io"}}`,
		`{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":1,"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"distinct_id":"a","$set":{"email":"new@x.io"}}`,
	}
	fold := func(f *Folder, from int, redelivered bool) Batch {
		return foldFrom(t, f, events, from, redelivered)
	}
	names := func(b Batch) []string {
		var out []string
		for _, a := range b.Activity {
			out = append(out, a.Activity+" "+*a.Detail.Name)
		}
		return out
	}
	store := newMemStore()
	first := fold(New(store), 0, false)
	if got := fmt.Sprint(names(first)); got != "[delete_events old@x.io]" {
		t.Fatalf("first delivery recorded %s", got)
	}
	store.write(first)
	for from := 0; from <= 1; from++ {
		again := fold(New(store), from, true)
		if len(again.Activity) != 0 {
			t.Fatalf("redelivery from %d recorded %v again over the stored state", from+1, names(again))
		}
		if fmt.Sprint(again.DeletionRequests) != fmt.Sprint(first.DeletionRequests) {
			t.Fatalf("redelivery asked %+v, first run %+v", again.DeletionRequests, first.DeletionRequests)
		}
	}
	// Redelivered over a stored row older than the request (the crash came
	// before the persons were written), the entry is recorded as at first.
	again := fold(New(newMemStore()), 0, true)
	if got, want := fmt.Sprint(names(again)), fmt.Sprint(names(first)); got != want {
		t.Fatalf("redelivery over no rows recorded %s, want %s", got, want)
	}
}

func TestActivityAndDeletionRequests(t *testing.T) {
	store := newMemStore()
	f := New(store)
	ctx := context.Background()
	events := []string{
		`{"distinct_id":"a","$set":{"x":1,"y":1}}`,
		`{"event":"$set","distinct_id":"a","$set":{"x":2,"z":3},"properties":{"$actor":{"key_id":"k","key_label":"ci","organization_id":"o"}}}`,
		`{"event":"$set","distinct_id":"a","$set":{"x":2},"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"event":"$delete_person_property","distinct_id":"a","$unset":["y"],"properties":{"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":true,"$actor":{"key_id":"k","organization_id":"o"}}}`,
	}
	for i, js := range events {
		if _, err := f.Apply(ctx, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, js)}); err != nil {
			t.Fatal(err)
		}
	}
	b := f.Flush()
	var kinds []string
	for _, a := range b.Activity {
		kinds = append(kinds, a.Activity)
	}
	if fmt.Sprint(kinds) != "[updated delete_property deleted]" {
		t.Fatalf("activity: %v", kinds)
	}
	up := b.Activity[0].Detail.Changes[0]
	if fmt.Sprint(up.Before) != "map[x:1]" || fmt.Sprint(up.After) != "map[x:2 z:3]" || b.Activity[0].UserLabel != "ci" {
		t.Fatalf("updated change: %+v", up)
	}
	if len(b.DeletionRequests) != 1 || b.DeletionRequests[0].PersonID != 1 || b.DeletionRequests[0].RequestSeq != 5 {
		t.Fatalf("deletion requests: %+v", b.DeletionRequests)
	}
}

// TestPrepareLoadsEverything: after Prepare, folding a batch reads nothing
// more from the store, and Prepare itself takes a few queries.
func TestPrepareLoadsEverything(t *testing.T) {
	events := randomEvents(5, 400, 60)
	store := run(t, events[:200], 50)
	f := New(store)
	f.Committed = 200
	var batch []Input
	for i := 200; i < 400; i++ {
		batch = append(batch, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, events[i])})
	}
	ctx := context.Background()
	store.loads = 0
	if err := f.Prepare(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if store.loads > 2 {
		t.Fatalf("Prepare made %d loads, want at most 2", store.loads)
	}
	store.loads = 0
	for _, in := range batch {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if store.loads != 0 {
		t.Fatalf("Apply made %d loads after Prepare", store.loads)
	}
}

// TestEvictionDoesNotChangeResults: with a cache far smaller than the
// workload, entries are evicted after every batch and read back from the
// store, and the result is the same.
func TestEvictionDoesNotChangeResults(t *testing.T) {
	events := randomEvents(21, 800, 120)
	ref := run(t, events, 25)
	store := newMemStore()
	f := New(store)
	f.MaxCached = 10
	runInto(t, f, store, events, 1, 25, false)
	if got, want := joinLines(store.snapshot(1)), joinLines(ref.snapshot(1)); got != want {
		t.Fatalf("with eviction:\n%s\nwant\n%s", got, want)
	}
	if p, d := f.Cached(); p > 40 || d > 80 {
		t.Fatalf("cache not bounded: %d persons, %d distinct ids", p, d)
	}
}

func TestEvictOldest(t *testing.T) {
	m := map[int]*personState{}
	for i := 1; i <= 10; i++ {
		m[i] = &personState{used: uint64(i), dirty: i == 2}
	}
	evictOldest(m, 4, func(p *personState) (uint64, bool) { return p.used, !p.dirty }, func(*personState) {})
	var left []int
	for i := 1; i <= 10; i++ {
		if _, ok := m[i]; ok {
			left = append(left, i)
		}
	}
	// The dirty entry stays; the rest are the most recently used.
	if fmt.Sprint(left) != "[2 8 9 10]" {
		t.Fatalf("left %v", left)
	}
}

// TestDeletePersonEventsKeepsThePerson: $delete_person_events queues the
// deletion of a live person's events and changes no row; the decision is
// the same when a redelivery reads stored rows written after the event
// (the person deleted later in the batch, or created after it).
func TestDeletePersonEventsKeepsThePerson(t *testing.T) {
	events := []string{
		`{"distinct_id":"a","$set":{"x":1}}`,
		`{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":1,"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":4,"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"distinct_id":"b"}`,
		`{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":false,"$actor":{"key_id":"k","organization_id":"o"}}}`,
		`{"event":"$delete_person_events","distinct_id":"a","properties":{"$person_id":1,"$actor":{"key_id":"k","organization_id":"o"}}}`,
	}
	fold := func(f *Folder, redelivered bool) Batch {
		return foldFrom(t, f, events, 0, redelivered)
	}
	store := newMemStore()
	first := fold(New(store), false)
	// Only event 2 asks: person 4 does not exist yet at 3, and person 1
	// is deleted at 5, before 6.
	if len(first.DeletionRequests) != 1 || first.DeletionRequests[0].PersonID != 1 || first.DeletionRequests[0].RequestSeq != 2 {
		t.Fatalf("deletion requests: %+v", first.DeletionRequests)
	}
	for _, p := range first.Persons {
		if p.ID == 1 && p.Version != 5 {
			t.Fatalf("person 1 changed by the events deletion: version %d", p.Version)
		}
	}
	// A crash after every row was written but the batch not committed:
	// the batch comes again over the stored rows.
	store.write(first)
	again := fold(New(store), true)
	if fmt.Sprint(again.DeletionRequests) != fmt.Sprint(first.DeletionRequests) {
		t.Fatalf("redelivery asked %+v, first run %+v", again.DeletionRequests, first.DeletionRequests)
	}
}
