package main

import "testing"

// The calls of one statement with other values group as one shape; the
// digits of names stay.
func TestStatementShape(t *testing.T) {
	cases := []struct{ a, b string }{
		{"SELECT id, toUInt32(created_at) FROM persons FINAL PREWHERE project_id = 7 AND id IN (SELECT id FROM person_emails WHERE project_id = 7 AND email = 'a@b.c')\n  WHERE is_deleted = 0 LIMIT 101",
			"SELECT id, toUInt32(created_at) FROM persons FINAL PREWHERE project_id = 12 AND id IN (SELECT id FROM person_emails WHERE project_id = 12 AND email = 'it''s \\' x') WHERE is_deleted = 0 LIMIT 3"},
		{"SELECT distinct_id FROM person_last_seen WHERE distinct_id IN ('a', 'b', 'c')",
			"SELECT distinct_id FROM person_last_seen WHERE distinct_id IN ('d')"},
	}
	for _, c := range cases {
		if a, b := statementShape(c.a), statementShape(c.b); a != b {
			t.Errorf("shapes differ:\n%s\n%s", a, b)
		}
	}
	want := "SELECT id, toUInt32(created_at) FROM persons FINAL PREWHERE project_id = ? AND id IN (SELECT id FROM person_emails WHERE project_id = ? AND email = ?) WHERE is_deleted = ? LIMIT ?"
	if got := statementShape(cases[0].a); got != want {
		t.Errorf("shape:\n got %s\nwant %s", got, want)
	}
	if got, want := statementShape(cases[1].a), "SELECT distinct_id FROM person_last_seen WHERE distinct_id IN (…)"; got != want {
		t.Errorf("shape:\n got %s\nwant %s", got, want)
	}
}
