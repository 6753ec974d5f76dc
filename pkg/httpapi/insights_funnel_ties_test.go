package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"
)

// Same-second ties at every step position, for the ordered funnel's
// windowFunnel path (insight/funnel_fast.go) and the array path beside it:
// persons whose events crowd into a few seconds (several events, of one or
// several steps, in one second; published in random order), funnels whose
// steps run against the names' sort order (the events table's order, so
// the order rows arrive in) and along it, windows of 1 and 2 seconds whose
// edges fall on those seconds, and a funnel repeating a step (its events
// can match two steps: the array path). Each answer equals the reference
// over the events sorted by time, then step (earlier steps first).
func TestFunnelSameSecondTies(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewSource(11))
	base := day("2022-05-02", 10)
	names := []string{"a", "b", "c"}
	var evs []ev
	byPerson := map[string][]refEvent{}
	for i := range 60 {
		id := fmt.Sprintf("t%02d", i)
		for range 2 + rng.Intn(6) {
			sec := rng.Intn(4)
			x := ev{name: names[rng.Intn(len(names))], distinctID: id, at: base.Add(time.Duration(i*100+sec) * time.Second)}
			evs = append(evs, x)
			byPerson[id] = append(byPerson[id], refEvent{x.name, x.at})
		}
	}
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	e.publishEvents(e.projectA.ID, evs...)
	for _, steps := range [][]string{{"a", "b", "c"}, {"c", "b", "a"}, {"b", "c", "a"}, {"a", "a", "b"}} {
		var entities []map[string]any
		for i, s := range steps {
			entities = append(entities, map[string]any{"id": s, "order": i})
		}
		js, _ := json.Marshal(entities)
		for _, window := range []int{1, 2, 3600} {
			levels := map[string]int{}
			for id, all := range byPerson {
				levels[id] = refLevel(byTimeThenStep(all, steps), steps, "ordered", time.Duration(window)*time.Second, "", nil)
			}
			p := params("events", string(js), "date_from", "2022-05-01", "date_to", "2022-05-03",
				"funnel_window_interval", fmt.Sprint(window), "funnel_window_interval_unit", "second", "limit", "25")
			for _, step := range []int{1, 2, 3, -2, -3} {
				want := atFunnelStep(levels, step)
				p.Set("funnel_step", fmt.Sprint(step))
				if got := e.funnelPersons("funnel", p); !slices.Equal(got, want) {
					t.Errorf("steps %v, window %d s, funnel_step=%d:\n got %v\nwant %v", steps, window, step, got, want)
				}
			}
		}
	}
}

// byTimeThenStep sorts a person's events by time, then, within one
// second, by the first step each matches (events of no step last).
func byTimeThenStep(all []refEvent, steps []string) []refEvent {
	rank := func(name string) int {
		if i := slices.Index(steps, name); i >= 0 {
			return i
		}
		return len(steps)
	}
	out := slices.Clone(all)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.Before(out[j].at)
		}
		return rank(out[i].name) < rank(out[j].name)
	})
	return out
}
