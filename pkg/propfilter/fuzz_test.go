package propfilter

import (
	"errors"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	seeds := []string{
		"", "[]", "{}", "null", "not json", `"x"`,
		`[{"key":"email","value":"x@y.z","operator":"exact","type":"person"}]`,
		`[{"key":"c","value":["a",1,true,null,"",[1]],"operator":"is_not"}]`,
		`{"type":"OR","values":[{"key":"a","value":"1"},{"type":"AND","values":[{"key":"b","operator":"is_set"}]}]}`,
		`{"values":[{"key":"a","value":1.5,"operator":"gte"}]}`,
		`{"email__icontains":"x","name":"bob","age__lt":"10","d__is_date_after":"2024-01-02"}`,
		`[{"key":"r","value":"^a.*$","operator":"not_regex"},{"key":"s","value":"","operator":"lte"}]`,
		`[{"key":"d","value":"2024-01-02T03:04:05.5+01:00","operator":"is_date_before"}]`,
		`[{"key":"d","value":"2024-01-02 03:04:05","operator":"is_date_exact"}]`,
		`[{"key":"x","type":"cohort","value":3},{"key":"o","value":{"a":[1,{}]}}]`,
		`[{"key":"r","value":"\u0000","operator":"regex"},{"key":"r","value":"a\\x00","operator":"not_regex"}]`,
		`{"r__regex":"[\\x00-\\x1f]","s__not_regex":""}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := Parse(raw)
		keys, kerr := Keys(raw)
		if (err == nil) != (kerr == nil) {
			t.Fatalf("Parse err %v but Keys err %v", err, kerr)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Detail == "" {
				t.Fatalf("error %#v is not a non-empty *Error", err)
			}
			return
		}
		if n := strings.Count(c.SQL, "?"); n != len(c.Args) {
			t.Fatalf("%d placeholders, %d args: %s", n, len(c.Args), c.SQL)
		}
		depth := 0
		for _, r := range c.SQL {
			switch r {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth < 0 {
				t.Fatalf("unbalanced parentheses: %s", c.SQL)
			}
		}
		if depth != 0 {
			t.Fatalf("unbalanced parentheses: %s", c.SQL)
		}
		for _, a := range c.Args {
			switch a.(type) {
			case string, float64:
			default:
				t.Fatalf("arg %#v has type %T", a, a)
			}
		}
		if c.SQL == "" && len(c.Args) != 0 {
			t.Fatalf("empty SQL with args %#v", c.Args)
		}
		// A regex never selects a person lacking the key: every match() is
		// guarded by the presence test.
		if n := strings.Count(c.SQL, "match("); n != strings.Count(c.SQL, "has(property_keys, ?) AND match(") {
			t.Fatalf("unguarded match(): %s", c.SQL)
		}
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Fatalf("keys not sorted/distinct: %q", keys)
			}
		}
	})
}
