package csvexport

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
)

// decode parses JSON the way API handlers do: with UseNumber.
func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func TestFlatten(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"flat", `{"a":"x","b":1}`, map[string]string{"a": "x", "b": "1"}},
		{"nested", `{"a":{"b":{"c":"d"}}}`, map[string]string{"a.b.c": "d"}},
		{"array", `{"ids":["a","b"]}`, map[string]string{"ids.0": "a", "ids.1": "b"}},
		{"array in object in array", `{"p":{"nested":{"k":[1,[2,3]]}}}`,
			map[string]string{"p.nested.k.0": "1", "p.nested.k.1.0": "2", "p.nested.k.1.1": "3"}},
		{"objects in array", `{"a":[{"x":1},{"y":null}]}`, map[string]string{"a.0.x": "1", "a.1.y": ""}},
		{"booleans", `{"t":true,"f":false}`, map[string]string{"t": "true", "f": "false"}},
		{"null keeps column", `{"n":null}`, map[string]string{"n": ""}},
		{"empty object and array vanish", `{"o":{},"a":[],"x":{"y":{}}}`, map[string]string{}},
		{"big integer exact", `{"n":12345678901234567890}`, map[string]string{"n": "12345678901234567890"}},
		{"huge exponent as text", `{"n":1e400}`, map[string]string{"n": "1e400"}},
		{"decimal text kept", `{"n":0.10,"m":-0.0,"e":1E+2}`, map[string]string{"n": "0.10", "m": "-0.0", "e": "1E+2"}},
		{"unicode", `{"名前":"José 🚀","k\u00e9":"\u0000"}`, map[string]string{"名前": "José 🚀", "ké": "\x00"}},
		{"empty key", `{"":1,"a":{"":2}}`, map[string]string{"": "1", "a.": "2"}},
		{"empty key nested at root", `{"":{"a":1}}`, map[string]string{".a": "1"}},
		{"top-level array", `[1,{"a":2}]`, map[string]string{"0": "1", "1.a": "2"}},
		{"top-level scalar", `"x"`, map[string]string{"": "x"}},
		{"top-level null", `null`, map[string]string{"": ""}},
		{"collision: sorted order, first wins", `{"a.b":2,"a":{"b":1}}`, map[string]string{"a.b": "1"}},
		{"collision with array index", `{"a":[1],"a.0":2}`, map[string]string{"a.0": "1"}},
		{"collision deeper", `{"x":{"a.b":2,"a":{"b":1},"c":3}}`, map[string]string{"x.a.b": "1", "x.c": "3"}},
		{"person", `{"id":42,"uuid":"u-1","name":"Ann","distinct_ids":["a","b"],
			"properties":{"email":"x","nested":{"k":[1,2]}},"created_at":"2024-01-02T03:04:05Z","is_identified":false}`,
			map[string]string{"id": "42", "uuid": "u-1", "name": "Ann", "distinct_ids.0": "a", "distinct_ids.1": "b",
				"properties.email": "x", "properties.nested.k.0": "1", "properties.nested.k.1": "2",
				"created_at": "2024-01-02T03:04:05Z", "is_identified": "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // map iteration order must not matter
				got, err := Flatten(decode(t, tt.in))
				if err != nil {
					t.Fatal(err)
				}
				if !maps.Equal(got, tt.want) {
					t.Fatalf("Flatten(%s)\n got %q\nwant %q", tt.in, got, tt.want)
				}
			}
		})
	}
}

type person struct {
	ID           int64          `json:"id"`
	Name         string         `json:"name"`
	DistinctIDs  []string       `json:"distinct_ids"`
	Properties   map[string]any `json:"properties,omitempty"`
	IsIdentified bool           `json:"is_identified"`
	Secret       string         `json:"-"`
	Score        float64        `json:"score"`
}

func TestFlattenGoValues(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want map[string]string
	}{
		{"struct with tags", person{ID: 42, Name: "Ann", DistinctIDs: []string{"a"}, Secret: "s", Score: 0.1},
			map[string]string{"id": "42", "name": "Ann", "distinct_ids.0": "a", "is_identified": "false", "score": "0.1"}},
		{"pointer to struct", &person{ID: -1, Properties: map[string]any{"x": []int{7}}},
			map[string]string{"id": "-1", "name": "", "distinct_ids": "", "is_identified": "false", "score": "0", "properties.x.0": "7"}},
		{"nil pointer", (*person)(nil), map[string]string{"": ""}},
		{"float64 inside plain map", map[string]any{"f": 1e21, "i": 3, "u": uint64(math.MaxUint64)},
			map[string]string{"f": "1e+21", "i": "3", "u": "18446744073709551615"}},
		{"typed map and slice", map[string][]string{"a": {"x", "y"}}, map[string]string{"a.0": "x", "a.1": "y"}},
		{"raw message", json.RawMessage(`{"n": 1.50}`), map[string]string{"n": "1.50"}},
		{"json.Number passes through", map[string]any{"n": json.Number("1e400")}, map[string]string{"n": "1e400"}},
		{"invalid utf-8 replaced", map[string]any{"k\xff": "v\xfe"}, map[string]string{"k\uFFFD": "v\uFFFD"}},
		{"html not escaped", map[string]any{"s": struct{ V string }{"<&>"}}, map[string]string{"s.V": "<&>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Flatten(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFlattenErrors(t *testing.T) {
	if _, err := Flatten(map[string]any{"c": make(chan int)}); err == nil {
		t.Error("channel: want error")
	}
	if _, err := Flatten(map[string]any{"f": math.NaN()}); err == nil {
		t.Error("NaN: want error")
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	if _, err := Flatten(cyclic); !errors.Is(err, ErrTooDeep) {
		t.Errorf("cyclic map: got %v, want ErrTooDeep", err)
	}
	// The deepest document encoding/json accepts must still flatten.
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if _, err := Flatten(decode(t, deep)); err != nil {
		t.Errorf("10000 levels: %v", err)
	}
}
