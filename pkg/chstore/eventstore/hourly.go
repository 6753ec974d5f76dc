package eventstore

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// hourlyCounts is the counts events_hourly holds (schema 0014), taken
// from events as stored, among the rows where selects (the events'
// columns, no GROUP BY): one count per (project, event, hour, distinct
// id, person), with the view's filter (the API's command events, which
// carry $actor, are not counted). It counts rows, as the view counts an
// insert: the ingester keeps one events row per message, and a uuid
// published again after the stream's duplicate window is a second
// message that a replay counts twice too (docs/analysis.md). The deleter
// rebuilds a person's counts from it, and restoreHourly corrects a
// recovered batch's keys to it.
func hourlyCounts(where string) string {
	return "SELECT project_id, event, toStartOfHour(timestamp) AS hour, distinct_id, person_id, count() AS n FROM events " +
		"WHERE visitParamHas(properties, '$actor') = 0 AND " + where +
		" GROUP BY project_id, event, hour, distinct_id, person_id"
}

// PersonHours selects the events rows of some persons of one project in
// the hours [From, To) (Unix seconds, whole hours), or in every hour
// (AllHours).
type PersonHours struct {
	ProjectID uint64
	PersonIDs []uint64
	From, To  uint32
	AllHours  bool
}

// RebuildHourly counts into events_hourly the events the selection finds
// in events, as the view counts an insert (hourlyCounts). The deleter
// calls it for a batch's persons once their events are mutated, after it
// deleted their hourly rows in those hours (pkg/deletion).
func (s *Store) RebuildHourly(ctx context.Context, sel PersonHours) error {
	where, args := "project_id = ? AND person_id IN "+statement.InArray("UInt64"), []any{sel.ProjectID, sel.PersonIDs}
	if !sel.AllHours {
		where += " AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?)"
		args = append(args, sel.From, sel.To)
	}
	return s.conn.Exec(ctx, "INSERT INTO events_hourly (project_id, event, hour, distinct_id, person_id, events) "+
		hourlyCounts(where), args...)
}

// restoreHourly makes events_hourly exact for the keys (project, event,
// hour, distinct id, person) of the rows, among the seqs given (rows
// Written found), that an interrupted insert left in events: as for
// events_by_distinct_id (RestoreCopies), ClickHouse writes events before
// the view that counts them, and the retry leaves the rows out. A sum
// cannot tell which events it holds, so each key gets one row of the
// difference between the events stored and its current sum, none when
// they agree. The column is UInt64 (schema 0014): a negative difference
// (the sum above the count) is stored modulo 2^64, and sum(events), also
// UInt64 and wrapping as SummingMergeTree's merges do, comes out exact.
// Changing the column to Int64 instead was tried: on 18.16, after ALTER
// ... MODIFY COLUMN the view silently stopped counting. This is exact only while
// nothing else writes those keys: the ingester is the only writer of its
// partition's keys, and runs this before the retry's insert. A restore
// interrupted midway runs again with the same result, since it only
// brings the sums to the count.
func (s *Store) restoreHourly(ctx context.Context, rows []Row, written map[uint64]bool) error {
	type key struct {
		event, did string
		hour       uint32
		person     uint64
	}
	byProject := map[uint64]map[key]bool{}
	for _, r := range rows {
		if !written[r.Seq] {
			continue
		}
		keys := byProject[r.ProjectID]
		if keys == nil {
			keys = map[key]bool{}
			byProject[r.ProjectID] = keys
		}
		hour := r.Timestamp.Unix() - r.Timestamp.Unix()%3600
		keys[key{r.Event, r.DistinctID, uint32(hour), r.PersonID}] = true
	}
	// The keys go as an external table, one per project: spliced into the
	// statement as tuples (twice), each key was some 12 elements of its
	// tree, which 18.16 analysed for seconds a chunk of 50,000; a grown
	// batch's restore exceeded the statement deadline each time, and an
	// ingester whose grown batch was interrupted retried it for ever (the
	// bench's ingest at ten times, on a loaded machine).
	for project, keys := range byProject {
		tbl, err := ext.NewTable("keys", ext.Column("event", "String"), ext.Column("hour", "UInt32"),
			ext.Column("distinct_id", "String"), ext.Column("person_id", "UInt64"))
		if err != nil {
			return err
		}
		var minHour, maxHour uint32
		first := true
		for k := range keys {
			if err := tbl.Append(k.event, k.hour, k.did, k.person); err != nil {
				return err
			}
			if first || k.hour < minHour {
				minHour = k.hour
			}
			first = false
			maxHour = max(maxHour, k.hour)
		}
		// The hour range prunes both tables' month partitions; the keys
		// select the rows.
		const in = " IN (SELECT event, hour, distinct_id, person_id FROM keys)"
		counted := hourlyCounts("project_id = ? AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?) " +
			"AND (event, toUInt32(toStartOfHour(timestamp)), distinct_id, person_id)" + in)
		err = s.conn.Exec(statement.WithExternalTables(ctx, tbl), `INSERT INTO events_hourly (project_id, event, hour, distinct_id, person_id, events)
			SELECT project_id, event, hour, distinct_id, person_id, toUInt64(sum(d)) FROM (
				SELECT project_id, event, hour, distinct_id, person_id, toInt64(n) AS d FROM (`+counted+`)
				UNION ALL
				SELECT project_id, event, hour, distinct_id, person_id, -toInt64(events) AS d FROM events_hourly
				WHERE project_id = ? AND hour >= toDateTime(?) AND hour <= toDateTime(?)
				  AND (event, toUInt32(hour), distinct_id, person_id)`+in+`
			) GROUP BY project_id, event, hour, distinct_id, person_id HAVING sum(d) != 0`,
			project, minHour, maxHour+3600, project, minHour, maxHour)
		if err != nil {
			return fmt.Errorf("restore events_hourly: %w", err)
		}
	}
	return nil
}

// restoreFirstSeq adds to events_first_seq (schema 0017) the seqs of the
// rows, among those given, that an interrupted insert left in events:
// its view, like the others, may never have seen them, and the analysis
// must never read a lowest seq above an event's (it would group the
// stored persons where an override applies; pkg/insight, storedIsCurrent).
// Per project, the lowest seq of each hour, in one statement of two
// arrays. A minimum takes the same seqs twice, so it runs again as it is.
func (s *Store) restoreFirstSeq(ctx context.Context, rows []Row, written map[uint64]bool) error {
	lowest := map[uint64]map[uint32]uint64{}
	for _, r := range rows {
		if !written[r.Seq] {
			continue
		}
		hours := lowest[r.ProjectID]
		if hours == nil {
			hours = map[uint32]uint64{}
			lowest[r.ProjectID] = hours
		}
		hour := uint32(r.Timestamp.Unix() - r.Timestamp.Unix()%3600)
		if seq, ok := hours[hour]; !ok || r.Seq < seq {
			hours[hour] = r.Seq
		}
	}
	ctx = statement.Loader(ctx)
	for project, hours := range lowest {
		hs, seqs := make([]uint32, 0, len(hours)), make([]uint64, 0, len(hours))
		for h, seq := range hours {
			hs, seqs = append(hs, h), append(seqs, seq)
		}
		err := s.conn.Exec(ctx, `INSERT INTO events_first_seq (project_id, hour, min_seq)
			SELECT ?, toDateTime(arrayElement(?, i)) AS hour, minState(toUInt64(arrayElement(?, i))) FROM (SELECT arrayJoin(range(?)) + 1 AS i) GROUP BY hour`,
			project, hs, seqs, uint64(len(hs)))
		if err != nil {
			return fmt.Errorf("restore events_first_seq: %w", err)
		}
	}
	return nil
}
