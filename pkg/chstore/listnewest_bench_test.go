package chstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/testenv"
)

// BenchmarkPropertiesListAB measures the properties list (plan=enterprise, first
// page) settled by version (listnewest.go) and verifying every candidate
// by key (main's path while merges are behind), against the bare count of
// the filter's rows, interleaved in one process against one server; it
// reports each case's p50 and p90. The project has PERSONHUB_G5D_PERSONS
// persons (default 1M; email, name, plan, visits as in the bench, a tenth
// "enterprise") written in inserts of 100k, then 40% of them changed (a
// tenth of those from or to "enterprise") in inserts of 100k, merges
// stopped: the state the bench reads right after its fill. Run alone:
//
//	go test -run '^$' -bench PropertiesListAB -benchtime 15x ./pkg/chstore/
func BenchmarkPropertiesListAB(b *testing.B) {
	store, f := g5dFixture(b)
	ctx := context.Background()
	const project = g5dProject
	q := chstore.ListQuery{ProjectID: project, Properties: f, Limit: 100}
	cases := []struct {
		name string
		run  func() (uint64, error)
	}{
		{"bare", func() (uint64, error) {
			var c uint64
			err := store.Conn().QueryRow(ctx, "SELECT count() FROM persons WHERE project_id = ? AND "+f.SQL, append([]any{uint64(project)}, f.Args...)...).Scan(&c)
			return c, err
		}},
		{"version", func() (uint64, error) { _, c, err := store.ListPersons(ctx, q); return c, err }},
		{"bykey", func() (uint64, error) { _, c, err := store.ListByPropertiesByKey(ctx, q); return c, err }},
	}
	var counts [3]uint64
	var err error
	for i, c := range cases { // warm: the newest versions are read once
		if counts[i], err = c.run(); err != nil {
			b.Fatal(err)
		}
	}
	if counts[1] != counts[2] {
		b.Fatalf("count %d by version, %d by key", counts[1], counts[2])
	}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range cases {
			start := time.Now()
			if _, err := c.run(); err != nil {
				b.Fatal(err)
			}
			took[c.name] = append(took[c.name], time.Since(start))
		}
	}
	b.StopTimer()
	reportQuantiles(b, took)
}

// g5dProject is the project g5dFixture writes.
const g5dProject = 5

// g5dFixture writes the project BenchmarkPropertiesListAB describes and
// returns the store and the filter (plan=enterprise).
func g5dFixture(b *testing.B) (*chstore.Store, propfilter.Clause) {
	n := envPersons("PERSONHUB_G5D_PERSONS")
	store := testenv.ClickHouse(b)
	ctx := context.Background()
	if err := store.Conn().Exec(ctx, "SYSTEM STOP MERGES persons"); err != nil {
		b.Fatal(err)
	}
	const project = g5dProject
	plans := []string{"free", "free", "free", "free", "free", "free", "free", "pro", "pro", "enterprise"}
	row := func(id, version int, plan string) fold.PersonRow {
		return fold.PersonRow{ProjectID: project, ID: uint64(id), Version: uint64(version),
			Properties: map[string]any{"email": fmt.Sprintf("user%d@example.com", id), "name": fmt.Sprintf("User %d", id), "plan": plan, "visits": id % 997},
			CreatedAt:  time.Unix(1.7e9+int64(id)*8, 0).UTC()}
	}
	var batch fold.Batch
	flush := func() {
		if err := store.WriteRows(ctx, nil, batch); err != nil {
			b.Fatal(err)
		}
		batch = fold.Batch{}
	}
	for id := 1; id <= n; id++ {
		if batch.Persons = append(batch.Persons, row(id, id, plans[id%10])); len(batch.Persons) == 100_000 {
			flush()
		}
	}
	flush()
	for id := 3; id <= n; id += 5 {
		for k := 0; k < 2; k++ { // 2 in 5 persons changed
			if batch.Persons = append(batch.Persons, row(id+k, n+id+k, plans[(id+k)%7+3])); len(batch.Persons) == 100_000 {
				flush()
			}
		}
	}
	flush()
	f, err := propfilter.Parse(`[{"key":"plan","value":"enterprise","operator":"exact","type":"person"}]`)
	if err != nil {
		b.Fatal(err)
	}
	return store, f
}

// BenchmarkPropertiesListPhases times the pieces of the properties list on the
// fixture of BenchmarkPropertiesListAB, interleaved with the bare count,
// to see where the list's time beyond the bare count goes:
//
//	go test -run '^$' -bench PropertiesListPhases -benchtime 15x ./pkg/chstore/
func BenchmarkPropertiesListPhases(b *testing.B) {
	store, f := g5dFixture(b)
	ctx := context.Background()
	q := chstore.ListQuery{ProjectID: g5dProject, Properties: f, Limit: 100}
	bare := func() error {
		var c uint64
		return store.Conn().QueryRow(ctx, "SELECT count() FROM persons WHERE project_id = ? AND "+f.SQL, append([]any{uint64(g5dProject)}, f.Args...)...).Scan(&c)
	}
	if _, err := store.ListPhases(ctx, q); err != nil { // warm: the index is read once
		b.Fatal(err)
	}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		took["bare"] = append(took["bare"], time.Since(start))
		start = time.Now()
		if _, _, err := store.ListPersons(ctx, q); err != nil {
			b.Fatal(err)
		}
		took["list"] = append(took["list"], time.Since(start))
		phases, err := store.ListPhases(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		for k, d := range phases {
			took[k] = append(took[k], d)
		}
	}
	b.StopTimer()
	reportQuantiles(b, took)
}
