package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// lastSeenTable holds the newest behaviour event of each distinct id, in
// Unix milliseconds (schema 0020, filled by a materialized view from every
// insert into events): a person's last_seen_at is the largest of its
// distinct ids'.
const lastSeenTable = "person_last_seen"

// seenMs is an events row's time in Unix milliseconds, as the view of
// schema 0020 computes it.
const seenMs = "toUInt64(timestamp) * 1000 + timestamp_ms"

// LastSeen returns the newest behaviour event's time of each of the
// distinct ids (of one project) that has one: one read by the table's key,
// max() per id, so the rows of an id that parts not merged yet still hold
// count as merged ones.
func (s *Store) LastSeen(ctx context.Context, projectID uint64, distinctIDs []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for start := 0; start < len(distinctIDs); start += statement.Chunk {
		part := distinctIDs[start:min(start+statement.Chunk, len(distinctIDs))]
		rows, err := s.conn.Query(statement.KeyRead(ctx), "SELECT distinct_id, max(seen_ms) FROM person_last_seen "+
			"WHERE project_id = ? AND distinct_id IN ? GROUP BY distinct_id", projectID, statement.Set(part))
		if err != nil {
			return nil, fmt.Errorf("read last seen: %w", err)
		}
		for rows.Next() {
			var id string
			var ms uint64
			if err := rows.Scan(&id, &ms); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = time.UnixMilli(int64(ms)).UTC()
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restoreLastSeen adds to person_last_seen the newest time of each
// distinct id among the rows, of the seqs given (rows Written found), that
// an interrupted insert left in events without their views' rows (as
// RestoreCopies does for the copy). Read from events as stored, with the
// view's filter; a maximum takes the same rows twice, so it runs again as
// it is.
func (s *Store) restoreLastSeen(ctx context.Context, rows []Row, written map[uint64]bool) error {
	type span struct {
		seqs             []uint64
		minTime, maxTime int64
	}
	byProject := map[uint64]*span{}
	for _, r := range rows {
		if !written[r.Seq] {
			continue
		}
		sp := byProject[r.ProjectID]
		if sp == nil {
			sp = &span{minTime: r.Timestamp.Unix(), maxTime: r.Timestamp.Unix()}
			byProject[r.ProjectID] = sp
		}
		sp.seqs = append(sp.seqs, r.Seq)
		sp.minTime, sp.maxTime = min(sp.minTime, r.Timestamp.Unix()), max(sp.maxTime, r.Timestamp.Unix())
	}
	for project, sp := range byProject {
		for start := 0; start < len(sp.seqs); start += statement.Chunk {
			part := sp.seqs[start:min(start+statement.Chunk, len(sp.seqs))]
			err := s.conn.Exec(ctx, "INSERT INTO person_last_seen (project_id, distinct_id, seen_ms) "+
				"SELECT project_id, distinct_id, max("+seenMs+") FROM events "+
				"WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp <= toDateTime(?) AND seq IN "+statement.InArray("UInt64")+" "+
				"AND visitParamHas(properties, '$actor') = 0 GROUP BY project_id, distinct_id",
				project, sp.minTime, sp.maxTime, part)
			if err != nil {
				return fmt.Errorf("restore person_last_seen: %w", err)
			}
		}
	}
	return nil
}

// The deleter's statements on person_last_seen. A purge deletes events, so
// the newest time of each distinct id of the events it deletes may go: the
// deleter (pkg/deletion) reads those ids (PurgedDistinctIDs), deletes their
// rows here (DeleteLastSeen, a mutation it waits for), reads their times
// from the events the purge keeps (KeptLastSeen, while the mutation runs:
// it reads events and their copy only) and writes them again (AddLastSeen,
// once the mutation is done), all before it issues the purge itself. Until
// the purge is issued, a run cut short leaves the events for the next run
// to find and do all of it again; once it is, the rows here are already
// those of the events it keeps.

// PurgedDistinctIDs returns the distinct ids of the behaviour events the
// purge of the targets in hours deletes, read from their copy by distinct
// id (it holds exactly the events the view of schema 0020 reads).
func (s *Store) PurgedDistinctIDs(ctx context.Context, project uint64, targets []PurgeTarget, hours Hours) ([]string, error) {
	where, args := purgeWhere(project, targets)
	cut, cargs := hours.cond("timestamp")
	return s.strings(ctx, "SELECT DISTINCT distinct_id FROM "+copyTable+" WHERE "+where+cut, append(args, cargs...)...)
}

// DeleteLastSeen issues the mutation that deletes the rows of the distinct
// ids (of one project), one a statement.Chunk of ids; Mutations and
// UnfinishedMutations follow them with the purge's. The table is not
// partitioned, so a mutation may rewrite all of it: narrow, a row per id
// once merged.
func (s *Store) DeleteLastSeen(ctx context.Context, project uint64, distinctIDs []string) error {
	for start := 0; start < len(distinctIDs); start += statement.Chunk {
		part := distinctIDs[start:min(start+statement.Chunk, len(distinctIDs))]
		if err := s.conn.Exec(ctx, "ALTER TABLE person_last_seen DELETE WHERE project_id = ? AND distinct_id IN "+statement.InArray("String"),
			project, part); err != nil {
			return fmt.Errorf("issue mutation on %s: %w", lastSeenTable, err)
		}
	}
	return nil
}

// SeenAt is a distinct id's newest behaviour event, in Unix milliseconds.
type SeenAt struct {
	DistinctID string
	Ms         uint64
}

// KeptLastSeen reads, for each of the distinct ids, the newest time of its
// behaviour events that the purge of the targets in hours keeps (those of
// other persons, or above a target's sequence): none for an id left
// without events. Reads by key rather than a scan of the project's events:
// the newest second of each id from the copy by distinct id (the copy has
// no milliseconds), the uuids of the copy's rows of those seconds, then
// those events, by their dates and uuids, for the milliseconds.
func (s *Store) KeptLastSeen(ctx context.Context, project uint64, distinctIDs []string, targets []PurgeTarget, hours Hours) ([]SeenAt, error) {
	where, wargs := purgeWhere(project, targets)
	cut, cargs := hours.cond("timestamp")
	kept := " AND NOT (" + where + cut + ")"
	keptArgs := append(wargs, cargs...)
	return s.keptLastSeen(ctx, project, distinctIDs, kept, keptArgs, kept, keptArgs)
}

// AddLastSeen writes the times into person_last_seen (of one project).
func (s *Store) AddLastSeen(ctx context.Context, project uint64, times []SeenAt) error {
	if len(times) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO person_last_seen (project_id, distinct_id, seen_ms)")
	if err != nil {
		return fmt.Errorf("write the kept events' last seen: %w", err)
	}
	defer batch.Abort()
	for _, t := range times {
		if err := batch.Append(project, t.DistinctID, t.Ms); err != nil {
			return err
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("write the kept events' last seen: %w", err)
	}
	return nil
}

// keptLastSeen reads, for each of the distinct ids, the newest time of
// its behaviour events that keptCopy (a condition over the copy by
// distinct id, with its arguments) and kept (the same events as a
// condition over events) select, as KeptLastSeen describes. The events
// of those seconds are told behaviour by their uuids in the copy (which
// holds the behaviour events alone), not by their properties: the widest
// column, which the ids' events, spread over nearly every granule of the
// dates read, had the read of events decompress almost whole (it took
// about twice as long with it in the bench's purge).
//
// All the ids go in one pass, as external tables: the read of events
// scans the columns of every date an id was last seen on, which for ids
// spread over the project is nearly all of it, so a pass per chunk of
// 50,000 ids scanned it once a chunk (four times for the 180k ids of the
// bench's purge of 100k persons at ten times, 48 s of its 142). Spliced
// as tuples, the pairs and uuids were also elements of the statement's
// tree, which 18.16 analyses element by element: on 20M events and 159k
// ids, one pass takes 10-12 s, where a chunk of the spliced form ran past
// the store's 60-s read deadline.
func (s *Store) keptLastSeen(ctx context.Context, project uint64, distinctIDs []string, keptCopy string, copyArgs []any, kept string, keptArgs []any) ([]SeenAt, error) {
	if len(distinctIDs) == 0 {
		return nil, nil
	}
	ids, err := ext.NewTable("ids", ext.Column("distinct_id", "String"))
	if err != nil {
		return nil, err
	}
	if _, err := ids.Block().Columns[0].Append(distinctIDs); err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(statement.WithExternalTables(ctx, ids), "SELECT distinct_id, max(toUInt32(timestamp)) FROM "+copyTable+
		" WHERE project_id = ? AND distinct_id IN ids"+keptCopy+" GROUP BY distinct_id",
		append([]any{project}, copyArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("read the kept events' last seen: %w", err)
	}
	seen, err := ext.NewTable("seen", ext.Column("distinct_id", "String"), ext.Column("sec", "UInt32"))
	if err != nil {
		rows.Close()
		return nil, err
	}
	dates := map[string]bool{}
	var lo, hi uint32
	n := 0
	for rows.Next() {
		var id string
		var sec uint32
		if err := rows.Scan(&id, &sec); err != nil {
			rows.Close()
			return nil, err
		}
		if err := seen.Append(id, sec); err != nil {
			rows.Close()
			return nil, err
		}
		dates[time.Unix(int64(sec), 0).UTC().Format(time.DateOnly)] = true
		if n == 0 || sec < lo {
			lo = sec
		}
		hi = max(hi, sec)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	days := make([]any, 0, len(dates))
	for d := range dates {
		days = append(days, d)
	}
	// The uuids of the copy's rows of each id's newest second select its
	// events of that second; the dates and the seconds' range prune the
	// events' partitions and granules.
	rows, err = s.conn.Query(statement.WithExternalTables(ctx, seen), "SELECT distinct_id, max("+seenMs+") FROM events "+
		"WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp <= toDateTime(?) AND toDate(timestamp) IN ? "+
		"AND distinct_id IN (SELECT distinct_id FROM seen) "+
		"AND uuid IN (SELECT uuid FROM "+copyTable+" WHERE project_id = ? AND distinct_id IN (SELECT distinct_id FROM seen) "+
		"AND (distinct_id, toUInt32(timestamp)) IN (SELECT distinct_id, sec FROM seen))"+kept+" GROUP BY distinct_id",
		append([]any{project, lo, hi, clickhouse.GroupSet{Value: days}, project}, keptArgs...)...)
	if err != nil {
		return nil, fmt.Errorf("read the kept events' last seen: %w", err)
	}
	defer rows.Close()
	var out []SeenAt
	for rows.Next() {
		var t SeenAt
		if err := rows.Scan(&t.DistinctID, &t.Ms); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
