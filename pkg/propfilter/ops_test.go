package propfilter

import (
	"reflect"
	"testing"
)

// Shorthands for expected SQL.
const (
	tV = "property_values[indexOf(property_keys, ?)]"
	tH = "has(property_keys, ?)"
	tN = "toFloat64OrNull(" + tV + ")"
	tD = "parseDateTimeBestEffortOrNull(" + tV + ", 'UTC')"
	tE = "(" + tV + " != '')"
)

type sqlCase struct {
	name string
	in   string
	sql  string
	args []any
}

func runSQLCases(t *testing.T, cases []sqlCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%s): unexpected error %v", tc.in, err)
			}
			if got.SQL != tc.sql {
				t.Errorf("Parse(%s) SQL\n got: %s\nwant: %s", tc.in, got.SQL, tc.sql)
			}
			if !reflect.DeepEqual(got.Args, tc.args) {
				t.Errorf("Parse(%s) Args\n got: %#v\nwant: %#v", tc.in, got.Args, tc.args)
			}
			checkShape(t, got)
		})
	}
}

// one wraps a single filter object in an array.
func one(filter string) string { return "[" + filter + "]" }

func TestOperators(t *testing.T) {
	runSQLCases(t, []sqlCase{
		// exact
		{"exact string", one(`{"key":"email","value":"x@y.z","operator":"exact","type":"person"}`),
			"(" + tV + " = ?)", []any{"email", "x@y.z"}},
		{"default operator", one(`{"key":"email","value":"x@y.z"}`),
			"(" + tV + " = ?)", []any{"email", "x@y.z"}},
		{"null operator", one(`{"key":"email","value":"a","operator":null}`),
			"(" + tV + " = ?)", []any{"email", "a"}},
		{"empty operator", one(`{"key":"email","value":"a","operator":""}`),
			"(" + tV + " = ?)", []any{"email", "a"}},
		{"exact empty string needs presence", one(`{"key":"k","value":""}`),
			"(" + tH + " AND (" + tV + " = ?))", []any{"k", "k", ""}},
		{"exact number", one(`{"key":"age","value":42}`),
			"ifNull(" + tN + " = ?, 0)", []any{"age", 42.0}},
		{"exact float", one(`{"key":"age","value":-1.5e2}`),
			"ifNull(" + tN + " = ?, 0)", []any{"age", -150.0}},
		{"exact numeric string stays text", one(`{"key":"age","value":"42"}`),
			"(" + tV + " = ?)", []any{"age", "42"}},
		{"exact true", one(`{"key":"b","value":true}`),
			"(" + tV + " = ?)", []any{"b", "true"}},
		{"exact false", one(`{"key":"b","value":false}`),
			"(" + tV + " = ?)", []any{"b", "false"}},
		{"exact null", one(`{"key":"n","value":null}`),
			"((NOT " + tH + ") OR (" + tV + " = ?))", []any{"n", "n", "null"}},
		{"exact missing value is null", one(`{"key":"n"}`),
			"((NOT " + tH + ") OR (" + tV + " = ?))", []any{"n", "n", "null"}},
		{"exact object", one(`{"key":"o","value":{"b":1,"a":"<x>"}}`),
			"(" + tV + " = ?)", []any{"o", `{"a":"<x>","b":1}`}},
		{"exact list of strings", one(`{"key":"c","value":["a","b","c"]}`),
			"(" + tV + " IN (?, ?, ?))", []any{"c", "a", "b", "c"}},
		{"exact list of one", one(`{"key":"c","value":[7]}`),
			"ifNull(" + tN + " = ?, 0)", []any{"c", 7.0}},
		{"exact empty list", one(`{"key":"c","value":[]}`), "(1 = 0)", nil},
		{"exact mixed list", one(`{"key":"c","value":["a",1,true,null,""]}`),
			"((" + tV + " = ?) OR ifNull(" + tN + " = ?, 0) OR (" + tV + " = ?) OR ((NOT " + tH + ") OR (" + tV + " = ?)) OR (" + tH + " AND (" + tV + " = ?)))",
			[]any{"c", "a", "c", 1.0, "c", "true", "c", "c", "null", "c", "c", ""}},
		{"exact nested list element", one(`{"key":"c","value":[[1,2],"x"]}`),
			"((" + tV + " = ?) OR (" + tV + " = ?))", []any{"c", "[1,2]", "c", "x"}},

		// is_not
		{"is_not string", one(`{"key":"email","value":"a","operator":"is_not"}`),
			"(NOT (" + tV + " = ?))", []any{"email", "a"}},
		{"is_not number", one(`{"key":"age","value":3,"operator":"is_not"}`),
			"(NOT ifNull(" + tN + " = ?, 0))", []any{"age", 3.0}},
		{"is_not list", one(`{"key":"c","value":["a","b"],"operator":"is_not"}`),
			"(NOT (" + tV + " IN (?, ?)))", []any{"c", "a", "b"}},
		{"is_not empty list", one(`{"key":"c","value":[],"operator":"is_not"}`), "(NOT (1 = 0))", nil},
		{"is_not null", one(`{"key":"n","value":null,"operator":"is_not"}`),
			"(NOT ((NOT " + tH + ") OR (" + tV + " = ?)))", []any{"n", "n", "null"}},

		// icontains
		{"icontains", one(`{"key":"name","value":"Bob","operator":"icontains"}`),
			"(positionCaseInsensitiveUTF8(" + tV + ", ?) > 0)", []any{"name", "Bob"}},
		{"icontains number", one(`{"key":"name","value":12,"operator":"icontains"}`),
			"(positionCaseInsensitiveUTF8(" + tV + ", ?) > 0)", []any{"name", "12"}},
		{"icontains empty", one(`{"key":"name","value":"","operator":"icontains"}`),
			"(" + tH + " AND (positionCaseInsensitiveUTF8(" + tV + ", ?) > 0))", []any{"name", "name", ""}},
		{"not_icontains", one(`{"key":"name","value":"bob","operator":"not_icontains"}`),
			"(NOT (positionCaseInsensitiveUTF8(" + tV + ", ?) > 0))", []any{"name", "bob"}},

		// regex
		{"regex", one(`{"key":"email","value":"@example\\.com$","operator":"regex"}`),
			"(" + tH + " AND match(" + tV + ", ?))", []any{"email", "email", `@example\.com$`}},
		{"regex matching empty", one(`{"key":"email","value":".*","operator":"regex"}`),
			"(" + tH + " AND match(" + tV + ", ?))", []any{"email", "email", ".*"}},
		{"not_regex", one(`{"key":"email","value":"^a","operator":"not_regex"}`),
			"(NOT (" + tH + " AND match(" + tV + ", ?)))", []any{"email", "email", "^a"}},
		{"regex with a NUL class range", one(`{"key":"b","value":"[\\x00-\\x1f]","operator":"regex"}`),
			"(" + tH + " AND match(" + tV + ", ?))", []any{"b", "b", `[\x00-\x1f]`}},

		// comparisons
		{"gt number", one(`{"key":"age","value":18,"operator":"gt"}`),
			"ifNull(" + tN + " > ?, 0)", []any{"age", 18.0}},
		{"gte numeric string", one(`{"key":"age","value":"18.5","operator":"gte"}`),
			"ifNull(" + tN + " >= ?, 0)", []any{"age", 18.5}},
		{"lt number", one(`{"key":"age","value":-3,"operator":"lt"}`),
			"ifNull(" + tN + " < ?, 0)", []any{"age", -3.0}},
		{"lte number", one(`{"key":"age","value":1e3,"operator":"lte"}`),
			"ifNull(" + tN + " <= ?, 0)", []any{"age", 1000.0}},
		{"gt string", one(`{"key":"name","value":"m","operator":"gt"}`),
			"(" + tV + " > ?)", []any{"name", "m"}},
		{"gte string", one(`{"key":"name","value":"m","operator":"gte"}`),
			"(" + tV + " >= ?)", []any{"name", "m"}},
		{"gte empty string", one(`{"key":"name","value":"","operator":"gte"}`),
			"(" + tH + " AND (" + tV + " >= ?))", []any{"name", "name", ""}},
		{"lt string", one(`{"key":"name","value":"m","operator":"lt"}`),
			"(" + tH + " AND (" + tV + " < ?))", []any{"name", "name", "m"}},
		{"lt empty string", one(`{"key":"name","value":"","operator":"lt"}`),
			"(" + tV + " < ?)", []any{"name", ""}},
		{"lte string", one(`{"key":"name","value":"m","operator":"lte"}`),
			"(" + tH + " AND (" + tV + " <= ?))", []any{"name", "name", "m"}},
		{"inf string is text", one(`{"key":"x","value":"inf","operator":"gt"}`),
			"(" + tV + " > ?)", []any{"x", "inf"}},
		{"huge numeric string is text", one(`{"key":"x","value":"1e999","operator":"gt"}`),
			"(" + tV + " > ?)", []any{"x", "1e999"}},

		// presence
		{"is_set", one(`{"key":"email","value":"is_set","operator":"is_set"}`), tH, []any{"email"}},
		{"is_set list value ignored", one(`{"key":"email","value":[1,{}],"operator":"is_set"}`), tH, []any{"email"}},
		{"is_not_set", one(`{"key":"email","operator":"is_not_set"}`), "(NOT " + tH + ")", []any{"email"}},

		// dates
		{"is_date_exact date", one(`{"key":"d","value":"2024-01-02","operator":"is_date_exact"}`),
			"(" + tE + " AND ifNull(toDate(" + tD + ") = toDate(?), 0))", []any{"d", "d", "2024-01-02"}},
		{"is_date_exact datetime with offset", one(`{"key":"d","value":"2024-01-02T23:30:00-05:00","operator":"is_date_exact"}`),
			"(" + tE + " AND ifNull(toDate(" + tD + ") = toDate(?), 0))", []any{"d", "d", "2024-01-03"}},
		{"is_date_after date", one(`{"key":"d","value":"2024-01-02","operator":"is_date_after"}`),
			"(" + tE + " AND ifNull(" + tD + " > toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 00:00:00"}},
		{"is_date_after rfc3339", one(`{"key":"d","value":"2024-01-02T03:04:05+02:00","operator":"is_date_after"}`),
			"(" + tE + " AND ifNull(" + tD + " > toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 01:04:05"}},
		{"is_date_after fraction floors", one(`{"key":"d","value":"2024-01-02T03:04:05.7Z","operator":"is_date_after"}`),
			"(" + tE + " AND ifNull(" + tD + " > toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 03:04:05"}},
		{"is_date_before space datetime", one(`{"key":"d","value":"2024-01-02 03:04:05","operator":"is_date_before"}`),
			"(" + tE + " AND ifNull(" + tD + " < toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 03:04:05"}},
		{"is_date_before fraction ceils", one(`{"key":"d","value":"2024-01-02 03:04:05.2","operator":"is_date_before"}`),
			"(" + tE + " AND ifNull(" + tD + " < toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 03:04:06"}},
		{"is_date_before T no zone", one(`{"key":"d","value":"2024-01-02T03:04:05","operator":"is_date_before"}`),
			"(" + tE + " AND ifNull(" + tD + " < toDateTime(?, 'UTC'), 0))", []any{"d", "d", "2024-01-02 03:04:05"}},
		{"is_date_before negated", one(`{"key":"d","value":"2024-01-02","operator":"is_date_before","negation":true}`),
			"(NOT (" + tE + " AND ifNull(" + tD + " < toDateTime(?, 'UTC'), 0)))", []any{"d", "d", "2024-01-02 00:00:00"}},
	})
}

func TestOperatorErrors(t *testing.T) {
	cases := []struct{ in, detail string }{
		{one(`{"key":"a","value":"x","operator":"foo"}`), `unknown operator "foo"`},
		{one(`{"key":"a","value":"x","operator":"EXACT"}`), `unknown operator "EXACT"`},
		{one(`{"key":"a","value":"(","operator":"regex"}`), "invalid regex \"(\": error parsing regexp: missing closing ): `(`"},
		{one(`{"key":"a","value":"(?<x","operator":"not_regex"}`), ""},
		{one(`{"key":"a","value":"\u0000","operator":"regex"}`), "regex \"\\x00\" matches a NUL character, which ClickHouse cannot match reliably"},
		{one(`{"key":"a","value":"a\u0000b","operator":"not_regex"}`), ""},
		{one(`{"key":"a","value":"\\x00","operator":"regex"}`), ""},
		{one(`{"key":"a","value":"x\\x{0}","operator":"regex"}`), ""},
		{one(`{"key":"a","value":"(x\\000)+","operator":"regex"}`), ""},
		{one(`{"key":"a","value":"\\Q\u0000\\E","operator":"regex"}`), ""},
		{one(`{"key":"a","value":"(?i)[\u0000]","operator":"regex"}`), ""},
		{"a__regex=\u0000", ""},
		{one(`{"key":"a","value":["x"],"operator":"icontains"}`), `operator "icontains" does not accept a list value`},
		{one(`{"key":"a","value":[1],"operator":"gt"}`), `operator "gt" does not accept a list value`},
		{one(`{"key":"a","value":["2024-01-01"],"operator":"is_date_after"}`), `operator "is_date_after" does not accept a list value`},
		{one(`{"key":"a","value":true,"operator":"gt"}`), `operator "gt" needs a number or string value, not a boolean`},
		{one(`{"key":"a","value":null,"operator":"lt"}`), `operator "lt" needs a number or string value, not null`},
		{one(`{"key":"a","value":1e999,"operator":"gt"}`), `number 1e999 is out of range`},
		{one(`{"key":"a","value":1e999}`), `number 1e999 is out of range`},
		{one(`{"key":"a","value":"yesterday","operator":"is_date_after"}`), `invalid date "yesterday" (a date, a date-time, or relative like -7d, 24h, 3m, 1y)`},
		{one(`{"key":"a","value":"-7x","operator":"is_date_after"}`), ""},
		{one(`{"key":"a","value":"-1234567d","operator":"is_date_after"}`), ""},
		{one(`{"key":"a","value":"--7d","operator":"is_date_after"}`), ""},
		{one(`{"key":"a","value":"+7d","operator":"is_date_after"}`), ""},
		{one(`{"key":"a","value":"7D","operator":"is_date_after"}`), ""},
		{one(`{"key":"a","value":"999999y","operator":"is_date_before"}`), `date "999999y" is out of range (1970-01-01 to 2105-12-31)`},
		{one(`{"key":"a","value":"2024-02-30","operator":"is_date_exact"}`), `invalid date "2024-02-30" (a date, a date-time, or relative like -7d, 24h, 3m, 1y)`},
		{one(`{"key":"a","value":20240101,"operator":"is_date_before"}`), `operator "is_date_before" needs a date string value, not a number`},
		{one(`{"key":"a","value":"1969-12-31","operator":"is_date_before"}`), `date "1969-12-31" is out of range (1970-01-01 to 2105-12-31)`},
		{one(`{"key":"a","value":"2106-01-01","operator":"is_date_exact"}`), `date "2106-01-01" is out of range (1970-01-01 to 2105-12-31)`},
	}
	for _, tc := range cases {
		_, err := Parse(tc.in)
		e := asError(t, tc.in, err)
		if tc.detail != "" && e.Detail != tc.detail {
			t.Errorf("Parse(%s) detail\n got: %s\nwant: %s", tc.in, e.Detail, tc.detail)
		}
	}
}

func TestTooManyListValues(t *testing.T) {
	in := `[{"key":"a","value":[`
	for i := 0; i <= MaxListValues; i++ {
		if i > 0 {
			in += ","
		}
		in += `"v"`
	}
	in += `]}]`
	_, err := Parse(in)
	asError(t, "long list", err)
}
