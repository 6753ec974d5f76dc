package testenv

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
)

// Workload makes a deterministic mix of envelopes (without uuid and
// timestamp) over a small set of distinct ids, so merges, chains, refused
// merges and illegal ids all happen: creations, $set, $set_once, $unset,
// $identify, $create_alias, $merge_dangerously, $delete_person_property.
func Workload(seed int64, n, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	id := func() string {
		if r.Intn(40) == 0 {
			return []string{"null", "undefined", "0", "anonymous"}[r.Intn(4)]
		}
		return fmt.Sprintf("u%d", r.Intn(ids))
	}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		switch k := r.Intn(14); {
		case k == 12 && i > 0:
			// Person ids are stream sequences: name a person that may
			// or may not exist (then the event changes nothing).
			out = append(out, fmt.Sprintf(`{"event":"$delete_person","distinct_id":"api","properties":{"$person_id":%d,"$delete_events":%v,"$actor":{"key_id":"k1","key_label":"test","organization_id":"o1"}}}`, 1+r.Intn(i), r.Intn(2) == 0))
		case k == 13 && i > 0:
			out = append(out, fmt.Sprintf(`{"event":"$split_person","distinct_id":"api","properties":{"$person_id":%d,"$split_distinct_ids":[%q,%q],"$actor":{"key_id":"k1","key_label":"test","organization_id":"o1"}}}`, 1+r.Intn(i), id(), id()))
		case k < 4:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set":{"k%d":%d}}`, id(), r.Intn(6), r.Intn(4)))
		case k < 5:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set_once":{"k%d":"o%d"}}`, id(), r.Intn(6), r.Intn(4)))
		case k < 6:
			out = append(out, fmt.Sprintf(`{"event":"e","distinct_id":%q,"$unset":["k%d"]}`, id(), r.Intn(6)))
		case k < 7:
			out = append(out, fmt.Sprintf(`{"event":"$identify","distinct_id":%q,"properties":{"$anon_distinct_id":%q}}`, id(), id()))
		case k < 8:
			out = append(out, fmt.Sprintf(`{"event":"$create_alias","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 9:
			out = append(out, fmt.Sprintf(`{"event":"$merge_dangerously","distinct_id":%q,"properties":{"alias":%q}}`, id(), id()))
		case k < 10:
			out = append(out, fmt.Sprintf(`{"event":"$delete_person_property","distinct_id":%q,"$unset":["k%d"],"properties":{"$actor":{"key_id":"k1","key_label":"test","organization_id":"o1"}}}`, id(), r.Intn(6)))
		default:
			out = append(out, fmt.Sprintf(`{"event":"$pageview","distinct_id":%q}`, id()))
		}
	}
	return out
}

// Snapshot renders every table the ingester writes, newest versions, as
// text: two databases hold the same state exactly when these match.
func Snapshot(t testing.TB, store *chstore.Store) string {
	t.Helper()
	queries := []string{
		"SELECT project_id, id, uuid, properties, distinct_ids, created_at, is_identified, is_deleted, version FROM persons FINAL ORDER BY project_id, id",
		"SELECT project_id, distinct_id, person_id, is_deleted, version FROM person_distinct_ids FINAL ORDER BY project_id, distinct_id",
		"SELECT project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, properties, seq FROM events FINAL ORDER BY seq",
		"SELECT project_id, seq, type, details FROM ingestion_warnings FINAL ORDER BY project_id, seq, type",
		"SELECT id, organization_id, project_id, scope, item_id, activity, detail, user_key_id, created_at FROM activity_log FINAL ORDER BY id",
		"SELECT project_id, person_id, person_uuid, request_seq, status, requested_at FROM person_deletion_requests FINAL ORDER BY project_id, person_id",
		"SELECT count() FROM (SELECT uuid FROM events FINAL GROUP BY uuid HAVING count() > 1)",
	}
	var b strings.Builder
	for _, q := range queries {
		rows, err := store.Conn().Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		types := rows.ColumnTypes()
		for rows.Next() {
			vals := make([]any, len(types))
			for i, ct := range types {
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
		rows.Close()
		b.WriteString("--\n")
	}
	return b.String()
}

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
