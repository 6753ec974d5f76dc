package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/url"
	"slices"
	"sort"
	"testing"
	"time"
)

// fbEvent is a reference event with its $browser ("" when it has none).
type fbEvent struct {
	refEvent
	value string
}

func plain(evs []fbEvent) []refEvent {
	out := make([]refEvent, len(evs))
	for i, x := range evs {
		out[i] = x.refEvent
	}
	return out
}

// refBucketLevel is the reference of one breakdown bucket (reference §6),
// written apart from the SQL: in reports whether the person is in bucket
// v, level their level there.
//   - first_touch / last_touch: the value of the first (last) step event
//     having one, "" when none has; the level over all events.
//   - all_events: the funnel over the events carrying v only.
//   - step k: the person is in the bucket of each value on their step-k
//     events; there an event of step k counts only when it carries v (an
//     event of step k with another value is renamed out of the funnel, so
//     a strict funnel still sees it as "the next event").
func refBucketLevel(evs []fbEvent, steps []string, order string, window time.Duration, attribution string, k int, v string) (in bool, level int) {
	switch attribution {
	case "all_events":
		var kept []refEvent
		for _, x := range evs {
			if x.value == v {
				kept = append(kept, x.refEvent)
			}
		}
		l := refLevel(kept, steps, order, window, "", nil)
		return l > 0, l
	case "step":
		renamed := plain(evs)
		for i, x := range evs {
			if x.name == steps[k] {
				if x.value == v {
					in = true
				} else {
					renamed[i].name = "~other"
				}
			}
		}
		return in, refLevel(renamed, steps, order, window, "", nil)
	}
	bucket := ""
	for _, x := range evs {
		if slices.Contains(steps, x.name) && x.value != "" && (bucket == "" || attribution == "last_touch") {
			bucket = x.value
		}
	}
	return bucket == v, refLevel(plain(evs), steps, order, window, "", nil)
}

// A generated history whose events carry $browser Chrome, Safari or none:
// each attribution (first_touch, last_touch, all_events, step 0..2) and
// each bucket, for ordered, strict and unordered funnels and every
// funnel_step, against refBucketLevel; the first_touch buckets partition
// the funnel's persons; time_to_convert answers as steps; a cohort
// breakdown keeps the cohort's members.
func TestFunnelBreakdownGenerated(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewSource(11))
	base := day("2022-03-01", 0)
	names := []string{"a", "b", "c", "x"}
	browsers := []string{"Chrome", "Safari", ""}
	var evs []ev
	byPerson := map[string][]fbEvent{}
	add := func(owner string, x ev) {
		if b := browsers[rng.Intn(len(browsers))]; b != "" {
			x.props = map[string]any{"$browser": b}
		}
		evs = append(evs, x)
		v, _ := x.props["$browser"].(string)
		byPerson[owner] = append(byPerson[owner], fbEvent{refEvent{x.name, x.at}, v})
	}
	for i := range 36 {
		id := fmt.Sprintf("g%02d", i)
		used := map[int]bool{}
		for range 3 + rng.Intn(8) {
			sec := uniqueSecond(rng, used, 5*86400)
			add(id, ev{name: names[rng.Intn(len(names))], distinctID: id, at: base.Add(time.Duration(sec) * time.Second)})
		}
	}
	// mA does a, then identifies as mB, which does b and c: one person.
	add("mA", ev{name: "a", distinctID: "mA", at: day("2022-03-02", 10)})
	evs = append(evs, ev{name: "$identify", distinctID: "mB", at: day("2022-03-02", 11), props: map[string]any{"$anon_distinct_id": "mA"}})
	byPerson["mA"] = append(byPerson["mA"], fbEvent{refEvent{"$identify", day("2022-03-02", 11)}, ""})
	add("mA", ev{name: "b", distinctID: "mB", at: day("2022-03-02", 12)})
	add("mA", ev{name: "c", distinctID: "mB", at: day("2022-03-02", 13)})
	e.publishEvents(e.projectA.ID, evs...)

	from, to := day("2022-03-01", 0), day("2022-03-06", 0)
	for id, all := range byPerson {
		sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
		var in []fbEvent
		for _, x := range all {
			if !x.at.Before(from) && x.at.Before(to) {
				in = append(in, x)
			}
		}
		byPerson[id] = in
	}
	steps := []string{"a", "b", "c"}
	entities, _ := json.Marshal([]map[string]any{{"id": "a", "order": 0}, {"id": "b", "order": 1}, {"id": "c", "order": 2}})
	type attr struct {
		name string
		step int
	}
	attrs := []attr{{"first_touch", 0}, {"last_touch", 0}, {"all_events", 0}, {"step", 0}, {"step", 1}, {"step", 2}}
	for _, order := range []string{"ordered", "strict", "unordered"} {
		window := 48 * time.Hour
		if order == "strict" {
			window = 5 * 24 * time.Hour
		}
		for _, at := range attrs {
			if order != "ordered" && at.name != "all_events" && at != (attr{"step", 1}) {
				continue
			}
			union := map[string]bool{}
			for _, v := range browsers {
				for _, step := range []int{1, 2, 3, -2, -3} {
					var want []string
					for id, all := range byPerson {
						in, l := refBucketLevel(all, steps, order, window, at.name, at.step, v)
						if in && ((step > 0 && l >= step) || (step < 0 && l == -step-1)) {
							want = append(want, id)
						}
					}
					sort.Strings(want)
					p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_order_type", order,
						"funnel_window_interval", fmt.Sprint(int(window.Hours())), "funnel_window_interval_unit", "hour", "limit", "15",
						"breakdown", "$browser", "breakdown_attribution_type", at.name, "breakdown_attribution_value", fmt.Sprint(at.step),
						"funnel_step_breakdown", v, "funnel_step", fmt.Sprint(step))
					got := e.funnelPersons("funnel", p)
					if !slices.Equal(got, want) {
						t.Errorf("%s %s/%d bucket %q funnel_step=%d:\n got %v\nwant %v", order, at.name, at.step, v, step, got, want)
					}
					if step == 1 && at.name == "first_touch" {
						for _, id := range got {
							if union[id] {
								t.Errorf("first_touch: %s in two buckets", id)
							}
							union[id] = true
						}
					}
				}
			}
			if at.name == "first_touch" {
				p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_order_type", order,
					"funnel_window_interval", fmt.Sprint(int(window.Hours())), "funnel_window_interval_unit", "hour", "funnel_step", "1")
				all := e.funnelPersons("funnel", p)
				if len(all) != len(union) || len(all) == 0 {
					t.Errorf("%s: first_touch buckets hold %d persons, the funnel %d", order, len(union), len(all))
				}
			}
		}
	}

	// time_to_convert is answered as steps.
	for _, step := range []string{"1", "2", "3", "-2", "-3"} {
		p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_window_days", "2", "funnel_step", step)
		steps := e.funnelPersons("funnel", p)
		p.Set("funnel_viz_type", "time_to_convert")
		if ttc := e.funnelPersons("funnel", p); !slices.Equal(ttc, steps) {
			t.Errorf("time_to_convert funnel_step=%s: %v, steps %v", step, ttc, steps)
		}
	}

	// A cohort breakdown: the members of the bucket's cohort; "all" (or 0)
	// every person.
	members := []string{"g00", "g01", "g02", "g03", "g04", "g05", "g06", "g07", "mB"}
	body, _ := json.Marshal(map[string]any{"name": "some", "is_static": true, "distinct_ids": members})
	r := e.send("POST", e.keyAll, fmt.Sprintf("/api/projects/%d/cohorts/", e.projectA.ID), string(body))
	if r.status != 201 {
		t.Fatalf("cohort: %d %s", r.status, r.body)
	}
	cohort := fmt.Sprint(r.json(t)["id"])
	for _, step := range []int{1, 2, -2} {
		p := params("events", string(entities), "date_from", "2022-03-01", "date_to", "2022-03-05", "funnel_window_days", "2",
			"funnel_step", fmt.Sprint(step), "breakdown_type", "cohort", "breakdown", "["+cohort+`,"all"]`)
		p.Set("funnel_step_breakdown", "all")
		everyone := e.funnelPersons("funnel", p)
		var want []string
		for _, id := range everyone {
			if slices.Contains(members, id) || id == "mA" { // mB's person
				want = append(want, id)
			}
		}
		for _, bucket := range []string{"0", "all"} {
			p.Set("funnel_step_breakdown", bucket)
			if got := e.funnelPersons("funnel", p); !slices.Equal(got, everyone) {
				t.Errorf("cohort all (%s), funnel_step=%d: %v, want %v", bucket, step, got, everyone)
			}
		}
		p.Set("funnel_step_breakdown", cohort)
		if got := e.funnelPersons("funnel", p); !slices.Equal(got, want) || len(everyone) == len(want) {
			t.Errorf("cohort %s funnel_step=%d: %v, want %v (of %v)", cohort, step, got, want, everyone)
		}
	}
	base2 := fmt.Sprintf("/api/projects/%d/persons/funnel/?events=%s&funnel_step=1&breakdown_type=cohort", e.projectA.ID, url.QueryEscape(string(entities)))
	e.wantAttrs(base2, map[string]string{
		"&breakdown=[999999]&funnel_step_breakdown=999999":    "funnel_step_breakdown",
		"&breakdown=[" + cohort + "]&funnel_step_breakdown=7": "funnel_step_breakdown",
		"&breakdown=[\"x\"]&funnel_step_breakdown=1":          "breakdown",
	})
}
