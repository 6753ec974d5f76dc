package search

import (
	"fmt"
	"testing"
	"time"
)

// TestGramSizesKeptUnderCaps: a kept size serves a later probe only where
// it says the same as a count under that probe's cap would, and only for
// gramSizeLife.
func TestGramSizesKeptUnderCaps(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	g := newGramSizes(nil)
	g.now = func() time.Time { return now }
	g.put(1, "abc", 10, 1024)   // exact
	g.put(1, "use", 1024, 1024) // at its cap: 1024 or more
	g.put(2, "abc", 5000, 8192) // another project, exact
	for _, c := range []struct {
		project uint64
		limit   uint64
		want    string
	}{
		{1, 1024, "map[abc:10 use:1024] []"},
		{1, 4096, "map[abc:10] [use]"}, // 1024 or more: under 4096 unknown
		{1, 8, "map[abc:8 use:8] []"},  // both at the lower cap
		{2, 8192, "map[abc:5000] [use]"},
		{2, 4096, "map[abc:4096] [use]"},
	} {
		sizes, missing := g.get(c.project, []string{"abc", "use"}, c.limit)
		if got := fmt.Sprint(sizes, " ", missing); got != c.want {
			t.Errorf("project %d, cap %d: %s, want %s", c.project, c.limit, got, c.want)
		}
	}
	now = now.Add(gramSizeLife)
	if _, missing := g.get(1, []string{"abc"}, 1024); len(missing) != 1 {
		t.Errorf("a size older than gramSizeLife was used")
	}
}
