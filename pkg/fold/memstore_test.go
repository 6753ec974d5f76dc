package fold

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/event"
)

// memStore keeps the newest version of every row, the way a
// ReplacingMergeTree read with FINAL does. It is the fold's storage in
// unit tests; the ingester's integration tests use ClickHouse.
type memStore struct {
	persons map[personKey]PersonRow
	dids    map[didKey]DistinctIDRow
	// overrides are the rows the ingester writes to
	// person_distinct_id_overrides (DistinctIDRow.Overridden).
	overrides map[didKey]DistinctIDRow
	loads     int
	// projectLoads counts the projects read whole (LoadProject).
	projectLoads int
	// warnings are all the warnings written, in order.
	warnings []Warning
}

func newMemStore() *memStore {
	return &memStore{persons: map[personKey]PersonRow{}, dids: map[didKey]DistinctIDRow{}, overrides: map[didKey]DistinctIDRow{}}
}

func (m *memStore) write(b Batch) {
	m.warnings = append(m.warnings, b.Warnings...)
	for _, p := range b.Persons {
		k := personKey{p.ProjectID, p.ID}
		if old, ok := m.persons[k]; !ok || p.Version >= old.Version {
			m.persons[k] = p
		}
	}
	for _, d := range b.DistinctIDs {
		k := didKey{d.ProjectID, d.DistinctID}
		if old, ok := m.dids[k]; !ok || d.Version >= old.Version {
			m.dids[k] = d
		}
		if old, ok := m.overrides[k]; d.Overridden() && (!ok || d.Version >= old.Version) {
			m.overrides[k] = d
		}
	}
}

func (m *memStore) LoadDistinctIDs(_ context.Context, project uint64, ids []string) (map[string]DistinctIDRow, error) {
	m.loads++
	out := map[string]DistinctIDRow{}
	for _, id := range ids {
		if r, ok := m.dids[didKey{project, id}]; ok {
			out[id] = r
		}
	}
	return out, nil
}

func (m *memStore) LoadPersons(_ context.Context, project uint64, ids []uint64) (map[uint64]PersonRow, error) {
	m.loads++
	out := map[uint64]PersonRow{}
	for _, id := range ids {
		if r, ok := m.persons[personKey{project, id}]; ok {
			r.Properties = copyProps(r.Properties)
			r.DistinctIDs = append([]string(nil), r.DistinctIDs...)
			out[id] = r
		}
	}
	return out, nil
}

// LoadProject implements ProjectLoader: rows are counted by project, as
// the store counts them, and handed out in no particular order.
func (m *memStore) LoadProject(_ context.Context, project uint64, limit int, did func(DistinctIDRow), person func(PersonRow)) (bool, error) {
	var dids []DistinctIDRow
	for k, r := range m.dids {
		if k.project == project {
			dids = append(dids, r)
		}
	}
	var persons []PersonRow
	for k, r := range m.persons {
		if k.project == project {
			r.Properties = copyProps(r.Properties)
			r.DistinctIDs = append([]string(nil), r.DistinctIDs...)
			persons = append(persons, r)
		}
	}
	if limit > 0 && (len(dids) > limit || len(persons) > limit) {
		return false, nil
	}
	m.projectLoads++
	wholeReads++
	for _, r := range dids {
		did(r)
	}
	for _, r := range persons {
		person(r)
	}
	return true, nil
}

func copyProps(p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// snapshot renders the live persons of a project as sorted lines, e.g.
// "[a b] {"x":1} identified", so whole states compare as strings.
func (m *memStore) snapshot(project uint64) []string {
	owned := map[uint64][]string{}
	for k, d := range m.dids {
		if k.project == project && !d.IsDeleted {
			owned[d.PersonID] = append(owned[d.PersonID], d.DistinctID)
		}
	}
	var lines []string
	for k, p := range m.persons {
		if k.project != project || p.IsDeleted {
			continue
		}
		ids := owned[p.ID]
		sort.Strings(ids)
		if listed := sortedCopy(p.DistinctIDs); fmt.Sprint(listed) != fmt.Sprint(ids) {
			lines = append(lines, fmt.Sprintf("MISMATCH person %d lists %v, distinct id rows say %v", p.ID, listed, ids))
		}
		props, _ := json.Marshal(p.Properties)
		line := fmt.Sprintf("%v %s", ids, props)
		if p.IsIdentified {
			line += " identified"
		}
		if p.PropertyTimes != "" {
			line += " times=" + p.PropertyTimes
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return lines
}

// rows renders every stored row, deleted persons and distinct id
// tombstones included, with its version: two stores hold the same
// projection exactly when these match.
func (m *memStore) rows() string {
	var out []string
	for k, p := range m.persons {
		props, _ := json.Marshal(p.Properties)
		out = append(out, fmt.Sprintf("person %d/%d %s %s %v identified=%v deleted=%v v%d times=%s", k.project, k.id, p.UUID, props, p.DistinctIDs, p.IsIdentified, p.IsDeleted, p.Version, p.PropertyTimes))
	}
	for k, d := range m.dids {
		out = append(out, fmt.Sprintf("did %d/%s -> %d deleted=%v v%d first=%d", k.project, k.id, d.PersonID, d.IsDeleted, d.Version, d.FirstSeq))
	}
	for k, d := range m.overrides {
		out = append(out, fmt.Sprintf("override %d/%s -> %d deleted=%v v%d", k.project, k.id, d.PersonID, d.IsDeleted, d.Version))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// ev builds an event from a compact JSON envelope with defaults filled in.
func ev(t testing.TB, seq int, js string) event.Event {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatalf("bad test event %s: %v", js, err)
	}
	if _, ok := m["uuid"]; !ok {
		m["uuid"] = uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(seq))).String()
	}
	if _, ok := m["event"]; !ok {
		m["event"] = "$pageview"
	}
	if _, ok := m["timestamp"]; !ok {
		m["timestamp"] = time.Date(2026, 1, 1, 0, 0, seq, 0, time.UTC).Format(time.RFC3339)
	}
	raw, _ := json.Marshal(m)
	e, err := event.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return e
}

// run folds events (one JSON envelope each, sequence = position + 1) in
// batches of batchSize into a fresh store and returns it.
func run(t testing.TB, events []string, batchSize int) *memStore {
	t.Helper()
	store := newMemStore()
	f := New(store)
	runInto(t, f, store, events, 1, batchSize, false)
	return store
}

func runInto(t testing.TB, f *Folder, store *memStore, events []string, firstSeq, batchSize int, redelivered bool) {
	t.Helper()
	runProject(t, f, store, 1, events, firstSeq, batchSize, redelivered)
}

// runProject folds events of project in batches of batchSize, the first
// at sequence firstSeq, into f and store.
func runProject(t testing.TB, f *Folder, store *memStore, project uint64, events []string, firstSeq, batchSize int, redelivered bool) {
	t.Helper()
	ctx := context.Background()
	var batch []Input
	for i, js := range events {
		seq := firstSeq + i
		batch = append(batch, Input{ProjectID: project, Seq: uint64(seq), Event: ev(t, seq, js), Redelivered: redelivered})
		if len(batch) == batchSize || i == len(events)-1 {
			if err := f.Prepare(ctx, batch); err != nil {
				t.Fatal(err)
			}
			for _, in := range batch {
				if _, err := f.Apply(ctx, in); err != nil {
					t.Fatal(err)
				}
			}
			store.write(f.Flush())
			// As the ingester does once the batch is committed.
			f.Committed = batch[len(batch)-1].Seq
			batch = batch[:0]
		}
	}
}

func joinLines(l []string) string { return strings.Join(l, "\n") }

func sortedCopy(l []string) []string {
	out := append([]string(nil), l...)
	sort.Strings(out)
	return out
}
