package propjson

import (
	"fmt"
	"reflect"
	"testing"
)

// FuzzDecode holds Decode to encoding/json's Decoder with UseNumber (the
// decoder it replaced): the same map or the same error, on any input,
// invalid JSON included (a stored row is outside input to the fold).
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[1]`, `"s"`, `{"a":1,"a":2}`, `{"a":1} trailing`, `{"a":1}}`, ` {"a" : [1, "x", {"b": null}], "d": -1.5e3} `,
		`{"s":"\u00e9\ud800\"","\u0061":"a"}`, "{\"bad\":\"\xff\"}", `{"a":01}`, `{"a":1,}`, `{"a"}`, `{`, `tru`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gerr := Decode(s)
		var want map[string]any
		var werr error
		if s == "" {
			want = map[string]any{}
		} else {
			want, werr = decodeStd([]byte(s))
		}
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v, %v; want %#v, %v", s, got, gerr, want, werr)
		}
	})
}
