package chstore

import (
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/fold"
)

// TestSplitLead: a batch's lead holds the chosen persons and the small
// first-stage tables, the rest everything else; there is none when a
// chosen person is deleted, rekeyed, or gained or lost a distinct id.
func TestSplitLead(t *testing.T) {
	pick := func(project, id uint64) bool { return project == 1 && id == 7 }
	batch := func() fold.Batch {
		return fold.Batch{
			Persons:     []fold.PersonRow{{ProjectID: 1, ID: 5}, {ProjectID: 1, ID: 7}, {ProjectID: 2, ID: 7}},
			DistinctIDs: []fold.DistinctIDRow{{ProjectID: 1, DistinctID: "d5", PersonID: 5}},
			Activity:    []activity.Entry{{ItemID: "7"}},
		}
	}
	lead, rest, ok := splitLead(batch(), pick)
	if !ok || len(lead.Persons) != 1 || lead.Persons[0].ID != 7 || len(lead.Activity) != 1 || len(lead.DistinctIDs) != 0 {
		t.Fatalf("lead %+v, %v", lead, ok)
	}
	if len(rest.Persons) != 2 || len(rest.Activity) != 0 || len(rest.DistinctIDs) != 1 {
		t.Fatalf("rest %+v", rest)
	}
	if _, _, ok := splitLead(batch(), nil); ok {
		t.Fatal("a lead without a pick")
	}
	if _, _, ok := splitLead(batch(), func(uint64, uint64) bool { return false }); ok {
		t.Fatal("a lead of no person")
	}
	for name, change := range map[string]func(b *fold.Batch){
		"deleted": func(b *fold.Batch) { b.Persons[1].IsDeleted = true },
		"rekeyed": func(b *fold.Batch) { b.Rekeyed = []fold.Rekey{{ProjectID: 1, ID: 7, CreatedAt: time.Unix(1, 0)}} },
		"gained an id": func(b *fold.Batch) {
			b.DistinctIDs = append(b.DistinctIDs, fold.DistinctIDRow{ProjectID: 1, DistinctID: "x", PersonID: 7})
		},
		"lost an id": func(b *fold.Batch) { b.DistinctIDs[0].Prev = fold.Owner{PersonID: 7} },
	} {
		b := batch()
		change(&b)
		if _, _, ok := splitLead(b, pick); ok {
			t.Errorf("%s: a lead", name)
		}
	}
}
