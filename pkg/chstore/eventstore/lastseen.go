package eventstore

import (
	"context"
	"fmt"
	"time"

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
// id (it holds exactly the events the view of schema 0020 reads). GROUP
// BY, not DISTINCT: on ClickHouse 18.16 a DISTINCT whose WHERE holds an
// IN (subquery), as statement.InArray writes it, dedupes each thread's
// stream alone and returns an id once per thread that read it.
func (s *Store) PurgedDistinctIDs(ctx context.Context, project uint64, targets []PurgeTarget, hours Hours) ([]string, error) {
	where, args := purgeWhere(project, targets)
	cut, cargs := hours.cond("timestamp")
	return s.strings(ctx, "SELECT distinct_id FROM "+copyTable+" WHERE "+where+cut+" GROUP BY distinct_id", append(args, cargs...)...)
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
// without events. One read of the copy by distinct id, by its key.
func (s *Store) KeptLastSeen(ctx context.Context, project uint64, distinctIDs []string, targets []PurgeTarget, hours Hours) ([]SeenAt, error) {
	where, wargs := purgeWhere(project, targets)
	cut, cargs := hours.cond("timestamp")
	kept := " AND NOT (" + where + cut + ")"
	keptArgs := append(wargs, cargs...)
	return s.keptLastSeen(ctx, project, distinctIDs, kept, keptArgs)
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
// distinct id, with its arguments) selects: one read of the copy by its
// key, which holds the behaviour events alone and, since schema 0023,
// their milliseconds. The ids go as an external table, not spliced into
// the statement, whose tree 18.16 analyses element by element.
func (s *Store) keptLastSeen(ctx context.Context, project uint64, distinctIDs []string, keptCopy string, copyArgs []any) ([]SeenAt, error) {
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
	rows, err := s.conn.Query(statement.WithExternalTables(ctx, ids), "SELECT distinct_id, max("+seenMs+") FROM "+copyTable+
		" WHERE project_id = ? AND distinct_id IN ids"+keptCopy+" GROUP BY distinct_id",
		append([]any{project}, copyArgs...)...)
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
