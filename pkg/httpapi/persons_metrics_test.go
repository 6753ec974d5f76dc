package httpapi

import (
	"fmt"
	"net/url"
	"testing"
)

// listSamples reads api_persons_list_seconds' sample count by filter label.
func (e *env) listSamples() map[string]uint64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "api_persons_list_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "filter" {
					out[l.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// TestListLatencyByFilterKind: each JSON list page is observed once under
// the kind of its filter; a property filter wins over indexed ones, a
// refused request and a CSV export are not list pages.
func TestListLatencyByFilterKind(t *testing.T) {
	e := newEnv(t)
	seed(e)
	prop := "properties=" + url.QueryEscape(`[{"key":"plan","value":"pro","operator":"exact","type":"person"}]`)
	for _, q := range []string{"", "limit=2", "distinct_id=p1", "email=two@other.org", "search=ACME",
		prop, prop + "&email=two@other.org", "properties=" + url.QueryEscape(`{not json`), "format=csv"} {
		e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?%s", e.projectA.ID, q))
	}
	got := e.listSamples()
	want := map[string]uint64{"none": 2, "indexed": 3, "property": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("api_persons_list_seconds samples by filter: %v, want %v", got, want)
	}
}
