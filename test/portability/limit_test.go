//go:build chdb

package portability

import "testing"

func TestUnorderedLimit(t *testing.T) {
	cases := []struct {
		q  string
		n  int
		ok bool
	}{
		{"SELECT id FROM persons FINAL PREWHERE project_id = 2 WHERE is_deleted = 0 LIMIT 101", 101, true},
		{"SELECT id FROM t WHERE x = 'ORDER BY' LIMIT 5", 5, true},
		{"SELECT id FROM t WHERE x = 'it\\'s (' LIMIT 10, 5", 5, true},
		{"SELECT id FROM (SELECT id FROM t ORDER BY id) LIMIT 3", 3, true},
		{"SELECT id FROM t ORDER BY created_at DESC, id DESC LIMIT 100", 0, false},
		{"SELECT id FROM t ORDER BY rank, rid LIMIT 10, 20", 0, false},
		{"SELECT count() FROM (SELECT 1 FROM t LIMIT 8192)", 0, false},
		{"SELECT id FROM t", 0, false},
	}
	for _, c := range cases {
		n, ok := unorderedLimit(c.q)
		if ok != c.ok || (ok && n != c.n) {
			t.Errorf("unorderedLimit(%q) = %d, %v; want %d, %v", c.q, n, ok, c.n, c.ok)
		}
	}
}
