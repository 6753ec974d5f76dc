package timeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	got, err := Build(events, Query{From: at(2), To: at(6), Keys: []string{"plan"}})
	if err != nil {
		t.Fatal(err)
	}
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
	got, _ = Build(events, Query{From: at(0), To: at(10), Keys: []string{"n"}, Events: []string{"pay"}})
	if len(got) != 1 || got[0].RelevantEventCount != 1 || string(got[0].Properties) != `{"n":2,"plan":"pro"}` {
		t.Fatalf("relevant events: %+v", got)
	}
	if got, err := Build(nil, Query{From: at(0), To: at(1)}); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty: %#v %v", got, err)
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
		got, _ := Build(events, Query{From: at(0), To: at(10), Events: tc.events})
		raw, _ := json.Marshal(got)
		want := `[{"timestamp":"2026-01-01T01:00:00Z","properties":{"bar":456,"foo":"abc"},"relevant_event_count":` +
			strconv.Itoa(tc.count) + `}]`
		if string(raw) != want {
			t.Fatalf("events %v:\n got %s\nwant %s", tc.events, raw, want)
		}
	}
}

// TestBuildIsBounded: each point carries all of the person's properties,
// so a few events (one setting many properties, then many changing a
// crucial key) would make an answer of points × properties; past MaxBytes
// Build refuses instead of building it.
func TestBuildIsBounded(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var set []string
	for i := 0; i < 200; i++ {
		set = append(set, fmt.Sprintf(`"k%d":%q`, i, strings.Repeat("v", 100)))
	}
	events := []Event{{"e", at, `{"$set":{` + strings.Join(set, ",") + `}}`}}
	for i := 0; i < 500; i++ {
		events = append(events, Event{"e", at.Add(time.Duration(i+1) * time.Second), fmt.Sprintf(`{"$set":{"c":%d}}`, i)})
	}
	q := Query{From: at, To: at.Add(time.Hour), Keys: []string{"c"}}
	// 501 points of ~23 KB: ~11.5 MB, under the default bound.
	if got, err := Build(events, q); err != nil || len(got) != 501 {
		t.Fatalf("default bound: %d points, %v", len(got), err)
	}
	q.MaxBytes = 1 << 20
	got, err := Build(events, q)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || got != nil || tooLarge.Field() != "date_from" {
		t.Fatalf("over 1 MiB: %d points, %v", len(got), err)
	}
	// A narrower window has fewer points and fits.
	q.To = at.Add(20 * time.Second)
	if got, err := Build(events, q); err != nil || len(got) != 21 {
		t.Fatalf("narrow window: %d points, %v", len(got), err)
	}
}

func FuzzApply(f *testing.F) {
	f.Add(`{"$set":{"a":1},"$unset":{"b":1}}`)
	f.Add(`{"$set_once":{"a":[1]},"$unset":["a"]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		state := NewState()
		state.Props["a"] = 1
		state.Fold(raw, time.Unix(5, 0), true)
	})
}

// TestBuildTimestampAware: an event with $set_timestamp changes a key only
// when it is not older than the moment recorded for the key, as the
// ingester folds it; the points follow the resulting state.
func TestBuildTimestampAware(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }
	events := []Event{
		{"import", at(5), `{"$set_timestamp":true,"$set":{"plan":"pro"}}`},
		{"import", at(3), `{"$set_timestamp":true,"$set":{"plan":"free","seats":2}}`},
		{"import", at(6), `{"$set_timestamp":"2026-01-01T05:30:00Z","$set":{"plan":"team"}}`},
		{"e", at(7), `{"$set":{"plan":"late"}}`},
		{"import", at(6), `{"$set_timestamp":true,"$set":{"plan":"older than late"}}`},
	}
	got, err := Build(events, Query{From: at(0), To: at(10), Keys: []string{"plan"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got)
	want := `[{"timestamp":"2026-01-01T05:00:00Z","properties":{"plan":"pro"},"relevant_event_count":2},` +
		`{"timestamp":"2026-01-01T06:00:00Z","properties":{"plan":"team","seats":2},"relevant_event_count":1},` +
		`{"timestamp":"2026-01-01T07:00:00Z","properties":{"plan":"late","seats":2},"relevant_event_count":2}]`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
}
