package httpapi

import (
	"slices"
	"testing"
)

// Reference §11.2 and §11.3: stickiness and trends of "watched movie".
func TestActorsWorkedStickinessTrends(t *testing.T) {
	e := newEnv(t)
	chrome := map[string]any{"$browser": "Chrome"}
	e.publishEvents(e.projectA.ID,
		ev{name: "watched movie", distinctID: "person1", at: day("2020-01-01", 12), props: chrome},
		ev{name: "watched movie", distinctID: "person2", at: day("2020-01-01", 12), props: chrome},
		ev{name: "watched movie", distinctID: "person2", at: day("2020-01-02", 12), props: chrome},
		ev{name: "watched movie", distinctID: "person2", at: day("2020-01-02", 13), props: chrome},
		ev{name: "watched movie", distinctID: "person3a", at: day("2020-01-01", 12), props: chrome},
		ev{name: "$identify", distinctID: "person3b", at: day("2020-01-01", 12), props: map[string]any{"$anon_distinct_id": "person3a"}},
		ev{name: "watched movie", distinctID: "person3b", at: day("2020-01-02", 12), props: chrome},
		ev{name: "watched movie", distinctID: "person3a", at: day("2020-01-03", 12), props: chrome},
		ev{name: "watched movie", distinctID: "person4", at: day("2020-01-05", 12), props: map[string]any{"$browser": "Safari"}},
	)
	series := `[{"id":"watched movie","type":"events","order":0}]`
	stick := func(n string, extra ...string) []string {
		p := params(append([]string{"events", series, "date_from", "2020-01-01", "date_to", "2020-01-08", "stickiness_days", n, "entity_id", "watched movie", "entity_type", "events"}, extra...)...)
		ids, _, _ := e.actors("stickiness", p)
		return ids
	}
	for n, want := range map[string][]string{"1": {"person1", "person4"}, "2": {"person2"}, "3": {"person3a"}} {
		if got := stick(n); !slices.Equal(got, want) {
			t.Errorf("stickiness_days=%s: %v, want %v", n, got, want)
		}
	}
	chromeSeries := `[{"id":"watched movie","type":"events","order":0,"properties":[{"key":"$browser","value":"Chrome"}]}]`
	if got := stick("1", "events", chromeSeries); !slices.Equal(got, []string{"person1"}) {
		t.Errorf("stickiness with entity filter: %v", got)
	}

	trends := func(d string, extra ...string) ([]string, []float64) {
		p := params(append([]string{"events", series, "date_from", d, "date_to", d, "entity_id", "watched movie", "entity_type", "events"}, extra...)...)
		ids, vals, _ := e.actors("trends", p)
		return ids, vals
	}
	if ids, vals := trends("2020-01-02"); !slices.Equal(ids, []string{"person2", "person3a"}) || !slices.Equal(vals, []float64{2, 1}) {
		t.Errorf("trends 01-02: %v %v", ids, vals)
	}
	if ids, _ := trends("2020-01-01"); !slices.Equal(ids, []string{"person1", "person2", "person3a"}) {
		t.Errorf("trends 01-01: %v", ids)
	}
	if ids, _ := trends("2020-01-05"); !slices.Equal(ids, []string{"person4"}) {
		t.Errorf("trends 01-05: %v", ids)
	}
	if ids, _ := trends("2020-01-05", "properties", `[{"key":"$browser","value":"Chrome"}]`); len(ids) != 0 {
		t.Errorf("trends 01-05 Chrome: %v", ids)
	}
}
