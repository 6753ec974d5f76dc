package propjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzAppendProps holds the direct encoder to encoding/json: for every
// object (decoded as the fold decodes, numbers exact) and for every string
// (invalid UTF-8 included, which decoding never yields), the same bytes,
// or a refusal that sends the caller to Marshal.
func FuzzAppendProps(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1,"b":"x","c":null,"d":true,"e":false}`,
		`{"z":[1,2.5e-3,{"y":"<b>&amp;</b>"}],"a":{"k":-0,"j":"\u2028\u2029\ud800"}}`,
		`{"ctl":"\u0000\u0001\b\f\n\r\t\u001f\"\\/","emoji":"😀","é":"ünï"}`,
		`{"deep":[[[[[[[[[[{"a":[[[]]]}]]]]]]]]]]}`,
	} {
		f.Add([]byte(seed), "s\xff\xfe<>&\u2028")
	}
	f.Fuzz(func(t *testing.T, data []byte, s string) {
		var props map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&props) != nil || props == nil {
			props = map[string]any{}
		}
		props[s] = []any{s, map[string]any{s: s}, json.Number("12"), nil, []any(nil), map[string]any(nil)}
		same(t, props)
	})
}

// TestAppendPropsRefuses: what the direct encoder does not handle goes to
// encoding/json (Encode's fallback), never encoded differently.
func TestAppendPropsRefuses(t *testing.T) {
	for _, v := range []any{1.5, 3, json.Number(""), json.Number("1x"), struct{}{}, []string{"a"}, map[string]string{}} {
		if _, ok := appendProps(nil, []string{"k"}, map[string]any{"k": v}, 0); ok {
			t.Errorf("%T %v encoded directly", v, v)
		}
	}
	raw, keys, err := Encode([]byte("x"), map[string]any{"f": 1.5, "n": json.Number("2")})
	if err != nil || string(raw) != `x{"f":1.5,"n":2}` || !slices.Equal(keys, []string{"f", "n"}) {
		t.Errorf("fallback: %s, %v", raw, err)
	}
	same(t, map[string]any{"a": "<x> & \"y\" \x7f \u00e9 \xc3", "b": []any{true, false, nil}})
}

func same(t *testing.T, props map[string]any) {
	t.Helper()
	want, err := json.Marshal(props)
	got, ok := appendProps(nil, SortedKeys(props), props, 0)
	switch {
	case !ok:
		// Refused: Marshal decides (for decoded values only a depth
		// beyond maxEncodeDepth does this).
	case err != nil:
		t.Fatalf("Marshal refuses %v (%v), appendProps gave %s", props, err, got)
	case !bytes.Equal(got, want):
		t.Fatalf("appendProps\n got %s\nwant %s", got, want)
	}
}
