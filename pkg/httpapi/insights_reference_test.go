package httpapi

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wActor is one person of an actor answer.
type wActor struct {
	id    uint64
	ids   []string
	value *float64
}

// fetchAll pages through an actor route with a small limit until next
// runs out, checks each page's order, and checks that the CSV export
// (no limit) holds the same persons and values in the same order.
func (w *aWorld) fetchAll(t *testing.T, route string, q url.Values) []wActor {
	t.Helper()
	e := w.e
	q = cloneValues(q)
	q.Set("limit", "7")
	path := fmt.Sprintf("/api/projects/%d/persons/%s/?%s", e.projectA.ID, route, q.Encode())
	var all []wActor
	for pages := 0; path != ""; pages++ {
		if pages > 200 {
			t.Fatalf("%s: next never ends", route)
		}
		r := e.get(e.keyAll, path)
		if r.status != 200 {
			t.Fatalf("%s %s: %d %s", route, path, r.status, r.body)
		}
		var body struct {
			Results []struct {
				People []struct {
					ID          uint64   `json:"id"`
					DistinctIDs []string `json:"distinct_ids"`
					Value       *float64 `json:"value_at_data_point"`
				} `json:"people"`
			} `json:"results"`
			Next *string `json:"next"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		for _, p := range body.Results[0].People {
			ids := slices.Clone(p.DistinctIDs)
			sort.Strings(ids)
			all = append(all, wActor{id: p.ID, ids: ids, value: p.Value})
		}
		path = ""
		if body.Next != nil {
			u, _ := url.Parse(*body.Next)
			path = u.RequestURI()
		}
	}
	q.Del("limit")
	q.Set("format", "csv")
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%s/?%s", e.projectA.ID, route, q.Encode()))
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if r.status == 200 && len(r.body) == 0 && len(all) == 0 {
		return all // no persons: an empty export
	}
	if r.status != 200 || err != nil || len(rows) == 0 {
		t.Fatalf("%s csv: %d %v %s", route, r.status, err, r.body)
	}
	idCol, valCol := slices.Index(rows[0], "id"), slices.Index(rows[0], "value_at_data_point")
	if len(rows)-1 != len(all) {
		t.Fatalf("%s csv: %d rows, pages %d", route, len(rows)-1, len(all))
	}
	for i, row := range rows[1:] {
		if row[idCol] != strconv.FormatUint(all[i].id, 10) ||
			(valCol >= 0 && all[i].value != nil && row[valCol] != strconv.FormatFloat(*all[i].value, 'f', -1, 64)) {
			t.Fatalf("%s csv row %d: %v, json %+v", route, i, row, all[i])
		}
	}
	return all
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// compare checks an answer against the reference: the same persons (each
// with all its distinct ids, once), the same values when want has them,
// ordered by value descending (valued) then id.
func compare(t *testing.T, label string, got []wActor, want map[*wPerson]float64, valued bool) {
	t.Helper()
	byKey := map[string]*wPerson{}
	for p := range want {
		byKey[p.key()] = p
	}
	seen := map[string]bool{}
	for i, a := range got {
		k := a.ids[0]
		p := byKey[k]
		if p == nil {
			t.Errorf("%s: unexpected person %v", label, a.ids)
			continue
		}
		if seen[k] {
			t.Errorf("%s: person %v twice", label, a.ids)
		}
		seen[k] = true
		ids := slices.Clone(p.ids)
		sort.Strings(ids)
		if !slices.Equal(ids, a.ids) {
			t.Errorf("%s: person %v, want distinct ids %v", label, a.ids, ids)
		}
		if valued && (a.value == nil || !near(*a.value, want[p])) {
			t.Errorf("%s: %v value %v, want %v", label, a.ids, a.value, want[p])
		}
		if i > 0 {
			prev := got[i-1]
			ok := prev.id < a.id
			if valued && *prev.value != *a.value {
				ok = *prev.value > *a.value
			}
			if !ok {
				t.Errorf("%s: order: %v then %v", label, prev, a)
			}
		}
	}
	if len(seen) != len(want) {
		var missing []string
		for k := range byKey {
			if !seen[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		t.Errorf("%s: %d persons, want %d; missing %v", label, len(seen), len(want), missing)
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// refTrends is the reference of a trends point: the persons with a
// matching event in [from, to) and the number of those events.
func (w *aWorld) refTrends(m match, from, to time.Time) map[*wPerson]float64 {
	out := map[*wPerson]float64{}
	for p, xs := range w.per(m, from, to) {
		out[p] = float64(len(xs))
	}
	return out
}

// refStickiness: the persons whose matching events in [from, to) fall in
// exactly n intervals.
func (w *aWorld) refStickiness(iv string, m match, from, to time.Time, n int) map[*wPerson]float64 {
	out := map[*wPerson]float64{}
	for p, xs := range w.per(m, from, to) {
		b := map[time.Time]bool{}
		for _, x := range xs {
			b[w.bucket(iv, x.at)] = true
		}
		if len(b) == n {
			out[p] = 0
		}
	}
	return out
}

// refLifecycle: the persons whose status at the interval of target is
// typ, looking at events in [from - 1 interval, to) (reference §4).
func (w *aWorld) refLifecycle(iv string, m match, from, to, target time.Time, typ string) map[*wPerson]float64 {
	out := map[*wPerson]float64{}
	tb := w.bucket(iv, target)
	pb := step(iv, tb, -1)
	for p, xs := range w.per(m, step(iv, from, -1), to) {
		active := map[time.Time]bool{}
		first := time.Time{}
		for _, x := range xs {
			b := w.bucket(iv, x.at)
			active[b] = true
			if first.IsZero() || b.Before(first) {
				first = b
			}
		}
		isNew := active[tb] && first.Equal(tb) && w.bucket(iv, p.created).Equal(tb)
		var status string
		switch {
		case isNew:
			status = "new"
		case active[tb] && active[pb]:
			status = "returning"
		case active[tb]:
			status = "resurrecting"
		case active[pb]:
			status = "dormant"
		}
		if status == typ {
			out[p] = 0
		}
	}
	return out
}

// TestActorsReference compares trends, stickiness and lifecycle at every
// interval with the reference over the generated history.
func TestActorsReference(t *testing.T) {
	w := newWorld(t)
	// Every kind of answer must be non-empty somewhere, or the comparison
	// proves nothing.
	nonEmpty := map[string]int{}
	check := func(kind, label string, got []wActor, want map[*wPerson]float64, valued bool) {
		t.Helper()
		compare(t, label, got, want, valued)
		nonEmpty[kind] += len(want)
	}
	defer func() {
		for _, k := range []string{"trends", "trends any", "dau", "weekly_active", "monthly_active", "stickiness", "new", "returning", "resurrecting", "dormant"} {
			if nonEmpty[k] == 0 {
				t.Errorf("no %s persons anywhere: the history does not exercise it", k)
			}
		}
	}()
	pageview := eventNamed("$pageview")
	series := `[{"id":"$pageview","type":"events","order":0}]`
	// Points: local day starts (the DST day, a Sunday/Monday edge, a
	// month start), weeks, months, and hours around the DST change and
	// local midnight (with explicit offsets where the hour repeats).
	points := map[string][]string{
		"day":   {"2026-10-05", "2026-10-24", "2026-10-25", "2026-10-26", "2026-11-01", "2026-11-08"},
		"week":  {"2026-10-12", "2026-10-25", "2026-10-26", "2026-11-02"},
		"month": {"2026-10-01", "2026-11-15"},
		"hour":  {"2026-10-24T23:00:00", "2026-10-25T00:00:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00", "2026-10-12T00:00:00"},
	}
	parse := func(s string) time.Time {
		for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
			if v, err := time.ParseInLocation(layout, s, w.loc); err == nil {
				return v
			}
		}
		t.Fatalf("bad point %s", s)
		return time.Time{}
	}
	for iv, list := range points {
		for _, pt := range list {
			from := w.bucket(iv, parse(pt))
			to := step(iv, from, 1)
			q := params("events", series, "entity_id", "$pageview", "entity_type", "events", "interval", iv, "date_from", pt, "date_to", pt)
			check("trends", "trends "+iv+" "+pt, w.fetchAll(t, "trends", q), w.refTrends(pageview, from, to), true)
			q.Set("entity_type", "events")
			q.Del("entity_id")
			q.Del("events")
			check("trends any", "trends any "+iv+" "+pt, w.fetchAll(t, "trends", q), w.refTrends(eventNamed(""), from, to), true)
		}
	}
	// dau counts like total; weekly/monthly active: the persons active in
	// the 7 (30) days ending with the point's day.
	for _, pt := range []string{"2026-10-25", "2026-11-03"} {
		d := parse(pt)
		for math, days := range map[string]int{"dau": 1, "weekly_active": 7, "monthly_active": 30} {
			s := fmt.Sprintf(`[{"id":"$pageview","type":"events","order":0,"math":%q}]`, math)
			q := params("events", s, "entity_id", "$pageview", "entity_math", math, "date_from", pt, "date_to", pt)
			want := w.refTrends(pageview, d.AddDate(0, 0, 1-days), d.AddDate(0, 0, 1))
			check(math, "trends "+math+" "+pt, w.fetchAll(t, "trends", q), want, true)
			// The frontend asks for date_from = the point + 1 day.
			q.Set("date_from", d.AddDate(0, 0, 1).Format("2006-01-02"))
			if math != "dau" {
				check(math, "trends "+math+" "+pt+" (frontend)", w.fetchAll(t, "trends", q), want, true)
			}
		}
	}
	ranges := map[string][2]string{
		"day":   {"2026-10-19", "2026-10-28"},
		"week":  {"2026-10-05", "2026-11-08"},
		"month": {"2026-10-05", "2026-11-08"},
		"hour":  {"2026-10-24T22:00:00", "2026-10-25T04:00:00"},
	}
	for iv, rg := range ranges {
		from, to := w.bucket(iv, parse(rg[0])), step(iv, w.bucket(iv, parse(rg[1])), 1)
		for n := 1; n <= 5; n++ {
			q := params("events", series, "entity_id", "$pageview", "interval", iv, "date_from", rg[0], "date_to", rg[1], "stickiness_days", strconv.Itoa(n))
			check("stickiness", fmt.Sprintf("stickiness %s %d", iv, n), w.fetchAll(t, "stickiness", q), w.refStickiness(iv, pageview, from, to, n), false)
		}
		for _, pt := range append(points[iv], rg[0], rg[1]) {
			for _, typ := range []string{"new", "returning", "resurrecting", "dormant"} {
				q := params("events", series, "interval", iv, "date_from", rg[0], "date_to", rg[1], "target_date", pt, "lifecycle_type", typ)
				want := w.refLifecycle(iv, pageview, from, to, parse(pt), typ)
				check(typ, fmt.Sprintf("lifecycle %s %s %s", iv, pt, typ), w.fetchAll(t, "lifecycle", q), want, false)
			}
		}
	}
}
