package stream

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out, id, err := Normalize([]byte(`{"event":"x","distinct_id":"a"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m["uuid"] != id || m["timestamp"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("filled: %v", m)
	}
	for _, bad := range []string{`[]`, `null`, `{"uuid":5}`, `{"uuid":"nope"}`, `{} {}`, `x`} {
		if _, _, err := Normalize([]byte(bad), now); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	keep := `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","timestamp":"2020-01-01T00:00:00Z"}`
	out, id, err = Normalize([]byte(keep), now)
	if err != nil || id != "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00" {
		t.Fatalf("%s %v", out, err)
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"event":"x","distinct_id":"a"}`))
	f.Add([]byte(`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		out, id, err := Normalize(line, time.Now())
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil || m["uuid"] == nil || m["timestamp"] == nil || id == "" {
			t.Fatalf("normalized %q to %q", line, out)
		}
	})
}

func TestProjectOf(t *testing.T) {
	for subj, want := range map[string]uint64{"events.1": 1, "events.42": 42, "events.0": 0, "events.x": 0, "other.1": 0, "events.1.2": 0} {
		got, err := ProjectOf(subj)
		if got != want || (want == 0) != (err != nil) {
			t.Errorf("%s: %d %v", subj, got, err)
		}
	}
}
