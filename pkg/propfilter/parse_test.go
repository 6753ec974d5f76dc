package propfilter

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func asError(t *testing.T, in string, err error) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("Parse(%s): expected an error", in)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse(%s): error %T is not *Error", in, err)
	}
	if e.Error() != e.Detail || e.Detail == "" {
		t.Fatalf("Parse(%s): bad error %#v", in, e)
	}
	return e
}

// checkShape asserts placeholder count and balanced parentheses.
func checkShape(t *testing.T, c Clause) {
	t.Helper()
	if n := strings.Count(c.SQL, "?"); n != len(c.Args) {
		t.Errorf("SQL has %d placeholders but %d args: %s", n, len(c.Args), c.SQL)
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
			t.Errorf("unbalanced parentheses: %s", c.SQL)
			return
		}
	}
	if depth != 0 {
		t.Errorf("unbalanced parentheses: %s", c.SQL)
	}
	for _, a := range c.Args {
		switch a.(type) {
		case string, float64:
		default:
			t.Errorf("arg %#v has type %T", a, a)
		}
	}
}

func TestForms(t *testing.T) {
	eq := "(" + tV + " = ?)"
	runSQLCases(t, []sqlCase{
		{"empty string", "", "", nil},
		{"blank", "  \n", "", nil},
		{"empty array", "[]", "", nil},
		{"empty object", "{}", "", nil},
		{"null", "null", "", nil},
		{"array is AND", `[{"key":"a","value":"1"},{"key":"b","value":"2"}]`,
			"(" + eq + " AND " + eq + ")", []any{"a", "1", "b", "2"}},
		{"group OR", `{"type":"OR","values":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}`,
			"(" + eq + " OR " + eq + ")", []any{"a", "1", "b", "2"}},
		{"group lower case", `{"type":"or","values":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}`,
			"(" + eq + " OR " + eq + ")", []any{"a", "1", "b", "2"}},
		{"group without type is AND", `{"values":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}`,
			"(" + eq + " AND " + eq + ")", []any{"a", "1", "b", "2"}},
		{"nested groups", `{"type":"AND","values":[{"type":"OR","values":[{"key":"a","value":"1"},{"key":"b","value":"2"}]},{"key":"c","value":"3"}]}`,
			"((" + eq + " OR " + eq + ") AND " + eq + ")", []any{"a", "1", "b", "2", "c", "3"}},
		{"group in array", `[{"type":"OR","values":[{"key":"a","value":"1"},{"key":"b","value":"2"}]},{"key":"c","value":"3"}]`,
			"((" + eq + " OR " + eq + ") AND " + eq + ")", []any{"a", "1", "b", "2", "c", "3"}},
		{"single child group", `{"type":"OR","values":[{"key":"a","value":"1"}]}`, eq, []any{"a", "1"}},
		{"empty group", `{"type":"OR","values":[]}`, "", nil},
		{"non-person ignored", `[{"key":"$browser","value":"x","type":"event"},{"key":"a","value":"1","type":"person"}]`,
			eq, []any{"a", "1"}},
		{"non-person dropped from OR", `{"type":"OR","values":[{"key":"id","value":3,"type":"cohort"},{"key":"a","value":"1"}]}`,
			eq, []any{"a", "1"}},
		{"OR of only non-person", `{"type":"OR","values":[{"key":"id","value":3,"type":"cohort"},{"key":"x","type":"element","operator":"whatever"}]}`,
			"", nil},
		{"empty nested group dropped", `{"type":"OR","values":[{"type":"AND","values":[{"type":"event","key":"e"}]},{"key":"a","value":"1"}]}`,
			eq, []any{"a", "1"}},
		{"non-person not validated", `[{"type":"cohort","key":5,"value":{"x":1},"operator":7}]`, "", nil},
		{"null type is person", `[{"key":"a","value":"1","type":null}]`, eq, []any{"a", "1"}},
		{"unknown fields ignored", `[{"key":"a","value":"1","label":"A","group_type_index":null}]`, eq, []any{"a", "1"}},
		{"legacy exact", `{"name":"bob"}`, eq, []any{"name", "bob"}},
		{"legacy sorted", `{"name":"bob","email__icontains":"x"}`,
			"((positionCaseInsensitiveUTF8(" + tV + ", ?) > 0) AND " + eq + ")", []any{"email", "x", "name", "bob"}},
		{"legacy last separator", `{"utm__source__exact":"google"}`, eq, []any{"utm__source", "google"}},
		{"legacy number", `{"age__gt":5}`, "ifNull(" + tN + " > ?, 0)", []any{"age", 5.0}},
		{"legacy is_set", `{"email__is_set":true}`, tH, []any{"email"}},
		{"legacy list", `{"plan":["a","b"]}`, "(" + tV + " IN (?, ?))", []any{"plan", "a", "b"}},
		{"legacy key named type", `{"type":"person"}`, eq, []any{"type", "person"}},
		{"whitespace around JSON", " [ ] ", "", nil},
	})
}

func TestFormErrors(t *testing.T) {
	deep := `{"key":"a","value":"1"}`
	for i := 0; i <= MaxDepth; i++ {
		deep = `{"type":"AND","values":[` + deep + `]}`
	}
	many := make([]string, MaxFilters+1)
	for i := range many {
		many[i] = `{"key":"a","value":"1","type":"event"}`
	}
	legacyMany := make([]string, MaxFilters+1)
	for i := range legacyMany {
		legacyMany[i] = `"k` + strings.Repeat("x", i) + `":1`
	}
	cases := []struct{ in, detail string }{
		{"not json", ""},
		{`[{"key":"a"}`, ""},
		{`[] []`, "properties are not valid JSON: unexpected data after the JSON value"},
		{`[] x`, ""},
		{`"email"`, "properties must be a JSON array or object, not a string"},
		{`42`, "properties must be a JSON array or object, not a number"},
		{`true`, "properties must be a JSON array or object, not a boolean"},
		{`[1]`, "each filter must be a JSON object, not a number"},
		{`[[]]`, "each filter must be a JSON object, not an array"},
		{`[{"value":"x"}]`, "filter without key"},
		{`[{"key":null,"value":"x"}]`, "filter without key"},
		{`[{"key":"","value":"x"}]`, "filter without key"},
		{`[{"key":5,"value":"x"}]`, "filter key must be a string, not a number"},
		{`[{"key":"a","type":5}]`, "filter type must be a string, not a number"},
		{`[{"key":"a","operator":1}]`, "filter operator must be a string, not a number"},
		{`{"type":"OR"}`, `group "OR" must have a JSON array of values`},
		{`{"type":"AND","values":{}}`, `group "AND" must have a JSON array of values`},
		{`[{"type":"OR","values":"x"}]`, `group "OR" must have a JSON array of values`},
		{`{"type":"OR","values":[5]}`, "each filter must be a JSON object, not a number"},
		{`{"name__foo":"x"}`, `unknown operator "foo"`},
		{`{"name__":"x"}`, `unknown operator ""`},
		{`{"__icontains":"x"}`, "filter without key"},
		{`{"":"x"}`, "filter without key"},
		{deep, "filter groups are nested deeper than 8 levels"},
		{"[" + strings.Join(many, ",") + "]", "too many filters (at most 100)"},
		{"{" + strings.Join(legacyMany, ",") + "}", "too many filters (at most 100)"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.in)
		e := asError(t, tc.in, err)
		if tc.detail != "" && e.Detail != tc.detail {
			t.Errorf("Parse(%.60s) detail\n got: %s\nwant: %s", tc.in, e.Detail, tc.detail)
		}
		if _, kerr := Keys(tc.in); kerr == nil {
			t.Errorf("Keys(%.60s): expected an error", tc.in)
		}
	}
}

func TestLimitsBoundary(t *testing.T) {
	deep := `{"key":"a","value":"1"}`
	for i := 0; i < MaxDepth; i++ {
		deep = `{"type":"AND","values":[` + deep + `]}`
	}
	if _, err := Parse(deep); err != nil {
		t.Errorf("depth %d: %v", MaxDepth, err)
	}
	many := make([]string, MaxFilters)
	for i := range many {
		many[i] = `{"key":"a","value":"1"}`
	}
	c, err := Parse("[" + strings.Join(many, ",") + "]")
	if err != nil {
		t.Fatalf("%d filters: %v", MaxFilters, err)
	}
	checkShape(t, c)
}

func TestKeys(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"[]", []string{}},
		{`[{"key":"b","value":1},{"key":"a","operator":"is_set"},{"key":"b","value":2}]`, []string{"a", "b"}},
		{`{"type":"OR","values":[{"key":"z","value":"1"},{"type":"AND","values":[{"key":"y","operator":"is_not_set"}]},{"key":"$browser","type":"event"}]}`,
			[]string{"y", "z"}},
		{`{"name":"bob","email__icontains":"x","utm__source__exact":"g"}`, []string{"email", "name", "utm__source"}},
	}
	for _, tc := range cases {
		got, err := Keys(tc.in)
		if err != nil {
			t.Fatalf("Keys(%s): %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Keys(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestUserTextNeverInSQL(t *testing.T) {
	in := `[{"key":"k' OR 1=1 --","value":"v'); DROP TABLE persons; --","operator":"icontains"},` +
		`{"key":"?","value":"\\?","operator":"regex"},{"key":"(","value":")"}]`
	c, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, c)
	for _, bad := range []string{"DROP", "1=1", "'"} {
		if strings.Contains(strings.ReplaceAll(c.SQL, "'UTC'", ""), bad) {
			t.Errorf("SQL contains user text %q: %s", bad, c.SQL)
		}
	}
}
