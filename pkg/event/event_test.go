package event

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/testenv/jsonstyle"
)

func TestParse(t *testing.T) {
	ok := `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":42,"timestamp":"2026-01-01T00:00:00.5+01:00",
		"properties":{"$set":{"a":1,"b":1},"$unset":{"z":1}},"$set":{"a":2},"$set_once":{"c":3},"$unset":["y"]}`
	ev, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if ev.DistinctID != "42" || ev.Set["a"].(interface{ String() string }).String() != "2" || ev.Set["b"] == nil ||
		ev.SetOnce["c"] == nil || strings.Join(ev.Unset, ",") != "y,z" || ev.Timestamp.Hour() != 23 {
		t.Fatalf("%+v", ev)
	}
	bad := map[string]string{
		`{}`: "uuid is required",
		`{"uuid":"x","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"}`:                                                            "does not parse",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z"}`:                                     "event name",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":" ","timestamp":"2026-01-01T00:00:00Z"}`:                         "empty",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":{},"timestamp":"2026-01-01T00:00:00Z"}`:                          "string or a number",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"yesterday"}`:                                    "timestamp",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z","properties":[]}`:         "properties must be an object",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z","$unset":[1]}`:            "string keys",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z","properties":{"$set":1}}`: "must be an object",
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"1900-01-01T00:00:00Z"}`:                         "year",
	}
	for in, want := range bad {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"e","distinct_id":"a","timestamp":"2026-01-01T00:00:00Z","properties":{"$set":{"a":1}}}`))
	f.Add([]byte(`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$identify","distinct_id":1,"timestamp":"2026-01-01T00:00:00Z","$unset":{"x":1}}`))
	for _, in := range append(append([]string{}, common...), corners...) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The scanner and the encoding/json reference agree on every input.
		sameAsReference(t, data)
		ev, err := Parse(data)
		// ParseOwned shares what Parse copies, and is otherwise Parse.
		owned, ownedErr := ParseOwned(bytes.Clone(data))
		if !reflect.DeepEqual(ev, owned) || !reflect.DeepEqual(err, ownedErr) {
			t.Fatalf("ParseOwned(%q) = %+v, %v; Parse: %+v, %v", data, owned, ownedErr, ev, err)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if ev.DistinctID == "" || ev.Event == "" {
			t.Fatalf("accepted incomplete event %q", data)
		}
		// Empty maps are nil (Event's doc), on every path.
		for _, m := range []map[string]any{ev.Properties, ev.Set, ev.SetOnce} {
			if m != nil && len(m) == 0 {
				t.Fatalf("empty non-nil map in %q", data)
			}
		}
	})
}

func TestStoredProperties(t *testing.T) {
	cases := map[string]string{
		head + `}`:                      `{}`,
		head + `,"properties":{"a":1}}`: `{"a":1}`,
		head + `,"properties":{"a":1},"$set":{"x":[1]}}`:                `{"$set":{"x":[1]},"a":1}`,
		head + `,"properties":{},"$set":{"x":1},"$unset":["y"]}`:        `{"$set":{"x":1},"$unset":["y"]}`,
		head + `,"$set_once":{"x":1}}`:                                  `{"$set_once":{"x":1}}`,
		head + `,"properties":{"$set":{"a":1}},"$set":{"b":2}}`:         `{"$set":{"a":1,"b":2}}`,
		head + `,"properties":{"$unset":["a"],"k":"v"},"$set":{"b":2}}`: `{"$set":{"b":2},"$unset":["a"],"k":"v"}`,
	}
	for in, want := range cases {
		ev, err := Parse([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.StoredProperties(); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

// TestStoredPropertiesCanonical: the stored properties are one text
// whichever style the client wrote the envelope in, properties and
// top-level $set alike, and a key written with escapes is found as the
// name it spells (a $set inside properties merges with the top-level one).
func TestStoredPropertiesCanonical(t *testing.T) {
	for in, want := range map[string]string{
		head + `,"properties":{"$browser":"Chrome","url":"https://x.test/a?b=<c>","n":1.50,"o":{"k":[true,null]}}}`: `{"$browser":"Chrome","url":"https://x.test/a?b=<c>","n":1.50,"o":{"k":[true,null]}}`,
		head + `,"properties":{"é":"ü"},"$set":{"plan":"pro"},"$set_once":{"first":"2026-01-01"},"$unset":["old"]}`: `{"$set":{"plan":"pro"},"$set_once":{"first":"2026-01-01"},"$unset":["old"],"é":"ü"}`,
		head + `,"properties":{"\u0024set":{"a":1,"b":1},"k":"v"},"$set":{"a":2}}`:                                  `{"$set":{"a":2,"b":1},"k":"v"}`,
		head + `,"properties":{"$set":{"a":1},"$set":{"b":2}}}`:                                                     `{"$set":{"b":2}}`,
	} {
		for _, s := range jsonstyle.All {
			ev, err := Parse(s.Write([]byte(in)))
			if err != nil {
				t.Fatalf("%s %s: %v", s.Name, s.Write([]byte(in)), err)
			}
			if got := ev.StoredProperties(); got != want {
				t.Errorf("%s %s:\n got %s\nwant %s", s.Name, s.Write([]byte(in)), got, want)
			}
		}
	}
}

// TestParseAllocs bounds Parse's allocations for a captured event: the
// ingester parses every message, and its CPU goes with what it allocates
// (garbage collection was a fifth of it). The bound is what Parse needs
// now; three empty maps per event took it to 10.
func TestParseAllocs(t *testing.T) {
	data := []byte(common[0])
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := Parse(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 7 {
		t.Errorf("Parse allocates %.0f times per captured event, want at most 7", allocs)
	}
	// ParseOwned does not copy the raw values: one allocation fewer.
	allocs = testing.AllocsPerRun(200, func() {
		if _, err := ParseOwned(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("ParseOwned allocates %.0f times per captured event, want at most 6", allocs)
	}
}

// TestStoredPropertiesShares: a captured event's stored properties are
// its PropertiesRaw, handed out without a copy (the ingester did one per
// event for nothing: the insert copies them again).
func TestStoredPropertiesShares(t *testing.T) {
	ev, err := Parse([]byte(common[0]))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	allocs := testing.AllocsPerRun(100, func() { got = ev.StoredProperties() })
	if allocs != 0 || got != string(bytes.TrimSpace(ev.PropertiesRaw)) {
		t.Errorf("StoredProperties: %.0f allocations, %q", allocs, got)
	}
}

// TestParseTimeStaysInTheDateTimeRange: the year bound holds in UTC, as
// the time is stored: 1970-01-01 with a positive offset is before the
// epoch (a DateTime wraps it to 2106), 2105-12-31 with a negative one is
// in 2106 (18.16's dates end in 2105).
func TestParseTimeStaysInTheDateTimeRange(t *testing.T) {
	for _, s := range []string{"1970-01-01T00:30:00+01:00", "1970-01-01T05:00:00+05:30", "2105-12-31T23:00:00-10:00"} {
		if got, err := ParseTime(s); err == nil {
			t.Errorf("%s: accepted as %s", s, got)
		}
	}
	for _, s := range []string{"1970-01-01T00:00:00Z", "1970-01-01T01:00:00+01:00", "2105-12-31T23:59:59Z", "2105-12-31T13:00:00-10:00"} {
		if _, err := ParseTime(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
