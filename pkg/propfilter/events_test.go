package propfilter

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestEventFilters: with Options.Events, filters of type event (or none)
// read an events row's properties, each placeholder keeping its argument;
// any other type is an error, never ignored (a dropped filter would widen
// a deletion).
func TestEventFilters(t *testing.T) {
	parse := func(raw string) (Clause, error) {
		return ParseWith(context.Background(), raw, Options{Events: true})
	}
	c, err := parse(`[{"key":"plan","value":"pro","type":"event"},{"type":"OR","values":[{"key":"n","operator":"gt","value":2},{"key":"ref","operator":"is_set"}]}]`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.SQL, "property_") || strings.Count(c.SQL, "?") != len(c.Args) {
		t.Fatalf("SQL %s args %v", c.SQL, c.Args)
	}
	if fmt.Sprint(c.Args) != "[plan plan plan plan pro n n n n 2 ref]" {
		t.Fatalf("args %v", c.Args)
	}
	// Legacy dicts are event filters too.
	if c, err := parse(`{"plan__icontains":"PR"}`); err != nil || !strings.Contains(c.SQL, "visitParamExtractString(properties, ?)") {
		t.Fatalf("legacy: %v %v", c, err)
	}
	for _, raw := range []string{
		`[{"key":"plan","value":"pro","type":"person"}]`,
		`[{"key":"id","value":1,"type":"cohort"}]`,
		`[{"key":"x","value":1,"type":"element"}]`,
		`[{"key":"x","value":1,"type":7}]`,
	} {
		if _, err := parse(raw); err == nil {
			t.Errorf("%s: accepted", raw)
		}
	}
	// Without the option, event filters are ignored as before.
	if c, err := Parse(`[{"key":"plan","value":"pro","type":"event"}]`); err != nil || c.SQL != "" {
		t.Fatalf("person filters: %v %v", c, err)
	}
}
