package transform

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeResult: whatever a plugin returns, the result is the input
// (refused) or an event with the input's team_id and uuid and non-nil
// properties; it never panics.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{`{"event":"x"}`, `{"event":"x","team_id":8}`, `{"event":"","uuid":"u"}`, `[]`, `null`, `{"event":5}`, `{"event":"x","properties":null,"$set":{"a":1}}`} {
		f.Add([]byte(s))
	}
	in := sample("in")
	f.Fuzz(func(t *testing.T, text []byte) {
		out, err := decodeResult(text, in)
		if out.TeamID != in.TeamID || out.UUID != in.UUID {
			t.Fatalf("identity changed: %+v", out)
		}
		if err != nil {
			if out.Event != in.Event {
				t.Fatalf("refused result is not the input: %+v", out)
			}
			return
		}
		if out.Event == "" || out.Properties == nil {
			t.Fatalf("accepted %q as %+v", text, out)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeSample: a dry run's body is either refused with an attr or an
// event of the project with an event name, a uuid and properties.
func FuzzDecodeSample(f *testing.F) {
	for _, s := range []string{`{"event":"x"}`, `{"event":"x","team_id":"9","uuid":"nope"}`, `{"event":"x","timestamp":"2026-01-01T00:00:00Z"}`, `[]`, `{"event":"x","properties":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeSample(raw, 7, time.Unix(0, 0))
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.Attr == "" {
				t.Fatalf("error without attr: %v", err)
			}
			return
		}
		if ev.TeamID != 7 || ev.Event == "" || ev.UUID == "" || ev.Properties == nil {
			t.Fatalf("%+v", ev)
		}
	})
}

// FuzzParseRefs: a chain command's payload is refused or every ref names
// a config and a well-formed version hash.
func FuzzParseRefs(f *testing.F) {
	f.Add([]byte(`[{"plugin_config_id":1,"version":"` + strings.Repeat("a", 64) + `"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		refs, err := ParseRefs(data)
		if err != nil {
			return
		}
		for _, r := range refs {
			if r.ConfigID == 0 || !isHash(r.Version) {
				t.Fatalf("%+v", r)
			}
		}
	})
}
