package fold

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
)

// fillEvent is the bench's fill event (bench/dataset.go): a new person
// with four properties.
func fillEvent(i int) string {
	return fmt.Sprintf(`{"distinct_id":"fill-%d","$set":{"email":"fill%d@example.com","name":"Fill %d","plan":"pro","visits":%d}}`, i, i, i, i%500)
}

// decodedPersons lists the cached persons holding a decoded map.
func decodedPersons(f *Folder) []uint64 {
	var ids []uint64
	for k, p := range f.persons {
		if p.row.Properties != nil {
			ids = append(ids, k.id)
		}
	}
	return ids
}

// TestCachedPersonsKeepStoredForm: between batches a cached person holds
// its properties as the JSON the store holds, not a map; a batch decodes
// only the persons whose properties an event may change, and Flush drops
// those maps again.
func TestCachedPersonsKeepStoredForm(t *testing.T) {
	store := newMemStore()
	f := New(store)
	runInto(t, f, store, []string{fillEvent(1), fillEvent(2), `{"distinct_id":"c"}`}, 1, 10, false)
	check := func(when string) {
		t.Helper()
		if ids := decodedPersons(f); len(ids) != 0 {
			t.Fatalf("%s: persons %v keep a decoded map", when, ids)
		}
		for k, p := range f.persons {
			want, _ := json.Marshal(store.persons[k].Properties)
			if p.row.PropertiesJSON != string(want) {
				t.Fatalf("%s: person %d holds %q, stored %s", when, k.id, p.row.PropertiesJSON, want)
			}
		}
	}
	check("after the first batch")

	ctx := context.Background()
	batch := []Input{
		{ProjectID: 1, Seq: 4, Event: ev(t, 4, `{"distinct_id":"fill-1","$set":{"visits":7}}`)},
		{ProjectID: 1, Seq: 5, Event: ev(t, 5, `{"distinct_id":"fill-2"}`)},
	}
	if err := f.Prepare(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, in := range batch {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if ids := decodedPersons(f); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("decoded during the batch: %v, want [1] (the person a $set changes)", ids)
	}
	b := f.Flush()
	store.write(b)
	if len(b.Persons) != 1 || b.Persons[0].PropertiesJSON != `{"email":"fill1@example.com","name":"Fill 1","plan":"pro","visits":7}` || b.Persons[0].Properties["visits"] != json.Number("7") {
		t.Fatalf("flushed %+v", b.Persons)
	}
	check("after the second batch")

	// A Folder reading the store keeps the stored form too.
	g := New(store)
	g.Committed = 5
	f = g
	runInto(t, f, store, []string{`{"distinct_id":"fill-1"}`, `{"distinct_id":"fill-2","$set":{"plan":"free"}}`}, 6, 10, false)
	check("after loading")
	if got := store.persons[personKey{1, 2}].Properties["plan"]; got != "free" {
		t.Fatalf("plan after reload and $set: %v", got)
	}
}

// cachedBytes is the heap a Folder holding n fill persons (each with one
// distinct id) takes, per person: with the properties as the cache keeps
// them, and with every map decoded instead (as the cache once kept them).
func cachedBytes(t testing.TB, n int) (stored, decoded float64) {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	inputs := make([]Input, n)
	for i := range inputs {
		inputs[i] = Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, fillEvent(i))}
	}
	ctx := context.Background()
	before := heap()
	f := New(newMemStore())
	if err := f.Prepare(ctx, inputs); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	f.Flush()
	after := heap()
	for _, p := range f.persons {
		f.props(p)
		p.row.PropertiesJSON = ""
	}
	all := heap()
	runtime.KeepAlive(f)
	runtime.KeepAlive(inputs) // measured in before: not the cache's
	return float64(after-before) / float64(n), float64(all-before) / float64(n)
}

// TestCachedPersonBytes bounds the memory of a cached person (its state,
// its distinct id's, the maps' share) with the bench's properties:
// docs/performance.md gives the figure (BenchmarkCachedPerson).
func TestCachedPersonBytes(t *testing.T) {
	stored, decoded := cachedBytes(t, 20000)
	t.Logf("%.0f B per cached person, %.0f B with decoded maps", stored, decoded)
	if stored > 700 || stored > 0.75*decoded {
		t.Fatalf("%.0f B per cached person (decoded %.0f B): above the bound", stored, decoded)
	}
}

// BenchmarkCachedPerson reports the bytes a cached person takes.
func BenchmarkCachedPerson(b *testing.B) {
	var stored, decoded float64
	for b.Loop() {
		stored, decoded = cachedBytes(b, 50000)
	}
	b.ReportMetric(stored, "B/person")
	b.ReportMetric(decoded, "B/person-decoded")
}

// TestEvictedPersonsLeaveNoPointer: a distinct id kept after its person
// was evicted must not hold the evicted state (it would keep it in memory,
// and a reload would make a second state of the same person).
func TestEvictedPersonsLeaveNoPointer(t *testing.T) {
	events := randomEvents(5, 600, 200)
	store := newMemStore()
	f := New(store)
	f.MaxCached = 30
	runInto(t, f, store, events, 1, 40, false)
	for k, d := range f.dids {
		if d.owner == nil {
			continue
		}
		if d.owner.gone || f.persons[personKey{k.project, d.owner.row.ID}] != d.owner {
			t.Fatalf("distinct id %q points at a person state that is not cached", k.id)
		}
	}
}

// TestApplyAfterReset: states Prepare found for the inputs are not used
// once the cache was dropped; Apply reads the store again, and the result
// is the same as without the Reset.
func TestApplyAfterReset(t *testing.T) {
	ctx := context.Background()
	events := randomEvents(9, 300, 30)
	ref := run(t, events, 300)
	store := newMemStore()
	f := New(store)
	var inputs []Input
	for i, js := range events {
		inputs = append(inputs, Input{ProjectID: 1, Seq: uint64(i + 1), Event: ev(t, i+1, js)})
	}
	if err := f.Prepare(ctx, inputs); err != nil {
		t.Fatal(err)
	}
	f.Reset()
	for _, in := range inputs {
		if _, err := f.Apply(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	store.write(f.Flush())
	if got, want := joinLines(store.snapshot(1)), joinLines(ref.snapshot(1)); got != want {
		t.Fatalf("after Reset:\n%s\nwant\n%s", got, want)
	}
}

// TestEmailIndexedOnlyWhenTheStoredRowHasTheEmail: Flush says a row's
// email is already indexed (EmailIndexed) exactly when the store holds a
// row of the person with the same email property: not for a new person,
// nor for a changed, added or removed email; yes for other changes, for a
// change of distinct ids alone, and after a reload from the store.
func TestEmailIndexedOnlyWhenTheStoredRowHasTheEmail(t *testing.T) {
	store := newMemStore()
	f := New(store)
	ctx := context.Background()
	seq := 0
	batch := func(events ...string) map[string]bool {
		t.Helper()
		var in []Input
		for _, js := range events {
			seq++
			in = append(in, Input{ProjectID: 1, Seq: uint64(seq), Event: ev(t, seq, js)})
		}
		if err := f.Prepare(ctx, in); err != nil {
			t.Fatal(err)
		}
		for _, x := range in {
			if _, err := f.Apply(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		b := f.Flush()
		store.write(b)
		f.Committed = uint64(seq)
		out := map[string]bool{}
		for _, p := range b.Persons {
			out[p.DistinctIDs[0]] = p.EmailIndexed
		}
		return out
	}
	want := func(got map[string]bool, w map[string]bool) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("EmailIndexed by person: %v, want %v", got, w)
		}
	}
	want(batch(`{"distinct_id":"a","$set":{"email":"a@x.io"}}`, `{"distinct_id":"b","$set":{"email":"b@x.io"}}`,
		`{"distinct_id":"c","$set":{"n":1}}`, `{"distinct_id":"d","$set":{"email":"d@x.io"}}`),
		map[string]bool{"a": false, "b": false, "c": false, "d": false})
	want(batch(`{"distinct_id":"a","$set":{"n":2}}`, `{"distinct_id":"b","$set":{"email":"B@x.io"}}`,
		`{"distinct_id":"c","$set":{"email":"c@x.io"}}`, `{"distinct_id":"d","$unset":["email"]}`),
		map[string]bool{"a": true, "b": false, "c": false, "d": false})
	// A change of ids alone (an alias), and the same email set again.
	want(batch(`{"distinct_id":"a","event":"$create_alias","properties":{"alias":"a2"}}`, `{"distinct_id":"b","$set":{"email":"B@x.io","m":1}}`),
		map[string]bool{"a": true, "b": true})
	// From the store: a new Folder decodes the stored rows.
	f = New(store)
	f.Committed = uint64(seq)
	want(batch(`{"distinct_id":"b","$set":{"k":1}}`, `{"distinct_id":"c","$set":{"email":"c2@x.io"}}`),
		map[string]bool{"b": true, "c": false})
}
