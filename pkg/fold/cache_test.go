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
// them, and with every map decoded instead (as the cache kept them before G8).
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
