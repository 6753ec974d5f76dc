package transform

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/event"
)

// TestResultsTheIngesterCannotStore: a result that forges a person write
// (a command name, a reserved property) or that the envelope refuses is a
// failed step; the event goes on unchanged.
func TestResultsTheIngesterCannotStore(t *testing.T) {
	r, _ := newRuntime(t, Limits{})
	for name, body := range map[string]string{
		"command name":       `e.event = '$delete_person'`,
		"chain command":      `e.event = '$set_transformations'`,
		"reserved property":  `e.properties['$actor'] = {key_id: 'x'}`,
		"empty distinct id":  `e.distinct_id = '  '`,
		"bad timestamp":      `e.timestamp = 'yesterday'`,
		"year out of range":  `e.timestamp = '1960-01-01T00:00:00Z'`,
		"long distinct id":   `e.distinct_id = 'x'.repeat(401)`,
		"properties array":   `e.properties = [1]`,
		"$set not an object": `e.$set = 5`,
	} {
		src := `export function processEvent(e) { ` + body + `; return e }`
		res := r.Run(context.Background(), []Step{{ConfigID: 1, Filename: "index.js", Source: src}}, sample("pageview"))
		if s := res.Steps[0]; s.Outcome != OutcomeFailed || res.Event == nil || res.Event.Event != "pageview" {
			t.Errorf("%s: %+v", name, s)
		}
	}
}

// TestEnvelopeRoundTrip: an envelope in the plugin shape and back is the
// same event (top-level $set and $set_once stay top-level; $unset moves
// into properties and still unsets).
func TestEnvelopeRoundTrip(t *testing.T) {
	in, err := event.Parse([]byte(`{"uuid":"0190c6c5-0000-7000-8000-000000000001","event":"e","distinct_id":42,"timestamp":"2026-11-20T10:00:00.5Z",
		"properties":{"n":12345678901234567890,"$set":{"a":1}},"$set":{"b":2},"$set_once":{"c":3},"$unset":["d"]}`))
	if err != nil {
		t.Fatal(err)
	}
	pe, err := FromEnvelope(7, &in)
	if err != nil {
		t.Fatal(err)
	}
	if pe.TeamID != 7 || pe.DistinctID != "42" || pe.Set["b"] == nil || pe.SetOnce["c"] == nil || pe.Properties["$unset"] == nil {
		t.Fatalf("plugin shape %+v", pe)
	}
	out, err := pe.Parsed()
	if err != nil {
		t.Fatal(err)
	}
	if out.UUID != in.UUID || !out.Timestamp.Equal(in.Timestamp) || out.DistinctID != "42" || len(out.Set) != 2 || len(out.SetOnce) != 1 || strings.Join(out.Unset, ",") != "d" {
		t.Fatalf("back: %+v", out)
	}
	if !strings.Contains(string(out.PropertiesRaw), "12345678901234567890") {
		t.Fatalf("a large integer lost its digits: %s", out.PropertiesRaw)
	}
}

// TestFailureLogsAreBounded: a plugin that throws on every event is
// counted every time and logged once a second, with how many failures the
// log line stands for.
func TestFailureLogsAreBounded(t *testing.T) {
	var buf strings.Builder
	r := New(Limits{Timeout: testTimeout}, slog.New(slog.NewTextHandler(&buf, nil)), nil)
	chain := []Step{{ConfigID: 4, Filename: "index.js", Source: `exports.processEvent = function() { throw new Error('nope') }`}}
	for range 50 {
		r.Run(context.Background(), chain, sample("e"))
	}
	if st := r.Stats(4); st.Failed != 50 {
		t.Fatalf("failures counted: %d", st.Failed)
	}
	if n := strings.Count(buf.String(), "transformation failed"); n != 1 {
		t.Fatalf("%d failure logs for 50 failures within a second:\n%s", n, buf.String())
	}
}
