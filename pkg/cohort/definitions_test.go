package cohort

import (
	"context"
	"slices"
	"testing"

	"github.com/personhub/personhub/pkg/kvjson"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestDefinitionsFollowTheBucket: definitions are listed once and then
// served while the bucket's version stays, and a write to any record (of
// this project or another, through another Records: another API
// instance) is seen by the next read.
func TestDefinitionsFollowTheBucket(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATS(t, "")
	open := func() *kvjson.Records[Cohort] {
		r, err := kvjson.OpenRecords[Cohort](ctx, n.JS, Bucket, "test")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mine, other := open(), open()
	var d definitions
	ids := func(project uint64) []uint64 {
		t.Helper()
		all, err := d.list(ctx, mine, project)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, c := range all {
			if !c.Deleted {
				out = append(out, c.ID)
			}
		}
		slices.Sort(out)
		all[0] = Cohort{} // callers filter in place: the cache must not see it
		return out
	}
	for id := uint64(1); id <= 2; id++ {
		if err := other.Create(ctx, 7, id, Cohort{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if got := ids(7); !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("cohorts %v, want [1 2]", got)
		}
	}
	if d.lists != 1 {
		t.Fatalf("%d listings for three reads of an unchanged bucket, want 1", d.lists)
	}
	if _, err := other.Modify(ctx, 7, 1, func(c *Cohort) error { c.Deleted = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := ids(7); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("after another instance deleted 1: %v, want [2]", got)
	}
	if err := other.Create(ctx, 8, 3, Cohort{ID: 3}); err != nil {
		t.Fatal(err)
	}
	if got := ids(7); !slices.Equal(got, []uint64{2}) || d.lists != 3 {
		t.Fatalf("after a write to another project: %v (%d listings), want [2] listed again", got, d.lists)
	}
}
