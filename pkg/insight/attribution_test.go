package insight

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// workloadWithResets is testenv.Workload (merges, refused merges, splits,
// deletions) with the API's resets of distinct ids mixed in.
func workloadWithResets(seed int64, n, ids int) []testenv.Message {
	r := rand.New(rand.NewSource(seed))
	var out []testenv.Message
	for _, m := range testenv.Workload(seed, n, ids) {
		out = append(out, m)
		if r.Intn(12) == 0 {
			out = append(out, testenv.Message{Command: true, Body: fmt.Sprintf(
				`{"event":%q,"distinct_id":"u%d","properties":{%q:{"key_id":"k1","key_label":"test","organization_id":"o1"}}}`,
				event.ResetPersonDistinctID, r.Intn(ids), event.PropActor)})
		}
		if r.Intn(3) == 0 { // more captured events, so ids have histories
			out = append(out, testenv.Message{Body: fmt.Sprintf(`{"event":"$pageview","distinct_id":"u%d"}`, r.Intn(ids))})
		}
	}
	return out
}

// ingestAll runs an ingester over the stream until it committed last.
func ingestAll(t *testing.T, n *testenv.NATS, store *chstore.Store, last uint64) {
	t.Helper()
	runIngester(t, n, &brokenStore{Store: store}, "attribution", 97, last)
}

// attribution maps each analysed event's uuid to its person.
func attribution(t *testing.T, store *chstore.Store, sql string, args ...any) map[uuid.UUID]uint64 {
	t.Helper()
	rows, err := store.Conn().Query(readCtx(context.Background()), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]uint64{}
	for rows.Next() {
		var id uuid.UUID
		var pid uint64
		if err := rows.Scan(&id, &pid); err != nil {
			t.Fatal(err)
		}
		out[id] = pid
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// overridesAttribution is what every analysis route reads: the scan.
func overridesAttribution(t *testing.T, store *chstore.Store, project uint64) map[uuid.UUID]uint64 {
	sql, args := scan{project: project, to: endOfTime, f: newFilters()}.sql()
	return attribution(t, store, "SELECT uuid, pid FROM ("+sql+")", args...)
}

// referenceAttribution is the definition, written apart from the scan:
// the current, live owner of the event's distinct id (the join of every
// distinct id and person of the project that the scan replaced), the
// API's person writes left out: the command names, and $set or
// $delete_person_property carrying the API's $actor.
func referenceAttribution(t *testing.T, store *chstore.Store, project uint64) map[uuid.UUID]uint64 {
	commands := "'" + strings.Join(event.ReservedEvents, "', '") + "'"
	sql := "SELECT uuid, pid FROM (SELECT uuid, pid FROM events ALL INNER JOIN (SELECT distinct_id, person_id AS pid FROM person_distinct_ids FINAL " +
		"WHERE project_id = ? AND is_deleted = 0) AS owners USING distinct_id WHERE project_id = ? AND NOT (event IN (" + commands + ") OR " +
		"(event IN (?, ?) AND visitParamHas(properties, ?)))) AS attributed " +
		"ALL INNER JOIN (SELECT id AS pid FROM persons FINAL WHERE project_id = ? AND is_deleted = 0) AS live USING pid"
	return attribution(t, store, sql, project, project, event.Set, event.DeletePersonProperty, event.PropActor, project)
}

// diff describes how got differs from want, "" when equal.
func diff(got, want map[uuid.UUID]uint64) string {
	var out []string
	for id, w := range want {
		if g, ok := got[id]; !ok {
			out = append(out, fmt.Sprintf("event %s: missing, want person %d", id, w))
		} else if g != w {
			out = append(out, fmt.Sprintf("event %s: person %d, want %d", id, g, w))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			out = append(out, fmt.Sprintf("event %s: person %d, want none (no live owner)", id, g))
		}
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("... %d differences", len(out)))
	}
	return strings.Join(out, "\n")
}

// TestOverridesAttributionEqualsReference: a random workload with merges,
// splits, resets and deletions through the real ingester; every analysed
// event's person by the overrides (the scan) equals its distinct id's
// current live owner. Then the upgrade: with the overrides gone (tables
// folded before migration 0006), the attribution is wrong, and the
// migration's backfill statement makes it right again.
func TestOverridesAttributionEqualsReference(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	last := testenv.PublishWorkload(t, n.JS, 0, workloadWithResets(11, 3000, 120))
	ingestAll(t, n, store, last)
	ctx := context.Background()
	for project := uint64(1); project <= 3; project++ {
		want := referenceAttribution(t, store, project)
		if len(want) < 300 {
			t.Fatalf("project %d: only %d events attributed", project, len(want))
		}
		if d := diff(overridesAttribution(t, store, project), want); d != "" {
			t.Fatalf("project %d: the overrides attribute differently from the reference:\n%s", project, d)
		}
	}

	var overrides, ids uint64
	if err := store.Conn().QueryRow(ctx, "SELECT (SELECT count() FROM person_distinct_id_overrides FINAL), (SELECT count() FROM person_distinct_ids FINAL)").Scan(&overrides, &ids); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d overrides for %d distinct ids", overrides, ids)
	if overrides == 0 || overrides >= ids {
		t.Fatalf("%d overrides for %d distinct ids: want some, and fewer", overrides, ids)
	}

	// Before migration 0006 there were no overrides.
	if err := store.Conn().Exec(ctx, "TRUNCATE TABLE person_distinct_id_overrides"); err != nil {
		t.Fatal(err)
	}
	if d := diff(overridesAttribution(t, store, 1), referenceAttribution(t, store, 1)); d == "" {
		t.Fatal("without overrides the workload attributes every event right: it proves nothing")
	}
	migrations, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var backfill string
	for _, m := range migrations {
		for _, st := range m.Statements {
			if m.Version == 6 && strings.Contains(st, "INSERT INTO person_distinct_id_overrides") {
				backfill = st
			}
		}
	}
	if backfill == "" {
		t.Fatal("no backfill statement in migration 0006")
	}
	for range 2 { // idempotent: a second run changes nothing
		if err := store.Conn().Exec(ctx, backfill); err != nil {
			t.Fatal(err)
		}
		for project := uint64(1); project <= 3; project++ {
			if d := diff(overridesAttribution(t, store, project), referenceAttribution(t, store, project)); d != "" {
				t.Fatalf("project %d after the backfill:\n%s", project, d)
			}
		}
	}
}
