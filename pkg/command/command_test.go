package command

import (
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// oldEnvelope builds an envelope the way the API (httpapi's publishAs),
// cohorts and transformations built theirs before this package: a map of
// the envelope's fields, marshaled. The builders must write these bytes.
func oldEnvelope(id string, now time.Time, name, distinctID string, set map[string]any, unset []string, properties map[string]any, actor *event.Actor) []byte {
	props := map[string]any{}
	if actor != nil {
		props[event.PropActor] = *actor
	}
	maps.Copy(props, properties)
	env := map[string]any{
		"uuid": id, "event": name, "distinct_id": distinctID,
		"timestamp": now.UTC().Format(time.RFC3339Nano), "properties": props,
	}
	if set != nil {
		env["$set"] = set
	}
	if unset != nil {
		env["$unset"] = unset
	}
	data, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return data
}

// ref is transform.Ref's shape (this package cannot import transform).
type ref struct {
	ConfigID uint64 `json:"config_id"`
	PluginID uint64 `json:"plugin_id"`
	Order    int    `json:"order"`
	Version  string `json:"version"`
}

func TestEnvelopeBytesAsBefore(t *testing.T) {
	id := "0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00"
	now := time.Date(2026, 3, 4, 5, 6, 7, 891011, time.FixedZone("x", 3600))
	actor := &event.Actor{KeyID: "k1", KeyLabel: "ci <bot> & \"co\"", OrganizationID: "org-ü"}
	props := map[string]any{"plan": "pro", "n": json.Number("12.50"), "nested": map[string]any{"z": true, "a": nil},
		"list": []any{"x", json.Number("1")}, "html": "<a href='x'>&</a>", "$set": "odd", "": "empty key"}
	refs := []ref{{ConfigID: 3, PluginID: 1, Order: 0, Version: "ab"}, {ConfigID: 4, PluginID: 2, Order: 1, Version: "<cd>"}}
	refsJSON, err := json.Marshal(refs)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b\"", "<c>"}
	one := func(cmds []Command) Command {
		t.Helper()
		if len(cmds) != 1 {
			t.Fatalf("%d commands, want 1", len(cmds))
		}
		return cmds[0]
	}
	cases := []struct {
		name  string
		cmd   Command
		actor *event.Actor
		want  []byte
	}{
		{"set", SetProperties("d1", props), actor,
			oldEnvelope(id, now, event.Set, "d1", props, nil, nil, actor)},
		{"set empty", SetProperties("d1", map[string]any{}), actor,
			oldEnvelope(id, now, event.Set, "d1", map[string]any{}, nil, nil, actor)},
		{"update property", SetProperties("d1", map[string]any{"k": json.Number("1e3")}), actor,
			oldEnvelope(id, now, event.Set, "d1", map[string]any{"k": json.Number("1e3")}, nil, nil, actor)},
		{"delete property", DeleteProperty("d1", "plan"), actor,
			oldEnvelope(id, now, event.DeletePersonProperty, "d1", nil, []string{"plan"}, nil, actor)},
		{"delete person", DeletePerson("d1", 42, false), actor,
			oldEnvelope(id, now, event.DeletePerson, "d1", nil, nil, map[string]any{event.PropPersonID: uint64(42), event.PropDeleteEvents: false}, actor)},
		{"delete person and events", DeletePerson("d1", 42, true), actor,
			oldEnvelope(id, now, event.DeletePerson, "d1", nil, nil, map[string]any{event.PropPersonID: uint64(42), event.PropDeleteEvents: true}, actor)},
		{"delete events", DeletePersonEvents("d1", 42), actor,
			oldEnvelope(id, now, event.DeletePersonEvents, "d1", nil, nil, map[string]any{event.PropPersonID: uint64(42)}, actor)},
		{"split", one(SplitPerson(42, "main", ids)), actor,
			oldEnvelope(id, now, event.SplitPerson, "main", nil, nil, map[string]any{event.PropPersonID: uint64(42),
				event.PropSplitIDs: []any{"a", "b\"", "<c>"}, event.PropSplitMainID: "main"}, actor)},
		{"reset distinct id", ResetDistinctID("d1"), actor,
			oldEnvelope(id, now, event.ResetPersonDistinctID, "d1", nil, nil, nil, actor)},
		{"add to cohort", one(AddToStaticCohort(9, ids)), actor,
			oldEnvelope(id, now, event.AddToStaticCohort, "$cohort_9", nil, nil, map[string]any{event.PropCohortID: uint64(9), event.PropCohortDistinctIDs: ids}, actor)},
		{"remove from cohort", one(RemoveFromStaticCohort(9, ids)), actor,
			oldEnvelope(id, now, event.RemoveFromStaticCohort, "$cohort_9", nil, nil, map[string]any{event.PropCohortID: uint64(9), event.PropCohortDistinctIDs: ids}, actor)},
		{"transformations", SetTransformations(refsJSON), nil,
			oldEnvelope(id, now, event.SetTransformations, "$transformations", nil, nil, map[string]any{event.PropTransformations: refs}, nil)},
		{"no transformations", SetTransformations(json.RawMessage(`[]`)), nil,
			oldEnvelope(id, now, event.SetTransformations, "$transformations", nil, nil, map[string]any{event.PropTransformations: []ref{}}, nil)},
	}
	for _, c := range cases {
		got, err := c.cmd.Envelope(id, now, c.actor)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != string(c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		// The ingester reads it as the command it is.
		ev, err := event.Parse(got)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ev.Event != c.cmd.Event || ev.DistinctID != c.cmd.DistinctID {
			t.Errorf("%s: parsed as %q by %q", c.name, ev.Event, ev.DistinctID)
		}
	}
}

func TestSplitPersonChunks(t *testing.T) {
	if cmds := SplitPerson(1, "m", nil); cmds != nil {
		t.Fatalf("no ids: %d commands", len(cmds))
	}
	moved := make([]string, 2*event.MaxSplitPerEvent+1)
	for i := range moved {
		moved[i] = "d" + strconv.Itoa(i)
	}
	cmds := SplitPerson(1, "m", moved)
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want 3", len(cmds))
	}
	var all []string
	for _, c := range cmds {
		chunk := c.properties[1].value.([]string)
		if len(chunk) > event.MaxSplitPerEvent || c.DistinctID != "m" {
			t.Fatalf("chunk of %d under %q", len(chunk), c.DistinctID)
		}
		all = append(all, chunk...)
	}
	if strings.Join(all, ",") != strings.Join(moved, ",") {
		t.Fatal("the chunks are not the ids in order")
	}
}

func TestCohortCommandsChunks(t *testing.T) {
	if cmds := AddToStaticCohort(1, nil); cmds != nil {
		t.Fatalf("no ids: %d commands", len(cmds))
	}
	// By count: MaxCohortIDsPerEvent short ids a command.
	short := make([]string, event.MaxCohortIDsPerEvent+1)
	for i := range short {
		short[i] = strconv.Itoa(i)
	}
	if cmds := AddToStaticCohort(1, short); len(cmds) != 2 || len(cmds[0].properties[1].value.([]string)) != event.MaxCohortIDsPerEvent {
		t.Fatalf("by count: %d commands", len(cmds))
	}
	// By size: ids of 400 quotes, each 802 bytes as JSON, fill
	// maxCohortIDBytes before MaxCohortIDsPerEvent.
	long := make([]string, 700)
	for i := range long {
		long[i] = strings.Repeat(`"`, 399) + strconv.Itoa(i%10)
	}
	cmds := RemoveFromStaticCohort(1, long)
	if len(cmds) < 2 {
		t.Fatalf("by size: %d commands", len(cmds))
	}
	n := 0
	for _, c := range cmds {
		data, err := c.Envelope("0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00", time.Now(), &event.Actor{})
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > event.MaxSize {
			t.Fatalf("a command of %d bytes, over %d", len(data), event.MaxSize)
		}
		n += len(c.properties[1].value.([]string))
	}
	if n != len(long) {
		t.Fatalf("%d ids in the commands, want %d", n, len(long))
	}
}
