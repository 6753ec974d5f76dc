package capture

import (
	"bytes"
	"testing"
)

// FuzzScanBody holds the scanner's reading of a body to encoding/json's
// (splitJSON, then decodeRaw per event): whatever scanBody reads, the
// reference reads the same request fields, the same event spans and the
// same Fields of every event scanBody filled.
func FuzzScanBody(f *testing.F) {
	for _, s := range []string{
		`{"api_key":"phc_1","batch":[{"event":"e","distinct_id":"a"},{"event":"f","distinct_id":"b"}],"sent_at":"2026-01-01T00:00:10Z"}`,
		`[{"event":"e","properties":{"distinct_id":"a","token":"phc_1"}}, 1, null, {"EVENT":"x"}]`,
		`{"event":"e","distinct_id":"a","properties":{"token":"phc_1"},"event":"f"}`,
		`{"batch":null,"event":"e"}`, `{"Batch":[]}`, `{"batch":[{"\u0065vent":"e"}],"token":"t","token":"u"}`,
		` [ {"uuid" : "x" , "$set" : {"a":[1,2,{"b":null}]} } ] `, `{"batch":[{"Distinct_ID":1,"distinct_id":2}]}`,
		`[{"ſet":1,"$ſet":2}]`, `{"batch":[{"a":"\xff"}]}`, `[[[[[[[[]]]]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		trimmed := bytes.TrimSpace(body)
		top, events, slow, ok := scanBody(trimmed)
		if !ok {
			return
		}
		refTop, refEvents, err := splitJSON(trimmed)
		if err != nil {
			t.Fatalf("scanned, but the reference refuses: %v", err)
		}
		if !bytes.Equal(top.apiKey, refTop.apiKey) || !bytes.Equal(top.token, refTop.token) || !bytes.Equal(top.sentAt, refTop.sentAt) {
			t.Fatalf("request fields %q, reference %q", [3][]byte{top.apiKey, top.token, top.sentAt}, [3][]byte{refTop.apiKey, refTop.token, refTop.sentAt})
		}
		if len(events) != len(refEvents) || len(slow) != len(events) {
			t.Fatalf("%d events (%d flags), reference %d", len(events), len(slow), len(refEvents))
		}
		for i, ev := range events {
			if !bytes.Equal(ev.JSON, refEvents[i]) {
				t.Fatalf("event %d: %q, reference %q", i, ev.JSON, refEvents[i])
			}
			ref, err := decodeRaw(refEvents[i], i)
			if slow[i] {
				continue
			}
			if err != nil {
				t.Fatalf("event %d scanned, but the reference refuses: %v", i, err)
			}
			got, want := fieldValues(&ev.Fields), fieldValues(&ref.Fields)
			for k := range got {
				if !bytes.Equal(got[k], want[k]) || (got[k] == nil) != (want[k] == nil) {
					t.Fatalf("event %d field %s: %q, reference %q", i, fieldNames[k], got[k], want[k])
				}
			}
		}
	})
}

func fieldValues(f *Fields) (out [len(fieldNames)][]byte) {
	for i, n := range fieldNames {
		out[i] = *f.field([]byte(n))
	}
	return out
}

// TestDecodeAllocs bounds what Decode allocates for a /batch/ body of
// plain events: the scanner reads it without a copy per event (the
// encoding/json path made 13 allocations per event, 1332 for this body: a
// RawMessage copy per event and per field).
func TestDecodeAllocs(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"api_key":"phc_7","batch":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$pageview","distinct_id":"user-1","timestamp":"2026-05-01T00:00:00Z","properties":{"$browser":"Firefox","amount":1.5},"$set":{"plan":"pro"}}`)
	}
	b.WriteString(`]}`)
	body := b.Bytes()
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := Decode(Request{Body: bytes.NewReader(body), Length: int64(len(body))}, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 20 {
		t.Errorf("Decode allocates %.0f times for 100 events, want at most 20", allocs)
	}
	t.Logf("%.0f allocations for 100 events", allocs)
}
