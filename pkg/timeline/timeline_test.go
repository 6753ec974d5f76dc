package timeline

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func TestBuild(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	events := []Event{
		{"e", at(1), `{"$set":{"plan":"free","n":1}}`},
		{"e", at(2), `{"$set":{"n":2}}`},
		{"pay", at(3), `{"$set":{"plan":"pro"}}`},
		{"e", at(4), `{}`},
		{"e", at(5), `{"$unset":["plan"]}`},
		{"e", at(9), `{"$set":{"plan":"late"}}`},
	}
	got := Build(events, Query{From: at(2), To: at(6), Keys: []string{"plan"}})
	raw, _ := json.Marshal(got)
	// Each point holds every property at its start, not only the crucial
	// ones (PostHog: {"foo":"abc","bar":123}, not {"bar":123}).
	want := `[{"timestamp":"2026-01-01T02:00:00Z","properties":{"n":2,"plan":"free"},"relevant_event_count":1},` +
		`{"timestamp":"2026-01-01T03:00:00Z","properties":{"n":2,"plan":"pro"},"relevant_event_count":2},` +
		`{"timestamp":"2026-01-01T05:00:00Z","properties":{"n":2},"relevant_event_count":1}]`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	// Only "pay" events are relevant.
	got = Build(events, Query{From: at(0), To: at(10), Keys: []string{"n"}, Events: []string{"pay"}})
	if len(got) != 1 || got[0].RelevantEventCount != 1 || len(got[0].Properties) != 2 {
		t.Fatalf("relevant events: %+v", got)
	}
	if got := Build(nil, Query{From: at(0), To: at(1)}); got == nil || len(got) != 0 {
		t.Fatalf("empty: %#v", got)
	}
}

// TestBuildWithoutCrucialKeys: with no filter at all, no change is
// relevant, so the window is a single point (at the first relevant event,
// with the properties then) counting every relevant event, as PostHog.
func TestBuildWithoutCrucialKeys(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	events := []Event{
		{"$pageview", at(1), `{"$set":{"foo":"abc","bar":456}}`},
		{"other", at(2), `{"$set":{"bar":123}}`},
		{"$pageview", at(3), `{}`},
		{"$pageview", at(4), `{"$set":{"bar":789}}`},
	}
	for _, tc := range []struct {
		events []string
		count  int
	}{{[]string{"$pageview"}, 3}, {nil, 4}} {
		got := Build(events, Query{From: at(0), To: at(10), Events: tc.events})
		raw, _ := json.Marshal(got)
		want := `[{"timestamp":"2026-01-01T01:00:00Z","properties":{"bar":456,"foo":"abc"},"relevant_event_count":` +
			strconv.Itoa(tc.count) + `}]`
		if string(raw) != want {
			t.Fatalf("events %v:\n got %s\nwant %s", tc.events, raw, want)
		}
	}
}

func FuzzApply(f *testing.F) {
	f.Add(`{"$set":{"a":1},"$unset":{"b":1}}`)
	f.Add(`{"$set_once":{"a":[1]},"$unset":["a"]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		state := map[string]any{"a": 1}
		apply(state, raw)
	})
}
