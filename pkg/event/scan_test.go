package event

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// envelopes are inputs for the differential tests: the common shapes
// (which must take the scanner's path) and the corners where the scanner
// must defer to the reference (or match it exactly).
const head = `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"`

var common = []string{
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$pageview","distinct_id":"user-123456","timestamp":"2026-11-20T10:00:00.123Z","properties":{"$current_url":"https://example.com/pricing?plan=pro","$browser":"Firefox","$browser_version":131,"$os":"Linux","$screen_width":1920.5e-3,"utm":null,"ok":true,"no":false,"list":[1,"a",{"b":[]}],"$session_id":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f01"}}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$set","distinct_id":"user-123456","timestamp":"2026-11-20T10:00:00.123Z","properties":{"$browser":"Firefox"},"$set":{"email":"a@example.com","plan":"pro","seats":12,"nested":{"x":[true,null]}},"$set_once":{"first_seen":"2026-11-20"}}`,
	head + `,"properties":{"$set":{"a":1,"b":1},"$unset":{"z":1},"$anon_distinct_id":"anon-1"},"$set":{"a":2},"$set_once":{"c":3},"$unset":["y"]}`,
	head + `,"properties":{"$set":{"a":1},"$set":{"a":2,"ü":"ünïcode"}}}`, // repeated key in properties: the last wins
	` { "uuid" : "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00" , "event" : "é" , "distinct_id" : -12.5e3 , "timestamp" : "2026-01-01 00:00:00.5" , "properties" : { } } `,
	head + `,"properties":null,"$set":null,"$unset":null}`,
	head + `,"extra":{"deep":[[[[{"a":"\u00e9\n"}]]]]},"properties":{"alias":"x","$actor":{"key_id":"k"}}}`,
	head + `,"properties":{"k":"caf\u00e9 \ud83d\ude00 \"q\""},"$set":{"e\u0301":"\ud800"}}`,
}

var corners = []string{
	``, `null`, `[]`, `{}`, `{"uuid":1}`, `"x"`, `{`, head, head + `}x`, head + `}}`, head + `,}`,
	head + `,"properties":[]}`, head + `,"properties":"x"}`, head + `,"properties":{"$set":1}}`,
	head + `,"properties":{"\u0024set":{"a":1}}}`, head + `,"properties":{"$set\u0000":1}}`,
	head + `,"UUID":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f01"}`, head + `,"Properties":{"$set":{"a":1}}}`,
	head + `,"\u0075uid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f01"}`, head + `,"$ſet":{"a":1}}`,
	head + `,"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f01"}`, head + `,"event":null}`,
	head + `,"properties":{},"properties":{"$set":{"a":1}}}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":5,"distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":true,"timestamp":"2026-01-01T00:00:00Z"}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"\u0020","timestamp":"2026-01-01T00:00:00Z"}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e\xff","distinct_id":"a\xfe","timestamp":"2026-01-01T00:00:00Z","properties":{"k\xff":"\xff"}}`,
	head + `,"$set":{"a":01}}`, head + `,"$set":{"a":1.}}`, head + `,"$set":{"a":-}}`, head + `,"$set":{"a":1e}}`,
	head + `,"$set":{"a":tru}}`, head + `,"$set":{"a":"\x01"}}`, head + `,"$set":{"a":"\q"}}`, head + `,"$set":{"a":"\u12"}}`,
	head + `,"$set":{"a" 1}}`, head + `,"$set":{"a":1,}}`, head + `,"$set":[1]}`, head + `,"$unset":[1]}`, head + `,"$unset":{"a":1}}`,
	head + `,"$unset":"a"}`, head + `,"$set_once":[]}`, head + `,"properties":{"$unset":["a",2]}}`,
	head + `,"x":` + nest(300) + `}`, head + `,"x":` + nest(20000) + `}`,
	`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"1900-01-01T00:00:00Z"}`,
	`{"uuid":"x","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"}`,
	head + "\t\r\n}", "\ufeff" + head + `}`,
}

func nest(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

// sameAsReference fails the test when Parse and parseReference disagree.
func sameAsReference(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := Parse(data)
	if len(data) > MaxSize {
		return
	}
	want, werr := parseReference(data)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("%q: error %v, reference %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
	}
}

func TestParseSameAsReference(t *testing.T) {
	for _, in := range append(append([]string{}, common...), corners...) {
		sameAsReference(t, []byte(in))
	}
	// The common shapes must take the scanner's path: else this test
	// would compare the reference with itself.
	for _, in := range common {
		if _, _, ok := scanEnvelope([]byte(in), false); !ok {
			t.Errorf("scanner deferred a common envelope: %s", in)
		}
	}
}

func TestDecodeFastSameAsStd(t *testing.T) {
	for _, in := range []string{`{}`, `[]`, `{"a":[1,{"b":null}],"a":2}`, `"\ud83d\ude00\u00e9\xff"`, `-0.5E+7`, `{"\u0061":true}`, `[1,]`, `{"a":1`, nest(300)} {
		got, gerr := decodeFast([]byte(in))
		want, werr := decodeStd([]byte(in))
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v %v, want %#v %v", in, got, gerr, want, werr)
		}
	}
}

func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(`{"a":[1,"x",{"b":null,"c":true}],"d":-1.5e3}`))
	f.Add([]byte(`"\u00e9\ud800"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // decodeFast is only given validated values
		}
		got, gerr := decodeFast(data)
		want, werr := decodeStd(data)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v %v, want %#v %v", data, got, gerr, want, werr)
		}
	})
}

func BenchmarkParseReference(b *testing.B) {
	data := []byte(common[0])
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := parseReference(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeObject: DecodeObject is a Decoder with UseNumber decoding
// into a map, error for error.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",{"b":null}],"d":-1.5e3}`, `null`, `[1]`, `"s"`, `{"a":1,"a":2}`, `{} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // only validated text is given
		}
		got, gerr := DecodeObject(data)
		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		werr := dec.Decode(&want)
		if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %#v %v, want %#v %v", data, got, gerr, want, werr)
		}
	})
}
