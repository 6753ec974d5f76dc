package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/event"
)

func raw(t *testing.T, s string) *Raw {
	t.Helper()
	ev, err := decodeRaw(json.RawMessage(s), 0)
	if err != nil {
		t.Fatal(err)
	}
	return &ev
}

// envelopeOf is appendEnvelope into a fresh buffer.
func envelopeOf(ev *Raw, i int, projectID uint64, now, sentAt time.Time, defaultEvent string) (Envelope, error) {
	env, _, err := appendEnvelope(ev, i, controlplane.Project{ID: projectID}, now, &Batch{SentAt: sentAt, DefaultEvent: defaultEvent}, nil)
	return env, err
}

// TestEnvelopeArena: envelopes appended one after another into a shared
// buffer (small, so it must grow, and one already holding bytes) are each
// the envelope built alone, none is changed by the ones after it, a
// refused event leaves the buffer as it was, and none can be appended to
// over its neighbour.
func TestEnvelopeArena(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	events := []string{
		`{"event":"a","distinct_id":"x","timestamp":"2026-05-01T11:00:00.5Z","properties":{"p":1}}`,
		`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"b","distinct_id":7,"$set":{"q":"\u00e9"},"$set_once":{"r":[1,2]},"$unset":["s"]}`,
		`{"event":"c","$distinct_id":"y","timestamp":"2026-05-01T11:00:00Z","properties":{"long":"` + strings.Repeat("z", 500) + `"}}`,
	}
	for _, start := range [][]byte{nil, make([]byte, 3, 8)} {
		arena := start
		var got []Envelope
		var copies [][]byte
		for i, in := range events {
			env, next, err := appendEnvelope(raw(t, in), i, controlplane.Project{ID: 1}, now, &Batch{}, arena)
			if err != nil {
				t.Fatal(err)
			}
			alone, err := envelopeOf(raw(t, in), i, 1, now, time.Time{}, "")
			if err != nil {
				t.Fatal(err)
			}
			if string(env.Data) != string(alone.Data) || (env.UUID != alone.UUID && i != 0) {
				t.Errorf("event %d: %s in the arena, %s alone", i, env.Data, alone.Data)
			}
			if cap(env.Data) != len(env.Data) {
				t.Errorf("event %d: room to append over the next envelope (cap %d, len %d)", i, cap(env.Data), len(env.Data))
			}
			if len(next) != len(arena)+len(env.Data) {
				t.Errorf("event %d: the arena grew by %d for a %d-byte envelope", i, len(next)-len(arena), len(env.Data))
			}
			got, copies, arena = append(got, env), append(copies, append([]byte(nil), env.Data...)), next
			// A refused event leaves the arena as it was.
			if _, after, err := appendEnvelope(raw(t, `{"event":"$delete_person","distinct_id":"x"}`), i, controlplane.Project{ID: 1}, now, &Batch{}, arena); err == nil || len(after) != len(arena) {
				t.Errorf("refused event: err %v, arena %d -> %d bytes", err, len(arena), len(after))
			}
		}
		for i, env := range got {
			if string(env.Data) != string(copies[i]) {
				t.Errorf("event %d changed by later appends: %s, was %s", i, env.Data, copies[i])
			}
		}
	}
}

func TestEventTime(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sentAt := now.Add(-time.Hour) // the client's clock is an hour slow
	cases := []struct {
		name   string
		event  string
		sentAt time.Time
		want   time.Time
	}{
		{"timestamp and sent_at: skew removed", `{"timestamp":"2026-05-01T10:59:50Z"}`, sentAt, now.Add(-10 * time.Second)},
		{"timestamp with an offset zone", `{"timestamp":"2026-05-01T12:59:50+02:00"}`, sentAt, now.Add(-10 * time.Second)},
		{"$ignore_sent_at", `{"timestamp":"2026-05-01T10:59:50Z","properties":{"$ignore_sent_at":true}}`, sentAt, now.Add(-time.Hour - 10*time.Second)},
		{"timestamp alone", `{"timestamp":"2026-04-01T00:00:00.123456Z"}`, time.Time{}, time.Date(2026, 4, 1, 0, 0, 0, 123456000, time.UTC)},
		{"offset", `{"offset":1500}`, sentAt, now.Add(-1500 * time.Millisecond)},
		{"timestamp wins over offset", `{"timestamp":"2026-04-01T00:00:00Z","offset":1500}`, time.Time{}, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"nothing", `{}`, sentAt, now},
		{"null timestamp", `{"timestamp":null}`, time.Time{}, now},
		{"far future", `{"timestamp":"2026-05-03T00:00:00Z"}`, time.Time{}, now},
		{"22 hours ahead is kept", `{"timestamp":"2026-05-02T10:00:00Z"}`, time.Time{}, now.Add(22 * time.Hour)},
	}
	for _, c := range cases {
		got, _, err := eventTime(raw(t, c.event), now, c.sentAt)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"timestamp":12}`, `{"timestamp":"yesterday"}`, `{"offset":"x"}`, `{"timestamp":"1900-01-01T00:00:00Z"}`} {
		if _, _, err := eventTime(raw(t, bad), now, time.Time{}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestEnvelope(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	decode := func(t *testing.T, env Envelope) map[string]any {
		t.Helper()
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(string(env.Data)))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m["uuid"] != env.UUID {
			t.Fatalf("uuid %v, Nats-Msg-Id %s", m["uuid"], env.UUID)
		}
		return m
	}
	t.Run("fields pass through", func(t *testing.T) {
		env, err := envelopeOf(raw(t, `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$identify","distinct_id":42,
			"timestamp":"2026-05-01T11:00:00Z","properties":{"$anon_distinct_id":"anon","price":1.50,"$set":{"a":1}},
			"$set":{"email":"x@y.z"},"$set_once":{"first":"yes"},"$unset":["trial"],"type":"capture","library":"l"}`), 0, 1, now, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		want := `{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","event":"$identify","distinct_id":42,"timestamp":"2026-05-01T11:00:00Z",` +
			`"properties":{"$anon_distinct_id":"anon","price":1.50,"$set":{"a":1}},"$set":{"email":"x@y.z"},"$set_once":{"first":"yes"},"$unset":["trial"]}`
		if string(env.Data) != want {
			t.Fatalf("envelope\n%s\nwant\n%s", env.Data, want)
		}
	})
	t.Run("distinct id sources", func(t *testing.T) {
		for in, want := range map[string]string{
			`{"event":"e","distinct_id":"top","properties":{"distinct_id":"inner"}}`: "top",
			`{"event":"e","distinct_id":"","properties":{"distinct_id":"inner"}}`:    "inner",
			`{"event":"e","$distinct_id":"dollar"}`:                                  "dollar",
			`{"event":"e","properties":{"distinct_id":"inner"}}`:                     "inner",
			`{"event":"e","properties":{"$distinct_id":"inner$"}}`:                   "inner$",
		} {
			env, err := envelopeOf(raw(t, in), 0, 1, now, time.Time{}, "")
			if err != nil || decode(t, env)["distinct_id"] != want {
				t.Errorf("%s: %s %v", in, env.Data, err)
			}
		}
	})
	t.Run("made-up uuids", func(t *testing.T) {
		withTS := raw(t, `{"event":"e","distinct_id":"a","uuid":"","timestamp":"2026-05-01T11:00:00Z"}`)
		a, _ := envelopeOf(withTS, 0, 1, now, time.Time{}, "")
		b, _ := envelopeOf(withTS, 0, 1, now.Add(time.Minute), time.Time{}, "")
		c, _ := envelopeOf(withTS, 0, 2, now, time.Time{}, "")
		if a.UUID == "" || a.UUID != b.UUID || a.UUID == c.UUID {
			t.Fatalf("same event retried: %s %s; other project %s", a.UUID, b.UUID, c.UUID)
		}
		noTS := raw(t, `{"event":"e","distinct_id":"a"}`)
		d, _ := envelopeOf(noTS, 0, 1, now, time.Time{}, "")
		e, _ := envelopeOf(noTS, 0, 1, now, time.Time{}, "")
		if d.UUID == e.UUID || uuid.MustParse(d.UUID).Version() != 7 {
			t.Fatalf("events without timestamp: %s %s", d.UUID, e.UUID)
		}
		if m := decode(t, d); m["timestamp"] != "2026-05-01T12:00:00Z" {
			t.Fatalf("timestamp %v", m["timestamp"])
		}
	})
	t.Run("default event name", func(t *testing.T) {
		env, err := envelopeOf(raw(t, `{"$distinct_id":"a","$set":{"x":1}}`), 0, 1, now, time.Time{}, "$set")
		if err != nil || decode(t, env)["event"] != "$set" {
			t.Fatalf("%s %v", env.Data, err)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		huge := `{"event":"e","distinct_id":"a","properties":{"x":"` + strings.Repeat("x", MaxEventBytes) + `"}}`
		for in, want := range map[string]struct {
			kind   Kind
			reason string
		}{
			`{"distinct_id":"a"}`:                              {Malformed, "event name is required"},
			`{"event":"","distinct_id":"a"}`:                   {Malformed, "event name is required"},
			`{"event":"e"}`:                                    {Malformed, "distinct_id is required"},
			`{"event":"e","distinct_id":"  "}`:                 {Malformed, "distinct_id is empty"},
			`{"event":"e","distinct_id":{"a":1}}`:              {Malformed, "string or a number"},
			`{"event":"e","distinct_id":"a","uuid":"x"}`:       {Malformed, "does not parse"},
			`{"event":"e","distinct_id":"a","uuid":7}`:         {Malformed, "uuid must be a string"},
			`{"event":7,"distinct_id":"a"}`:                    {Malformed, "event name must be a string"},
			`{"event":"e","distinct_id":"a","$set":[1]}`:       {Malformed, "$set must be an object"},
			`{"event":"e","distinct_id":"a","timestamp":"no"}`: {Malformed, "timestamp"},
			`{"event":"e","distinct_id":"a","properties":[1]}`: {Malformed, "properties must be an object"},
			huge: {TooLarge, "limit is 1048576"},
		} {
			_, err := envelopeOf(raw(t, in), 3, 1, now, time.Time{}, "")
			var e *Error
			if !errors.As(err, &e) || e.Kind != want.kind || e.Index != 3 || !strings.Contains(e.Reason, want.reason) {
				t.Errorf("%.80s: %v, want %q", in, err, want.reason)
			}
		}
	})
}

// TestEnvelopeRefusesCommands: the public token cannot send the API's
// commands or the properties only they carry; $delete_person_property with
// $unset stays an ordinary event, as in PostHog.
func TestEnvelopeRefusesCommands(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	refused := map[string]string{
		`{"event":"$delete_person","distinct_id":"a","properties":{"$person_id":1,"$delete_events":true}}`: `event "$delete_person": event name $delete_person is reserved`,
		`{"event":"$split_person","distinct_id":"a","properties":{"$person_id":1}}`:                        `event "$split_person"`,
		`{"event":"$delete_person_events","distinct_id":"a"}`:                                              `event "$delete_person_events"`,
		`{"event":"$pageview","distinct_id":"a","properties":{"$actor":{"key_id":"k"}}}`:                   `event "$pageview": property $actor is reserved`,
		`{"event":"$set","distinct_id":"a","properties":{"\u0024actor":null}}`:                             `property $actor is reserved`,
		`{"event":"e","distinct_id":"a","properties":{"$split_distinct_ids":["b"]}}`:                       `property $split_distinct_ids`,
	}
	for body, want := range refused {
		_, err := envelopeOf(raw(t, body), 3, 1, now, time.Time{}, "")
		var e *Error
		if !errors.As(err, &e) || e.Kind != Malformed || e.Index != 3 || !strings.Contains(e.Error(), want) {
			t.Errorf("%s: got %v, want a malformed event 3 saying %q", body, err, want)
		}
	}
	for _, body := range []string{
		`{"event":"$delete_person_property","distinct_id":"a","properties":{"$unset":["x"]}}`,
		`{"event":"e","distinct_id":"a","$set":{"$actor":"a person property may be called so"}}`,
	} {
		if _, err := envelopeOf(raw(t, body), 0, 1, now, time.Time{}, ""); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestClientIP: the client's address becomes $ip unless the event has its
// own (however written), and a project that anonymizes addresses stores
// none, neither the client's nor one sent.
func TestClientIP(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name, in  string
		ip        string
		anonymize bool
		want      any // properties.$ip, nil: absent
		props     int // properties the stored object has
	}{
		{"added", `{"event":"e","distinct_id":"d","properties":{"a":1}}`, "203.0.113.9", false, "203.0.113.9", 2},
		{"no properties", `{"event":"e","distinct_id":"d"}`, "2001:db8::1", false, "2001:db8::1", 1},
		{"null properties", `{"event":"e","distinct_id":"d","properties":null}`, "203.0.113.9", false, "203.0.113.9", 1},
		{"empty, spaced", `{"event":"e","distinct_id":"d","properties": { } }`, "203.0.113.9", false, "203.0.113.9", 1},
		{"indented", "{\"event\":\"e\",\"distinct_id\":\"d\",\"properties\": {\n  \"a\": 1\n}}", "203.0.113.9", false, "203.0.113.9", 2},
		{"own $ip kept", `{"event":"e","distinct_id":"d","properties":{"$ip":"198.51.100.2"}}`, "203.0.113.9", false, "198.51.100.2", 1},
		{"own $ip escaped", `{"event":"e","distinct_id":"d","properties":{"\u0024ip":"198.51.100.2"}}`, "203.0.113.9", false, "198.51.100.2", 1},
		{"nested $ip is not the event's", `{"event":"e","distinct_id":"d","properties":{"$set":{"$ip":"x"}}}`, "203.0.113.9", false, "203.0.113.9", 2},
		{"unknown address", `{"event":"e","distinct_id":"d","properties":{"a":1}}`, "", false, nil, 1},
		{"anonymized", `{"event":"e","distinct_id":"d","properties":{"a":1}}`, "203.0.113.9", true, nil, 1},
		{"anonymized drops one sent", `{"event":"e","distinct_id":"d","properties":{"a":1,"$ip":"198.51.100.2","$ip":"198.51.100.3"}}`, "203.0.113.9", true, nil, 1},
		{"anonymized, no properties", `{"event":"e","distinct_id":"d"}`, "203.0.113.9", true, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, _, err := appendEnvelope(raw(t, c.in), 0, controlplane.Project{ID: 1, AnonymizeIPs: c.anonymize}, now, &Batch{ClientIP: c.ip}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := event.Parse(env.Data)
			if err != nil {
				t.Fatalf("%s: %v", env.Data, err)
			}
			var props map[string]any
			if err := json.Unmarshal([]byte(ev.StoredProperties()), &props); err != nil {
				t.Fatal(err)
			}
			got, ok := props["$ip"]
			if (c.want == nil) == ok || (ok && got != c.want) || len(props) != c.props {
				t.Fatalf("stored properties %v, want $ip %v and %d properties (envelope %s)", props, c.want, c.props, env.Data)
			}
		})
	}
}

// TestTimestampedPersonProperties: a project with
// timestamped_person_properties gets "$set_timestamp":true in each event
// that carries a $set (top level or in properties) and has no
// $set_timestamp of its own; other events, and other projects' events,
// are stored as sent.
func TestTimestampedPersonProperties(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name, in string
		ip       string
		want     string // the stored properties
	}{
		{"top-level $set, no properties", `{"event":"e","distinct_id":"d","$set":{"x":1}}`, "", `{"$set":{"x":1},"$set_timestamp":true}`},
		{"$set in properties", `{"event":"e","distinct_id":"d","properties":{"a":1,"$set":{"x":1}}}`, "", `{"$set":{"x":1},"$set_timestamp":true,"a":1}`},
		{"with the client address", `{"event":"e","distinct_id":"d","properties": { "a":1 },"$set":{"x":1}}`, "203.0.113.9", `{"$ip":"203.0.113.9","$set":{"x":1},"$set_timestamp":true,"a":1}`},
		{"empty properties", `{"event":"e","distinct_id":"d","properties":{ },"$set":{"x":1}}`, "", `{"$set":{"x":1},"$set_timestamp":true}`},
		{"own $set_timestamp kept", `{"event":"e","distinct_id":"d","properties":{"$set_timestamp":false},"$set":{"x":1}}`, "", `{"$set":{"x":1},"$set_timestamp":false}`},
		{"own moment kept", `{"event":"e","distinct_id":"d","properties":{"\u0024set_timestamp":"2020-01-01T00:00:00Z"},"$set":{"x":1}}`, "", `{"$set":{"x":1},"$set_timestamp":"2020-01-01T00:00:00Z"}`},
		{"no $set", `{"event":"e","distinct_id":"d","properties":{"a":1},"$set_once":{"x":1}}`, "", `{"$set_once":{"x":1},"a":1}`},
		{"empty $set", `{"event":"e","distinct_id":"d","$set":{}}`, "", `{"$set":{}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, timed := range []bool{false, true} {
				proj := controlplane.Project{ID: 1, TimestampedPersonProperties: timed}
				env, _, err := appendEnvelope(raw(t, c.in), 0, proj, now, &Batch{ClientIP: c.ip}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ev, err := event.Parse(env.Data)
				if err != nil {
					t.Fatalf("%s: %v", env.Data, err)
				}
				var got, want map[string]any
				if err := json.Unmarshal([]byte(ev.StoredProperties()), &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(c.want), &want); err != nil {
					t.Fatal(err)
				}
				if !timed && !strings.Contains(c.in, "set_timestamp") {
					delete(want, event.PropSetTimestamp) // not stamped
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("timestamped %v: stored %v, want %v (envelope %s)", timed, got, want, env.Data)
				}
			}
		})
	}
}
