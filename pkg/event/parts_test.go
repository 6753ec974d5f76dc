package event

import (
	"reflect"
	"testing"
)

// FuzzFromParts holds FromParts to Parse of the envelope the parts stand
// for: the same Event, or an error from both.
func FuzzFromParts(f *testing.F) {
	const id = "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	f.Add(id, "$pageview", "u1", "2026-01-01T00:00:00Z", `{"a":1,"$set":{"x":2}}`, `{"y":3}`, ``, false)
	f.Add(id, "e", " 12 ", "2026-01-01 00:00:00", ` {"$unset":["a"],"k":"v", "k":[1.50,{"n":null}]} `, ``, `{"z":true}`, false)
	f.Add(id, "e<b>", "\xff", "", `null`, `{"a":1}`, `{"b":[]}`, true)
	f.Add("nope", "", "", "x", `[1]`, `5`, `{`, false)
	f.Add(id, "$delete_person", "a", "2026-01-01T00:00:00+01:00", `{"\u0024set":{"a":1}}`, `{}`, `null`, false)
	f.Add(id, "e", "a", "2026-01-01T00:00:00Z", `{"$set":1}`, ``, ``, false)
	f.Fuzz(func(t *testing.T, uuid, name, did, ts, props, set, setOnce string, absent bool) {
		p := Parts{UUID: uuid, Event: name, DistinctID: did, Timestamp: ts}
		if props != "" || !absent {
			p.Properties = []byte(props)
		}
		if set != "" {
			p.Set = []byte(set)
		}
		if setOnce != "" {
			p.SetOnce = []byte(setOnce)
		}
		env := p.Envelope()
		want, werr := Parse(env)
		got, gerr := FromParts(p)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s:\nFromParts error %v, Parse error %v", env, gerr, werr)
		}
		if gerr != nil {
			if _, ok := gerr.(*Error); !ok {
				t.Fatalf("error of type %T", gerr)
			}
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nFromParts %#v\nParse     %#v", env, got, want)
		}
	})
}

// TestFromPartsSize: the size limit is the envelope's, as Parse's.
func TestFromPartsSize(t *testing.T) {
	big := make([]byte, MaxSize)
	for i := range big {
		big[i] = 'a'
	}
	p := Parts{UUID: "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00", Event: "e", DistinctID: "a", Timestamp: "2026-01-01T00:00:00Z",
		Properties: []byte(`{"a":"` + string(big[:MaxSize-200]) + `"}`)}
	if _, err := FromParts(p); err != nil {
		t.Fatalf("under the limit: %v", err)
	}
	p.Properties = []byte(`{"a":"` + string(big) + `"}`)
	if _, err := FromParts(p); err == nil {
		t.Fatal("over the limit: accepted")
	}
	if _, err := Parse(p.Envelope()); err == nil {
		t.Fatal("Parse accepted it")
	}
}
