package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// aWorld is a generated event history of one project in Europe/Berlin
// (five weeks across the end of DST on 2026-10-25 and a month change,
// events either side of local midnight, merges through $identify in the
// middle, one person deleted through the API) and a small model of what
// the fold makes of it, written apart from the SQL: the reference the
// actor routes are compared with.
type aWorld struct {
	e      *env
	loc    *time.Location
	events []wEvent            // captured events, in publish (time) order
	owner  map[string]*wPerson // distinct id -> current person
}

type wEvent struct {
	name, did string
	sent      time.Time // as published
	at        time.Time // as stored: whole seconds
	props     map[string]any
	set       map[string]any
}

type wPerson struct {
	ids        []string
	props      map[string]any
	created    time.Time
	identified bool
	deleted    bool
}

// worldDays are the generated days from Monday 2026-10-05 (local).
const worldDays = 35

func newWorld(t *testing.T) *aWorld {
	e := newEnv(t)
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if r := e.send("PATCH", e.keyAll, fmt.Sprintf("/api/projects/%d/", e.projectA.ID), `{"timezone":"Europe/Berlin"}`); r.status != 200 {
		t.Fatalf("PATCH timezone: %d %s", r.status, r.body)
	}
	w := &aWorld{e: e, loc: loc, owner: map[string]*wPerson{}}
	w.generate(rand.New(rand.NewPCG(10, 2026)))
	evs := make([]ev, len(w.events))
	for i, x := range w.events {
		evs[i] = ev{name: x.name, distinctID: x.did, at: x.sent, props: x.props}
		if x.set != nil {
			evs[i].extra = `"$set":` + mustJSON(x.set)
		}
	}
	e.publishEvents(e.projectA.ID, evs...)
	w.fold()
	// Delete the survivor of a merge through the API.
	gone := w.owner["u024"]
	list := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/?distinct_id=u024", e.projectA.ID)).json(t)["results"].([]any)
	if len(list) != 1 {
		t.Fatalf("u024: %v", list)
	}
	if r := e.do("DELETE", e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%v/", e.projectA.ID, list[0].(map[string]any)["id"])); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	gone.deleted = true
	return w
}

func (w *aWorld) day(d int) time.Time {
	return time.Date(2026, 10, 5+d, 0, 0, 0, 0, w.loc)
}

// generate makes the history: 240 distinct ids u000..u239 active on
// random days from their first, at random local times with a fifth of
// them at the edges of local midnight, plus events in both 02:30 hours
// of 2026-10-25; merges on day 17.
func (w *aWorld) generate(r *rand.Rand) {
	browsers := []string{"Chrome", "Firefox", "Safari", ""}
	plans := []string{"free", "pro", "team"}
	add := func(name, did string, at time.Time, props map[string]any) *wEvent {
		if props == nil {
			props = map[string]any{}
		}
		w.events = append(w.events, wEvent{name: name, did: did, sent: at, at: at.Truncate(time.Second), props: props})
		return &w.events[len(w.events)-1]
	}
	for i := range 240 {
		did := fmt.Sprintf("u%03d", i)
		first := r.IntN(worldDays)
		p := 0.15 + r.Float64()*0.5
		n := 0
		for d := first; d < worldDays; d++ {
			if d != first && r.Float64() > p {
				continue
			}
			for range 1 + r.IntN(3) {
				at := w.day(d).Add(time.Duration(r.IntN(86400)) * time.Second)
				switch r.IntN(10) {
				case 0:
					at = w.day(d + 1).Add(-500 * time.Millisecond) // 23:59:59.5
				case 1:
					at = w.day(d) // 00:00:00
				}
				if d == 20 && r.IntN(4) == 0 { // both 02:30 of the DST change
					at = time.Date(2026, 10, 25, r.IntN(2), 30, 0, 0, time.UTC)
				}
				props := map[string]any{}
				if b := browsers[r.IntN(4)]; b != "" {
					props["$browser"] = b
				}
				name := "$pageview"
				switch k := r.IntN(10); {
				case k < 2:
					name = "purchase"
					switch r.IntN(5) {
					case 0: // no amount
					case 1:
						props["amount"] = fmt.Sprint(r.IntN(20)) // numeric text counts as a number
					default:
						props["amount"] = float64(r.IntN(200)) / 2
					}
				case k < 3:
					name = "signup"
				}
				x := add(name, did, at, props)
				if n == 0 {
					x.set = map[string]any{"plan": plans[i%3], "age": 18 + i%50}
					if i%3 != 0 {
						x.set["email"] = fmt.Sprintf("u%03d@%s.com", i, []string{"Example", "mail"}[i%2])
					}
					if i%4 == 0 {
						x.set["name"] = fmt.Sprintf("Person %d", i)
					}
				} else if n == 3 && i%11 == 0 {
					x.set = map[string]any{"plan": "team"} // current, not at event time
				}
				n++
			}
		}
	}
	merge := w.day(17).Add(12 * time.Hour)
	for i := 0; i < 240; i += 12 {
		add("$identify", fmt.Sprintf("u%03d", i), merge, map[string]any{"$anon_distinct_id": fmt.Sprintf("u%03d", i+1)})
		add("$identify", fmt.Sprintf("u%03d-known", i+5), merge.Add(time.Minute), map[string]any{"$anon_distinct_id": fmt.Sprintf("u%03d", i+5)})
		add("$pageview", fmt.Sprintf("u%03d-known", i+5), w.day(18+i%10).Add(9*time.Hour), nil)
	}
	// A refused merge: u036 is identified by then.
	add("$identify", "u038", merge.Add(time.Hour), map[string]any{"$anon_distinct_id": "u036"})
	sort.SliceStable(w.events, func(a, b int) bool { return w.events[a].at.Before(w.events[b].at) })
}

// fold is the model of the ingester's fold for these events: a new
// distinct id makes a person created at the event; $set overwrites;
// $identify merges the person of $anon_distinct_id into the event's
// (refused when that person is identified), keeping the earlier
// created_at and the target's properties over the source's.
func (w *aWorld) fold() {
	create := func(did string, at time.Time) *wPerson {
		p := &wPerson{ids: []string{did}, props: map[string]any{}, created: at}
		w.owner[did] = p
		return p
	}
	for _, x := range w.events {
		p := w.owner[x.did]
		anon, _ := x.props["$anon_distinct_id"].(string)
		if x.name == "$identify" && anon != "" && anon != x.did {
			src := w.owner[anon]
			switch {
			case p == nil && src == nil:
				p = create(x.did, x.at)
				p.ids = append(p.ids, anon)
				w.owner[anon] = p
			case p == nil:
				p = src
				p.ids = append(p.ids, x.did)
				w.owner[x.did] = p
			case src == nil:
				p.ids = append(p.ids, anon)
				w.owner[anon] = p
			case src != p && !src.identified:
				merged := map[string]any{}
				for k, v := range src.props {
					merged[k] = v
				}
				for k, v := range p.props {
					merged[k] = v
				}
				p.props = merged
				if src.created.Before(p.created) {
					p.created = src.created
				}
				for _, d := range src.ids {
					w.owner[d] = p
				}
				p.ids = append(p.ids, src.ids...)
			}
			p.identified = true
		}
		if p == nil {
			p = create(x.did, x.at)
		}
		for k, v := range x.set {
			p.props[k] = v
		}
	}
}

// live is the current person of a distinct id, nil when deleted.
func (w *aWorld) live(did string) *wPerson {
	p := w.owner[did]
	if p == nil || p.deleted {
		return nil
	}
	return p
}

// key names a person by its smallest distinct id.
func (p *wPerson) key() string { return slices.Min(p.ids) }

// bucket is the start of t's interval in the project's zone, computed
// without the code under test: Berlin's offsets are whole hours, so a
// local hour is a UTC hour.
func (w *aWorld) bucket(iv string, t time.Time) time.Time {
	l := t.In(w.loc)
	switch iv {
	case "hour":
		return t.UTC().Truncate(time.Hour)
	case "week":
		wd := (int(l.Weekday()) + 6) % 7
		return time.Date(l.Year(), l.Month(), l.Day()-wd, 0, 0, 0, 0, w.loc)
	case "month":
		return time.Date(l.Year(), l.Month(), 1, 0, 0, 0, 0, w.loc)
	}
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, w.loc)
}

func step(iv string, b time.Time, n int) time.Time {
	switch iv {
	case "hour":
		return b.Add(time.Duration(n) * time.Hour)
	case "week":
		return b.AddDate(0, 0, 7*n)
	case "month":
		return b.AddDate(0, n, 0)
	}
	return b.AddDate(0, 0, n)
}

// match is a predicate of the reference over an event and its current
// person.
type match func(x wEvent, p *wPerson) bool

func eventNamed(name string) match {
	return func(x wEvent, _ *wPerson) bool { return name == "" || x.name == name }
}

// per collects, for each live person, the matching events in [from, to).
func (w *aWorld) per(m match, from, to time.Time) map[*wPerson][]wEvent {
	out := map[*wPerson][]wEvent{}
	for _, x := range w.events {
		p := w.live(x.did)
		if p == nil || x.at.Before(from) || !x.at.Before(to) || !m(x, p) {
			continue
		}
		out[p] = append(out[p], x)
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
