package httpapi

import (
	"context"
	"fmt"
	"testing"
)

// TestListKeptPagesShowWrites: the unfiltered list keeps its pages by the
// ingester's watermark (pkg/chstore/listmark.go), so a repeated page
// takes no statement; a PATCH, a property update and a DELETE this API
// answered are on the very next page, with the count.
func TestListKeptPagesShowWrites(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	list := func() map[string]any {
		t.Helper()
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?limit=3", e.projectA.ID))
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		return r.json(t)
	}
	queries := func() uint64 {
		var n uint64
		if err := e.store.Conn().QueryRow(context.Background(), "SELECT value FROM system.events WHERE event = 'Query'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := func(m map[string]any) map[string]any { return m["results"].([]any)[0].(map[string]any) }
	list()
	// The server counts the ingester's statements too (it may run one
	// meanwhile): the fewest of a few tries, which is 1 or more for
	// every try when each list reads.
	least := uint64(1 << 62)
	var m map[string]any
	for range 5 {
		before := queries()
		m = list()
		least = min(least, queries()-before-1)
	}
	if least != 0 {
		t.Errorf("a repeated page took at least %d statements, want 0 (kept by the watermark)", least)
	}
	count := m["count"].(float64)
	path := fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, int(first(m)["id"].(float64)))

	if r := e.send("PATCH", e.keyAll, path, `{"properties":{"plan":"kept-test"}}`); r.status != 200 {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	if got := first(list())["properties"].(map[string]any)["plan"]; got != "kept-test" {
		t.Fatalf("the list after a PATCH shows plan %v", got)
	}
	if r := e.send("POST", e.keyAll, path+"update_property/?key=plan&value=again", ""); r.status != 200 {
		t.Fatalf("update_property: %d %s", r.status, r.body)
	}
	if got := first(list())["properties"].(map[string]any)["plan"]; got != "again" {
		t.Fatalf("the list after update_property shows plan %v", got)
	}
	if r := e.send("DELETE", e.keyAll, path, ""); r.status != 204 && r.status != 202 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	m = list()
	if m["count"].(float64) != count-1 {
		t.Fatalf("after DELETE: count %v, want %v", m["count"], count-1)
	}
	for _, p := range m["results"].([]any) {
		if fmt.Sprintf("/api/projects/%d/persons/%d/", e.projectA.ID, int(p.(map[string]any)["id"].(float64))) == path {
			t.Fatalf("after DELETE the list still shows %s", path)
		}
	}
}
