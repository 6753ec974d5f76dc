package activity

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDetailShapes: the deleted and split_person details in PostHog's
// shape, and stored details (old ones too) read back unchanged.
func TestDetailShapes(t *testing.T) {
	const id = "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	for _, tc := range []struct {
		d    Detail
		want string
	}{
		{Deleted(id), `{"changes":null,"name":"` + id + `","trigger":null,"type":null,"short_id":null}`},
		{Split(id, []string{"1", "2", "3"}), `{"changes":[{"type":"Person","action":"split","field":null,"before":null,` +
			`"after":{"distinct_ids":["1","2","3"]}}],"name":"` + id + `","trigger":null,"type":null,"short_id":null}`},
		{Detail{Changes: []Change{{Type: "Person", Action: "changed", Field: "properties", Before: map[string]any{"a": 1.0}}}},
			`{"changes":[{"type":"Person","action":"changed","field":"properties","before":{"a":1},"after":null}],"name":null,"trigger":null,"type":null,"short_id":null}`},
	} {
		raw, err := json.Marshal(tc.d)
		if err != nil || string(raw) != tc.want {
			t.Fatalf("got  %s (%v)\nwant %s", raw, err, tc.want)
		}
		var back Detail
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(back)
		if string(again) != tc.want {
			t.Fatalf("round trip: %s", again)
		}
	}
	// An entry stored before fields could be null (field omitted) reads.
	var old Detail
	if err := json.Unmarshal([]byte(`{"changes":[{"type":"Person","action":"split","after":{"distinct_ids":["b"]}}],"name":"x"}`), &old); err != nil {
		t.Fatal(err)
	}
	if want := []Change{{Type: "Person", Action: "split", After: map[string]any{"distinct_ids": []any{"b"}}}}; !reflect.DeepEqual(old.Changes, want) {
		t.Fatalf("old entry: %#v", old.Changes)
	}
}
