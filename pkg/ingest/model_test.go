package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/testenv"
)

// model is a second, deliberately naive implementation of the ingestion
// rules (docs/events.md): one event at a time, no batching, no versions,
// no cache. The ingester must end in the same live persons, with the same
// uuids.
type model struct {
	project uint64
	persons map[uint64]*modelPerson
	owner   map[string]uint64 // distinct id -> person (0: none)
	// members of static cohorts: "cohort distinct_id" -> owner when added.
	members map[string]uint64
	// owned remembers every distinct id that ever had an owner: such an
	// id (and every id a split moves) gives a new person the uuid of the
	// second rule, from the id and the creating event's sequence.
	owned map[string]bool
	// reused counts the persons given the second rule's uuid.
	reused int
}

type modelPerson struct {
	uuid       uuid.UUID
	props      map[string]any
	ids        []string
	identified bool
}

// The uuid5 namespaces of docs/events.md, written out here rather than
// taken from pkg/person, so the model checks the documented rule.
var (
	modelFirstNS = uuid.MustParse("932979b4-65c3-4424-8467-0b66ec27bc22")
	modelReuseNS = uuid.MustParse("bf236636-99cf-4203-8383-47a78bae0f6d")
)

func newModel(project uint64) *model {
	return &model{project: project, persons: map[uint64]*modelPerson{}, owner: map[string]uint64{}, owned: map[string]bool{}, members: map[string]uint64{}}
}

// own makes person id the owner of d.
func (m *model) own(d string, id uint64) { m.owner[d], m.owned[d] = id, true }

func (m *model) apply(seq uint64, ev event.Event) {
	get := func(d string) *modelPerson { return m.persons[m.owner[d]] }
	create := func(id uint64, d string, split bool) *modelPerson {
		u := uuid.NewSHA1(modelFirstNS, []byte(fmt.Sprintf("%d:%s", m.project, d)))
		if split || m.owned[d] {
			u = uuid.NewSHA1(modelReuseNS, []byte(fmt.Sprintf("%d:%s:%d", m.project, d, seq)))
			m.reused++
		}
		p := &modelPerson{uuid: u, props: map[string]any{}, ids: []string{d}}
		m.persons[id] = p
		m.own(d, id)
		return p
	}
	update := func(p *modelPerson) {
		for k, v := range ev.SetOnce {
			if _, ok := p.props[k]; !ok {
				p.props[k] = v
			}
		}
		for k, v := range ev.Set {
			p.props[k] = v
		}
		for _, k := range ev.Unset {
			delete(p.props, k)
		}
		if ev.Event == "$identify" {
			p.identified = true
		}
	}
	switch ev.Event {
	case "$add_to_static_cohort", "$remove_from_static_cohort":
		cohort := ev.Properties["$cohort_id"].(json.Number).String()
		for _, raw := range ev.Properties["$cohort_distinct_ids"].([]any) {
			key := cohort + " " + raw.(string)
			if ev.Event == "$remove_from_static_cohort" {
				delete(m.members, key)
			} else if owner := m.owner[raw.(string)]; owner != 0 {
				m.members[key] = owner
			}
		}
		return
	case "$delete_person":
		id, _ := ev.Properties["$person_id"].(json.Number).Int64()
		if p := m.persons[uint64(id)]; p != nil {
			for _, d := range p.ids {
				delete(m.owner, d)
			}
			delete(m.persons, uint64(id))
		}
		return
	case "$delete_person_events":
		// Queues the deletion of events; the person stays.
		return
	case "$reset_person_distinct_id":
		if p := get(ev.DistinctID); p != nil {
			p.ids = remove(p.ids, ev.DistinctID)
			delete(m.owner, ev.DistinctID)
		}
		return
	case "$split_person":
		id, _ := ev.Properties["$person_id"].(json.Number).Int64()
		p := m.persons[uint64(id)]
		if p == nil {
			return
		}
		for i, raw := range ev.Properties["$split_distinct_ids"].([]any) {
			d := raw.(string)
			if m.owner[d] == uint64(id) {
				p.ids = remove(p.ids, d)
				create(fold.SplitPersonID(seq, i), d, true)
			}
		}
		return
	}
	other := ""
	switch ev.Event {
	case "$identify":
		other, _ = ev.Properties["$anon_distinct_id"].(string)
	case "$create_alias", "$merge_dangerously":
		other, _ = ev.Properties["alias"].(string)
	}
	d := ev.DistinctID
	if other == "" || other == d || person.IllegalDistinctID(other) || person.IllegalDistinctID(d) {
		p := get(d)
		if p == nil {
			p = create(seq, d, false)
		}
		update(p)
		return
	}
	target, source := get(d), get(other)
	switch {
	case target == nil && source == nil:
		p := create(seq, d, false)
		p.ids = append(p.ids, other)
		m.own(other, seq)
		update(p)
	case target == nil:
		source.ids = append(source.ids, d)
		m.own(d, m.owner[other])
		update(source)
	case source == nil:
		target.ids = append(target.ids, other)
		m.own(other, m.owner[d])
		update(target)
	case source == target:
		update(target)
	case source.identified && ev.Event != "$merge_dangerously":
		update(target)
	default:
		merged := map[string]any{}
		for k, v := range source.props {
			merged[k] = v
		}
		for k, v := range target.props {
			merged[k] = v
		}
		target.props, target.identified = merged, true
		delete(m.persons, m.owner[other])
		for _, id := range source.ids {
			target.ids = append(target.ids, id)
			m.own(id, m.owner[d])
		}
		update(target)
	}
}

func remove(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

func (m *model) lines() []string {
	var out []string
	for id, p := range m.persons {
		ids := append([]string(nil), p.ids...)
		sort.Strings(ids)
		props, _ := json.Marshal(p.props)
		out = append(out, fmt.Sprintf("%d %s %v %s %v", id, p.uuid, ids, props, p.identified))
	}
	sort.Strings(out)
	return out
}

func TestIngesterMatchesTheNaiveModel(t *testing.T) {
	n := testenv.StartNATS(t, "")
	// The workload with resets of its ids mixed in, and ids seen again
	// after a delete, a reset or a split, which the uuid rule tells apart.
	var events []testenv.Message
	for i, msg := range testenv.Workload(17, 4000, 1500) {
		events = append(events, msg)
		if i%11 == 0 {
			events = append(events, testenv.Message{Command: true, Body: fmt.Sprintf(
				`{"event":"$reset_person_distinct_id","distinct_id":"u%d","properties":{"$actor":{"key_id":"k1","organization_id":"o1"}}}`, i%1500)})
		}
	}
	publishMessages(t, n.JS, 5, events)
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("model"), n.JS, store, uint64(len(events)))

	m := newModel(5)
	for i, msg := range events {
		raw := msg.Body
		// publish() filled uuid and timestamp; the model needs neither.
		ev, err := event.Parse([]byte(fmt.Sprintf(`{"uuid":"0190f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00","timestamp":"2026-01-01T00:00:00Z",%s`, raw[1:])))
		if err != nil {
			t.Fatal(err)
		}
		m.apply(uint64(i+1), ev)
	}
	var got []string
	err := store.EachPerson(context.Background(), chstore.ListQuery{ProjectID: 5}, func(p chstore.PersonRecord) error {
		ids := append([]string(nil), p.DistinctIDs...)
		sort.Strings(ids)
		props, _ := json.Marshal(p.Properties)
		got = append(got, fmt.Sprintf("%d %s %v %s %v", p.ID, p.UUID, ids, props, p.IsIdentified))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := m.lines()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ingester and model differ (%d vs %d persons):\n%s", len(got), len(want), testenv.FirstDiff(strings.Join(got, "\n"), strings.Join(want, "\n")))
	}
	if len(want) < 20 || m.reused < 20 {
		t.Fatalf("workload too small to mean much: %d persons, %d with a reused id's uuid", len(want), m.reused)
	}

	// Static cohort members: each with the owner it had when added.
	var members []string
	rows, err := store.Conn().Query(context.Background(), "SELECT toString(cohort_id), distinct_id, person_id FROM cohort_people FINAL WHERE project_id = 5 AND is_deleted = 0")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var cohort, d string
		var owner uint64
		if err := rows.Scan(&cohort, &d, &owner); err != nil {
			t.Fatal(err)
		}
		members = append(members, fmt.Sprintf("%s %s %d", cohort, d, owner))
	}
	rows.Close()
	var wantMembers []string
	for k, owner := range m.members {
		wantMembers = append(wantMembers, fmt.Sprintf("%s %d", k, owner))
	}
	sort.Strings(members)
	sort.Strings(wantMembers)
	if !reflect.DeepEqual(members, wantMembers) || len(wantMembers) < 10 {
		t.Fatalf("static cohort members differ (%d vs %d):\n%s", len(members), len(wantMembers), testenv.FirstDiff(strings.Join(members, "\n"), strings.Join(wantMembers, "\n")))
	}
}
