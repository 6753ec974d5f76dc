package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/stream"
)

// Message is one envelope of a workload (without uuid and timestamp) and
// whether the API makes it: a command, published on the command subject.
type Message struct {
	Body    string
	Command bool
}

// command renders an API command as the API publishes it, with an actor.
func command(name, distinctID string, props map[string]any, set map[string]any, unset []string) Message {
	all := map[string]any{event.PropActor: event.Actor{KeyID: "k1", KeyLabel: "test", OrganizationID: "o1"}}
	for k, v := range props {
		all[k] = v
	}
	env := map[string]any{"event": name, "distinct_id": distinctID, "properties": all}
	if set != nil {
		env["$set"] = set
	}
	if unset != nil {
		env["$unset"] = unset
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err) // only plain values above
	}
	return Message{Body: string(b), Command: true}
}

// DeletePerson is the API's command deleting a person and its events.
func DeletePerson(personID uint64) Message {
	return command(event.DeletePerson, "api", map[string]any{event.PropPersonID: personID, event.PropDeleteEvents: true}, nil, nil)
}

// Workload makes a deterministic mix of envelopes over a small set of
// distinct ids, so merges, chains, refused merges and illegal ids all
// happen: creations, $set, $set_once, $unset, $identify, $create_alias,
// $merge_dangerously, and the API's commands ($delete_person_property,
// $delete_person, $delete_person_events, $split_person, and the static
// cohort membership commands over cohorts 1 to 3).
func Workload(seed int64, n, ids int) []Message {
	r := rand.New(rand.NewSource(seed))
	id := func() string {
		if r.Intn(40) == 0 {
			return []string{"null", "undefined", "0", "anonymous"}[r.Intn(4)]
		}
		return fmt.Sprintf("u%d", r.Intn(ids))
	}
	plain := func(format string, args ...any) Message { return Message{Body: fmt.Sprintf(format, args...)} }
	out := make([]Message, 0, n)
	for i := 0; i < n; i++ {
		switch k := r.Intn(17); {
		case k == 12 && i > 0:
			// Person ids are stream sequences: name a person that may
			// or may not exist (then the event changes nothing).
			out = append(out, command(event.DeletePerson, "api", map[string]any{event.PropPersonID: 1 + r.Intn(i), event.PropDeleteEvents: r.Intn(2) == 0}, nil, nil))
		case k == 13 && i > 0:
			out = append(out, command(event.SplitPerson, "api", map[string]any{event.PropPersonID: 1 + r.Intn(i), event.PropSplitIDs: []string{id(), id()}}, nil, nil))
		case k == 14 && i > 0:
			out = append(out, command(event.DeletePersonEvents, "api", map[string]any{event.PropPersonID: 1 + r.Intn(i)}, nil, nil))
		case k >= 15:
			name := event.AddToStaticCohort
			if k == 16 {
				name = event.RemoveFromStaticCohort
			}
			out = append(out, command(name, "api", map[string]any{event.PropCohortID: 1 + r.Intn(3), event.PropCohortDistinctIDs: []string{id(), id(), id()}}, nil, nil))
		case k < 4:
			did, key, v := id(), r.Intn(6), r.Intn(4)
			if key == 5 {
				// An email, so the list's email tables (person_emails,
				// person_email_grams) are checked after crashes too; one
				// of four is not ASCII (its gram is '').
				out = append(out, plain(`{"event":"e","distinct_id":%q,"$set":{"email":%q}}`, did, fmt.Sprintf("%s.%s@Ex.io", did, []string{"a", "B", "cc", "zoë"}[v])))
				break
			}
			out = append(out, plain(`{"event":"e","distinct_id":%q,"$set":{"k%d":%d}}`, did, key, v))
		case k < 5:
			out = append(out, plain(`{"event":"e","distinct_id":%q,"$set_once":{"k%d":"o%d"}}`, id(), r.Intn(6), r.Intn(4)))
		case k < 6:
			out = append(out, plain(`{"event":"e","distinct_id":%q,"$unset":["k%d"]}`, id(), r.Intn(6)))
		case k < 7:
			out = append(out, plain(`{"event":"$identify","distinct_id":%q,"properties":{"$anon_distinct_id":%q}}`, id(), id()))
		case k < 8:
			out = append(out, plain(`{"event":"$create_alias","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 9:
			out = append(out, plain(`{"event":"$merge_dangerously","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 10:
			out = append(out, command(event.DeletePersonProperty, id(), nil, nil, []string{fmt.Sprintf("k%d", r.Intn(6))}))
		default:
			out = append(out, plain(`{"event":"$pageview","distinct_id":%q}`, id()))
		}
	}
	return out
}

// Publish publishes a workload message for a project on its subject (the
// command subject for commands), with uuid and timestamp filled in.
func Publish(ctx context.Context, js jetstream.JetStream, project uint64, m Message, uuid string, ts time.Time) (*jetstream.PubAck, error) {
	body := m.Body
	if strings.HasPrefix(body, "{") && !strings.Contains(body, `"uuid"`) {
		body = fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, uuid, ts.UTC().Format(time.RFC3339), body[1:])
	}
	if m.Command {
		return stream.PublishCommand(ctx, js, project, uuid, []byte(body))
	}
	return stream.Publish(ctx, js, project, uuid, []byte(body))
}

// StateQueries are the queries that render every table the ingester
// writes, newest versions: two databases hold the same state exactly
// when their answers match (the replay tests, and the bench's replay).
func StateQueries() []string {
	return []string{
		"SELECT project_id, id, uuid, properties, distinct_ids, created_at, is_identified, is_deleted, version, property_times FROM persons FINAL ORDER BY project_id, id",
		"SELECT project_id, distinct_id, person_id, is_deleted, version, first_seq FROM person_distinct_ids FINAL ORDER BY project_id, distinct_id",
		"SELECT project_id, distinct_id, person_id, is_deleted, version FROM person_distinct_id_overrides FINAL ORDER BY project_id, distinct_id",
		"SELECT project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, properties, seq FROM events FINAL ORDER BY seq",
		"SELECT project_id, seq, type, details FROM ingestion_warnings FINAL ORDER BY project_id, seq, type",
		"SELECT id, organization_id, project_id, scope, item_id, activity, detail, user_key_id, created_at FROM activity_log FINAL ORDER BY id",
		"SELECT project_id, person_id, person_uuid, request_seq, status, requested_at FROM person_deletion_requests FINAL ORDER BY project_id, person_id",
		"SELECT project_id, cohort_id, distinct_id, person_id, is_deleted, version FROM cohort_people FINAL ORDER BY project_id, cohort_id, distinct_id",
		"SELECT count() FROM (SELECT uuid FROM events FINAL GROUP BY uuid HAVING count() > 1)",
		// The copy by distinct id (schema 0009, a materialized view of
		// events), newest rows as for events: physical rows depend on
		// whether ClickHouse merged a resent uuid's copies yet.
		"SELECT project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq FROM events_by_distinct_id FINAL ORDER BY seq, distinct_id",
		// The counts per hour (schema 0014, a view of events): a sum per
		// key, whatever the parts and merges; keys whose rows cancel
		// (a recovery's correction) are none.
		HourlySumsSQL,
		// The newest time of each distinct id (schema 0020, a view of
		// events): its maximum, whatever the parts and merges.
		LastSeenSQL,
		orderKeysSQL,
		countsSQL,
		slotsSQL,
		bucketsSQL,
	}
}

// Snapshot renders every table the ingester writes, newest versions, as
// text: two databases hold the same state exactly when these match.
func Snapshot(t testing.TB, store *chstore.Store) string {
	t.Helper()
	queries := StateQueries()
	checkListTables(t, store)
	var b strings.Builder
	for _, q := range queries {
		b.WriteString(queryText(t, store, q))
		b.WriteString("--\n")
	}
	return b.String()
}

// HourlySumsSQL renders events_hourly's sums per key (schema 0014), the
// keys whose rows cancel left out.
const HourlySumsSQL = `SELECT project_id, event, hour, distinct_id, person_id, sum(events) AS n FROM events_hourly
	GROUP BY project_id, event, hour, distinct_id, person_id HAVING n != 0
	ORDER BY project_id, event, hour, distinct_id, person_id`

// LastSeenSQL renders person_last_seen's newest time per distinct id
// (schema 0020).
const LastSeenSQL = `SELECT project_id, distinct_id, max(seen_ms) FROM person_last_seen
	GROUP BY project_id, distinct_id ORDER BY project_id, distinct_id`

// FirstDiff describes the first line where two snapshots differ.
func FirstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n got %s\nwant %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("same first lines; %d lines vs %d", len(g), len(w))
}

// The list's tables (schema 0008) against the persons they index: every
// live person at its ordering key and nowhere else, and each project's
// maintained count equal to its live persons. Newest rows by argMax, so no
// filter runs on old versions.
const (
	livePersonKeysSQL = `SELECT project_id, bitNot(toUInt32(c)) AS rank, bitNot(id) AS rid FROM (
		SELECT project_id, id, argMax(created_at, version) AS c, argMax(is_deleted, version) AS d FROM persons GROUP BY project_id, id
	) WHERE d = 0 ORDER BY project_id, rank, rid`
	orderKeysSQL = `SELECT project_id, rank, rid FROM person_order GROUP BY project_id, rank, rid
		HAVING argMax(is_deleted, version) = 0 ORDER BY project_id, rank, rid`
	countsSQL     = `SELECT project_id, argMax(live, version) AS n FROM person_counts GROUP BY project_id HAVING n > 0 ORDER BY project_id`
	liveCountsSQL = `SELECT project_id, count() FROM (` + livePersonKeysSQL + `) GROUP BY project_id ORDER BY project_id`
	// The live persons per slot of 16384 ranks (schema 0015), from
	// person_windows and from the persons rows: a deep page skips slots by
	// these counts, so a wrong one moves every page after it.
	slotsSQL = `SELECT project_id, slot, argMax(live, version) AS n FROM person_windows
		GROUP BY project_id, slot HAVING n > 0 ORDER BY project_id, slot`
	liveSlotsSQL = `SELECT project_id, toUInt32(intDiv(rank, 16384)) AS slot, count() FROM (` + livePersonKeysSQL + `)
		GROUP BY project_id, slot ORDER BY project_id, slot`
	// Each bucket of person ids and its highest version (schema 0013),
	// and the same from the persons rows: values/ misses a change when a
	// bucket's version is below a persons row's.
	bucketsSQL       = `SELECT project_id, bucket, max(version) FROM person_buckets GROUP BY project_id, bucket ORDER BY project_id, bucket`
	personBucketsSQL = `SELECT project_id, intDiv(id, 16384) AS bucket, max(version) FROM persons GROUP BY project_id, bucket ORDER BY project_id, bucket`
	// Persons whose email person_emails does not have (it may hold more).
	missingEmailsSQL = `SELECT project_id, id, e FROM (
		SELECT project_id, id, argMax(property_values[indexOf(property_keys, 'email')], version) AS e,
			argMax(has(property_keys, 'email'), version) AS h FROM persons GROUP BY project_id, id
	) WHERE h = 1 AND (project_id, e, id) NOT IN (SELECT project_id, email, id FROM person_emails) ORDER BY project_id, id`
	// Grams (schema 0012) of persons' emails that person_email_grams does
	// not have: the lowered trigrams of an ASCII email up to 254 bytes,
	// else the gram '' (computed here in SQL, apart from the ingester's Go).
	missingGramsSQL = `SELECT project_id, id, g FROM (
		SELECT project_id, id, arrayJoin(if(length(e) > 254 OR arrayExists(i -> reinterpretAsUInt8(substring(e, i + 1, 1)) >= 128, range(length(e))),
			[''], arrayMap(i -> substring(lower(e), i + 1, 3), range(toUInt64(greatest(length(e), 2) - 2))))) AS g
		FROM (SELECT project_id, id, argMax(property_values[indexOf(property_keys, 'email')], version) AS e,
			argMax(has(property_keys, 'email'), version) AS h FROM persons GROUP BY project_id, id) WHERE h = 1
	) WHERE (project_id, g, id) NOT IN (SELECT project_id, gram, id FROM person_email_grams) ORDER BY project_id, id, g`
)

func checkListTables(t testing.TB, store *chstore.Store) {
	t.Helper()
	if got, want := queryText(t, store, orderKeysSQL), queryText(t, store, livePersonKeysSQL); got != want {
		t.Errorf("person_order's live keys are not the live persons': %s", FirstDiff(got, want))
	}
	if got, want := queryText(t, store, countsSQL), queryText(t, store, liveCountsSQL); got != want {
		t.Errorf("person_counts is not the live persons' count: %s", FirstDiff(got, want))
	}
	if got, want := queryText(t, store, slotsSQL), queryText(t, store, liveSlotsSQL); got != want {
		t.Errorf("person_windows is not the live persons' count per slot: %s", FirstDiff(got, want))
	}
	if got, want := queryText(t, store, bucketsSQL), queryText(t, store, personBucketsSQL); got != want {
		t.Errorf("person_buckets is not the persons' highest version per bucket: %s", FirstDiff(got, want))
	}
	if missing := queryText(t, store, missingEmailsSQL); missing != "" {
		t.Errorf("person_emails lacks persons' emails:\n%s", missing)
	}
	if missing := queryText(t, store, missingGramsSQL); missing != "" {
		t.Errorf("person_email_grams lacks grams of persons' emails:\n%s", missing)
	}
}

// QueryText renders a query's rows as text, tab-separated, for tests
// that compare a table with what it should hold.
func QueryText(t testing.TB, store *chstore.Store, sql string) string {
	t.Helper()
	return queryText(t, store, sql)
}

// queryText renders a query's rows as text, tab-separated.
func queryText(t testing.TB, store *chstore.Store, sql string) string {
	t.Helper()
	rows, err := store.Conn().Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	n := len(rows.Columns())
	for rows.Next() {
		vals := make([]any, n)
		for i, ct := range rows.ColumnTypes() {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			fmt.Fprintf(&b, "%v\t", reflect.ValueOf(v).Elem().Interface())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
