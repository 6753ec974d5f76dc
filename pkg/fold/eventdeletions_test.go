package fold

import (
	"fmt"
	"testing"
)

// TestDeleteFilteredEvents: $delete_filtered_events queues a request
// carrying its filter, keyed by the command's uuid at its sequence: of a
// live person (with an activity entry naming the filter), of the project
// without $person_id, and nothing for a person unknown or deleted at its
// sequence. No person row changes, and a redelivery over the stored rows
// asks the same.
func TestDeleteFilteredEvents(t *testing.T) {
	const actor = `"$actor":{"key_id":"k","organization_id":"o"}`
	const filter = `"$deletion_filter":{"events":["view"],"after":"2026-03-02T00:00:00Z"}`
	events := []string{
		`{"distinct_id":"a","$set":{"x":1}}`,
		`{"event":"$delete_filtered_events","distinct_id":"a","properties":{"$person_id":1,` + filter + `,` + actor + `}}`,
		`{"event":"$delete_filtered_events","distinct_id":"a","properties":{"$person_id":9,` + filter + `,` + actor + `}}`,
		`{"event":"$delete_filtered_events","distinct_id":"$event_deletion","properties":{"$deletion_filter":{"properties":[{"key":"plan","value":"pro"}]},` + actor + `}}`,
		`{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":false,` + actor + `}}`,
		`{"event":"$delete_filtered_events","distinct_id":"a","properties":{"$person_id":1,` + filter + `,` + actor + `}}`,
		`{"event":"$delete_filtered_events","distinct_id":"a","properties":{` + actor + `}}`,
	}
	store := newMemStore()
	first := foldFrom(t, New(store), events, 0, false)
	type req struct {
		person, seq uint64
		filter      string
	}
	var got []req
	for _, r := range first.EventDeletions {
		if r.RequestID != ev(t, int(r.RequestSeq), events[r.RequestSeq-1]).UUID || r.Version != r.RequestSeq {
			t.Errorf("request %+v: not keyed by its command", r)
		}
		got = append(got, req{r.PersonID, r.RequestSeq, r.Filter})
	}
	want := []req{
		{1, 2, `{"after":"2026-03-02T00:00:00Z","events":["view"]}`},
		{0, 4, `{"properties":[{"key":"plan","value":"pro"}]}`},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("requests:\n got %v\nwant %v", got, want)
	}
	var kinds []string
	for _, a := range first.Activity {
		kinds = append(kinds, a.Activity)
		if a.Activity == "delete_events" && fmt.Sprint(a.Detail.Changes[0].After) != "map[filter:map[after:2026-03-02T00:00:00Z events:[view]]]" {
			t.Errorf("activity change: %+v", a.Detail.Changes)
		}
	}
	if fmt.Sprint(kinds) != "[delete_events deleted]" {
		t.Fatalf("activity: %v", kinds)
	}
	for _, p := range first.Persons {
		if p.ID == 1 && p.Version != 5 {
			t.Fatalf("person 1 changed by a filtered deletion: version %d", p.Version)
		}
	}
	store.write(first)
	again := foldFrom(t, New(store), events, 0, true)
	if fmt.Sprint(again.EventDeletions) != fmt.Sprint(first.EventDeletions) {
		t.Fatalf("redelivery asked %+v, first run %+v", again.EventDeletions, first.EventDeletions)
	}
}
