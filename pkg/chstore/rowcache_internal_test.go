package chstore

import "testing"

// TestRowCacheBounds: the cache holds at most two generations of its
// budget, keeps a row in use across a swap, never trades a newer version
// for an older one, and leaves out a row too large for it.
func TestRowCacheBounds(t *testing.T) {
	c := newRowCache(64 << 10) // generations of 32 KiB
	c.put(1, 5, PersonRecord{ID: 1}, 100)
	c.put(1, 4, PersonRecord{ID: 1}, 100) // a slower reader's older version
	if _, ok := c.get(1, 1, 5); !ok {
		t.Fatal("version 5 replaced by 4")
	}
	if _, ok := c.get(1, 1, 4); ok {
		t.Fatal("version 4 served")
	}
	for id := uint64(2); id < 2000; id++ {
		c.put(1, 1, PersonRecord{ID: id}, 100)
		if id%50 == 0 { // person 1 stays in use
			if _, ok := c.get(1, 1, 5); !ok {
				t.Fatalf("person 1 dropped while in use (after %d)", id)
			}
		}
	}
	if c.curBytes > c.budget || len(c.cur)+len(c.old) > 2*c.budget/228+2 {
		t.Fatalf("%d bytes, %d+%d rows over a generation of %d bytes", c.curBytes, len(c.cur), len(c.old), c.budget)
	}
	if _, ok := c.get(1, 2, 1); ok {
		t.Fatal("person 2 kept past two generations")
	}
	c.put(1, 1, PersonRecord{ID: 9999}, 1<<20)
	if _, ok := c.get(1, 9999, 1); ok {
		t.Fatal("a row larger than a 64th of the budget kept")
	}
	if _, ok := newRowCache(-1).get(1, 1, 5); ok {
		t.Fatal("a disabled cache served")
	}
}
