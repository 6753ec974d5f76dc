package propfilter_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRegexInClickHouse runs regex and not_regex filters in the real
// ClickHouse against one person holding the key and one lacking it, and
// compares with Go's regexp: a regex matches exactly the values Go matches
// and never a person lacking the key; not_regex is its negation. Patterns
// with a literal NUL are refused (ClickHouse 18.16 made "\x00" match every
// string, the empty one of absent keys included).
func TestRegexInClickHouse(t *testing.T) {
	st := testenv.ClickHouse(t)
	ctx := context.Background()
	patterns := []string{
		"^a", "b$", ".*", "", "^$", `[\x00-\x1f]`, `(?s)^x.y$`,
		`x\x00|x\x01`, `^[^a]*$`, `\p{Greek}`, `é+`,
	}
	refused := []string{
		"\x00", "a\x00", "\x00b", "x\x00y", "\x00|zz", `\x00`, `^x\x00y$`, `(?i)X\x00Y`, `\x00y$`,
		`x\x{0}`, `\000`, `^x[\x00]y$`, `\Q` + "\x00" + `\E`, `(x\x00)+`,
	}
	values := []string{"", "a", "alice", "ALICE", "bob", "x\x00y", "x\x01y", "\x00", "zzz", "αβ", "éé", "x\ny"}
	eval := func(filter, key, value string) bool {
		t.Helper()
		c, err := propfilter.Parse(filter)
		if err != nil {
			t.Fatalf("Parse(%q): %v", filter, err)
		}
		// Placeholders in text order: the clause's, then the person's.
		args := append(c.Args, key, value)
		var got uint8
		sql := "SELECT " + c.SQL + " FROM (SELECT [?] AS property_keys, [?] AS property_values)"
		if err := st.Conn().QueryRow(ctx, sql, args...).Scan(&got); err != nil {
			t.Fatalf("%s %q: %v", filter, value, err)
		}
		return got == 1
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for _, op := range []string{"regex", "not_regex"} {
			filter := regexFilter(t, op, p)
			for _, v := range values {
				want := re.MatchString(v) == (op == "regex")
				if got := eval(filter, "k", v); got != want {
					t.Errorf("%s %q on %q: got %v, want %v", op, p, v, got, want)
				}
				// A person lacking "k" (holding v under another key).
				if got := eval(filter, "other", v); got != (op == "not_regex") {
					t.Errorf("%s %q on a person lacking the key: got %v", op, p, got)
				}
			}
		}
	}
	for _, p := range refused {
		for _, op := range []string{"regex", "not_regex"} {
			_, err := propfilter.Parse(regexFilter(t, op, p))
			var e *propfilter.Error
			if !errors.As(err, &e) {
				t.Errorf("%s %q: got %v, want a *propfilter.Error", op, p, err)
			}
		}
	}
}

// TestDatesInClickHouse runs the date operators in the real ClickHouse
// against a person holding a date, one holding the empty string and one
// lacking the key: only the date matches is_date_before, is_date_after
// and is_date_exact, and the negated filters match exactly the others.
// ClickHouse 18.16 parses the empty string as 2000-01-01 00:00:00, so the
// filters' dates are on both sides of it: without the operators' test of
// an empty value, each would match the persons without a date there.
func TestDatesInClickHouse(t *testing.T) {
	st := testenv.ClickHouse(t)
	ctx := context.Background()
	type person struct{ name, key, value string }
	dated2020 := person{"2020-06-01", "signup", "2020-06-01 12:00:00"}
	dated2000 := person{"2000-01-01", "signup", "2000-01-01"}
	empty := person{"empty", "signup", ""}
	lacking := person{"lacking", "other", "2020-06-01"} // a date under another key
	persons := []person{dated2020, dated2000, empty, lacking}
	cases := []struct {
		op, value string
		match     []person
	}{
		{"is_date_before", "2024-01-01", []person{dated2020, dated2000}},
		{"is_date_before", "2000-01-02", []person{dated2000}},
		{"is_date_after", "1999-06-01", []person{dated2020, dated2000}},
		{"is_date_after", "2010-01-01", []person{dated2020}},
		{"is_date_exact", "2000-01-01", []person{dated2000}},
		{"is_date_exact", "2020-06-01", []person{dated2020}},
	}
	for _, c := range cases {
		for _, negated := range []bool{false, true} {
			b, err := json.Marshal([]map[string]any{{"key": "signup", "value": c.value, "operator": c.op, "negation": negated}})
			if err != nil {
				t.Fatal(err)
			}
			clause, err := propfilter.Parse(string(b))
			if err != nil {
				t.Fatalf("Parse(%s): %v", b, err)
			}
			for _, p := range persons {
				want := slices.Contains(c.match, p) != negated
				var got uint8
				// Placeholders in text order: the clause's, then the person's.
				sql := "SELECT " + clause.SQL + " FROM (SELECT [?] AS property_keys, [?] AS property_values)"
				if err := st.Conn().QueryRow(ctx, sql, append(clause.Args, p.key, p.value)...).Scan(&got); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				if (got == 1) != want {
					t.Errorf("%s on the person %s: got %v, want %v", b, p.name, got == 1, want)
				}
			}
		}
	}
}

func regexFilter(t *testing.T, op, pattern string) string {
	t.Helper()
	b, err := json.Marshal([]map[string]string{{"key": "k", "value": pattern, "operator": op}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
