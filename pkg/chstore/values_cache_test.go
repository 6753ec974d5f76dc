package chstore

import (
	"slices"
	"testing"
	"time"
)

// TestValuesCache: an answer is served while younger than ValuesMaxAge;
// once older it is still served and exactly one caller is told to count
// it again (until that succeeds or fails); an older answer never replaces
// a newer one; a full cache drops stale answers first.
func TestValuesCache(t *testing.T) {
	var c valuesCache
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := valuesKey{project: 1, key: "plan"}
	if _, found, _ := c.get(k, t0); found {
		t.Fatal("empty cache found an answer")
	}
	v1 := []PropertyValue{{"pro", 2}}
	c.put(k, v1, t0)
	if got, found, refresh := c.get(k, t0.Add(ValuesMaxAge)); !found || refresh || !slices.Equal(got, v1) {
		t.Fatalf("fresh: %v %v %v", got, found, refresh)
	}
	if _, found, _ := c.get(valuesKey{project: 2, key: "plan"}, t0); found {
		t.Fatal("another project's answer")
	}
	late := t0.Add(ValuesMaxAge + time.Second)
	if got, found, refresh := c.get(k, late); !found || !refresh || !slices.Equal(got, v1) {
		t.Fatalf("stale, first caller: %v %v %v", got, found, refresh)
	}
	if _, _, refresh := c.get(k, late); refresh {
		t.Fatal("two callers told to count again")
	}
	c.failed(k)
	if _, _, refresh := c.get(k, late); !refresh {
		t.Fatal("after a failure nobody counts again")
	}
	v2 := []PropertyValue{{"pro", 3}}
	c.put(k, v2, late)
	c.put(k, v1, t0) // a slower, older count finishing last
	if got, _, refresh := c.get(k, late); refresh || !slices.Equal(got, v2) {
		t.Fatalf("after the recount: %v %v", got, refresh)
	}
	// Full: the stale answers go, the fresh one stays.
	for i := range maxValuesEntries - 1 {
		c.put(valuesKey{project: 3, key: "k", contains: string(rune('a' + i%26)) + string(rune(i))}, nil, t0)
	}
	c.put(valuesKey{project: 4, key: "new"}, v1, late.Add(ValuesMaxAge))
	if len(c.m) != 2 {
		t.Fatalf("after filling up: %d entries", len(c.m))
	}
	if got, found, _ := c.get(k, late); !found || !slices.Equal(got, v2) {
		t.Fatalf("the fresh answer went: %v", got)
	}
}
