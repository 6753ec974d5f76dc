package propfilter

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestValueText(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{"plain", "plain"},
		{`quote " and \ backslash`, `quote " and \ backslash`},
		{"", ""},
		{json.Number("42"), "42"},
		{json.Number("1.50"), "1.50"},
		{json.Number("-1e3"), "-1e3"},
		{true, "true"},
		{false, "false"},
		{nil, "null"},
		{map[string]any{"b": json.Number("2"), "a": "<&>"}, `{"a":"<&>","b":2}`},
		{[]any{"x", json.Number("1.0"), nil, true, map[string]any{}}, `["x",1.0,null,true,{}]`},
		{[]any{}, `[]`},
		{map[string]any{"n": map[string]any{"q": `"`}}, `{"n":{"q":"\""}}`},
		{1.5, "1.5"},
		{float64(42), "42"},
		{1e21, "1e+21"},
		{0.000001, "0.000001"},
		{float32(0.1), "0.1"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "+Inf"},
		{7, "7"},
		{int64(-9), "-9"},
		{uint8(200), "200"},
	}
	for _, tc := range cases {
		if got := ValueText(tc.in); got != tc.want {
			t.Errorf("ValueText(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// ValueText of decoded JSON must agree with what a filter compares against.
func TestValueTextRoundTrip(t *testing.T) {
	doc := `{"s":"a\"b","n":12.50,"b":true,"z":null,"o":{"y":[1,"2"],"x":{}},"l":[1,2]}`
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"s": `a"b`, "n": "12.50", "b": "true", "z": "null",
		"o": `{"x":{},"y":[1,"2"]}`, "l": "[1,2]",
	}
	for k, w := range want {
		if got := ValueText(m[k]); got != w {
			t.Errorf("ValueText(%s) = %q, want %q", k, got, w)
		}
	}
	c, err := Parse(`[{"key":"o","value":{"y":[1,"2"],"x":{}}}]`)
	if err != nil {
		t.Fatal(err)
	}
	if c.Args[1] != want["o"] {
		t.Errorf("exact object arg = %#v, want %q", c.Args[1], want["o"])
	}
}
