package fold

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// foldLimited folds events (sequence = position + 1) in batches with a
// person size limit and returns the store and every warning raised.
func foldLimited(t *testing.T, limit, batchSize int, events []string) (*memStore, []Warning) {
	t.Helper()
	store := newMemStore()
	f := New(store)
	f.MaxPersonBytes = limit
	runInto(t, f, store, events, 1, batchSize, false)
	return store, store.warnings
}

// TestPersonSizeLimit: the 36 MB person of the report, scaled down. Many
// $set events of large values stop growing the person at the limit; each
// refused event raises a warning naming its keys; smaller changes and
// $unset still apply; a replay with the same limit gives the same persons.
func TestPersonSizeLimit(t *testing.T) {
	const limit = 4096
	big := strings.Repeat("v", 900)
	var events []string
	for i := range 12 {
		events = append(events, fmt.Sprintf(`{"distinct_id":"a","$set":{"k%02d":%q},"$set_once":{"once%02d":1}}`, i, big, i))
	}
	events = append(events,
		`{"distinct_id":"a","$set":{"small":1}}`,                  // fits
		`{"distinct_id":"a","$unset":["k00","k01"]}`,              // shrinks
		fmt.Sprintf(`{"distinct_id":"a","$set":{"k20":%q}}`, big), // fits again
		`{"distinct_id":"b","$set":{"other":1}}`)                  // another person is untouched
	store, warnings := foldLimited(t, limit, 5, events)

	a := store.persons[personKey{1, 1}]
	raw, _ := json.Marshal(a.Properties)
	if len(raw) > limit {
		t.Fatalf("person is %d bytes, limit %d", len(raw), limit)
	}
	for _, k := range []string{"k02", "k03", "small", "k20"} {
		if _, ok := a.Properties[k]; !ok {
			t.Errorf("key %s missing: %s", k, raw)
		}
	}
	for _, k := range []string{"k00", "k01", "k11", "once11"} {
		if _, ok := a.Properties[k]; ok {
			t.Errorf("key %s present: %s", k, raw)
		}
	}
	if len(warnings) == 0 {
		t.Fatal("no warning")
	}
	var refused []uint64
	for _, w := range warnings {
		if w.Type != WarningPersonPropertiesTooLarge {
			t.Fatalf("warning %+v", w)
		}
		keys := w.Details["keys"].([]string)
		i := int(w.Seq) - 1
		if want := []string{fmt.Sprintf("k%02d", i), fmt.Sprintf("once%02d", i)}; !slices.Equal(keys, want) {
			t.Errorf("warning of event %d names %v, want %v", w.Seq, keys, want)
		}
		refused = append(refused, w.Seq)
	}
	if refused[0] > 5 || refused[len(refused)-1] != 12 {
		t.Errorf("refused events %v", refused)
	}
	if b := store.persons[personKey{1, 16}]; b.Properties["other"] == nil {
		t.Errorf("person b: %+v", b)
	}

	// Deterministic: another batching gives the same persons and warnings.
	again, warnings2 := foldLimited(t, limit, 1, events)
	if joinLines(again.snapshot(1)) != joinLines(store.snapshot(1)) || len(warnings2) != len(warnings) {
		t.Fatalf("replay differs:\n%s\n%s", joinLines(again.snapshot(1)), joinLines(store.snapshot(1)))
	}
	// Without a limit, everything applies.
	unlimited, none := foldLimited(t, 0, 5, events)
	if len(none) != 0 || unlimited.persons[personKey{1, 1}].Properties["k11"] == nil {
		t.Fatalf("no limit: %d warnings", len(none))
	}
}

// TestPersonOverLimitMayShrink: a person stored over the limit (before it
// existed, or under a larger one) still takes changes that do not grow it.
func TestPersonOverLimitMayShrink(t *testing.T) {
	big := strings.Repeat("v", 3000)
	events := []string{
		fmt.Sprintf(`{"distinct_id":"a","$set":{"x":%q}}`, big),
		fmt.Sprintf(`{"distinct_id":"a","$set":{"x":%q,"y":1}}`, big[:100]),
	}
	store, warnings := foldLimited(t, 0, 1, events[:1])
	f := New(store)
	f.MaxPersonBytes = 1000
	f.Committed = 1
	ctx := context.Background()
	if _, err := f.Apply(ctx, Input{ProjectID: 1, Seq: 2, Event: ev(t, 2, events[1])}); err != nil {
		t.Fatal(err)
	}
	b := f.Flush()
	warnings = append(warnings, b.Warnings...)
	if len(warnings) != 0 || len(b.Persons) != 1 || b.Persons[0].Properties["y"] == nil {
		t.Fatalf("persons %+v, warnings %+v", b.Persons, warnings)
	}
}

// TestMaxJSONSize: the bound that spares allowedChanges the encoding is
// never below the encoded length, whatever escaping the values need, and
// defers (no limit passes it) where encoding/json would refuse the value.
func TestMaxJSONSize(t *testing.T) {
	for _, v := range []any{
		nil, true, false, "", "plain", "<>&", "\u2028\u2029", "\xff\xfe", "\x00\x1f\n\t\"\\", json.Number("-1.5e10"),
		map[string]any{}, []any{}, map[string]any{"<k>": []any{"\x01", nil, map[string]any{"\xff": json.Number("0")}}, "": ""},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := maxJSONSize(v); got < len(raw) {
			t.Errorf("maxJSONSize(%#v) = %d, encoded %d bytes", v, got, len(raw))
		}
	}
	for _, v := range []any{json.Number(""), json.Number("1x"), map[string]any{"a": 1.5}, []any{int64(1)}} {
		if got := maxJSONSize(v); got < 1<<30 {
			t.Errorf("maxJSONSize(%#v) = %d, want no bound", v, got)
		}
	}
}
