package eventstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Written returns the seqs of rows that the events table already
// holds. It reads by the table's sort key, (project_id, toDate(timestamp),
// event, uuid): per project, the (date, event) pairs of the rows, then
// their seq range, so it reads the granules of those pairs and never the
// whole table (the month partitions outside the rows' time range are
// skipped too).
func (s *Store) Written(ctx context.Context, rows []Row) (map[uint64]bool, error) {
	type key struct {
		date  string
		event string
	}
	type span struct {
		pairs            map[key]bool
		minSeq, maxSeq   uint64
		minTime, maxTime int64
	}
	byProject := map[uint64]*span{}
	for _, r := range rows {
		sp := byProject[r.ProjectID]
		if sp == nil {
			sp = &span{pairs: map[key]bool{}, minSeq: r.Seq, maxSeq: r.Seq, minTime: r.Timestamp.Unix(), maxTime: r.Timestamp.Unix()}
			byProject[r.ProjectID] = sp
		}
		sp.pairs[key{r.Timestamp.UTC().Format(time.DateOnly), r.Event}] = true
		sp.minSeq, sp.maxSeq = min(sp.minSeq, r.Seq), max(sp.maxSeq, r.Seq)
		sp.minTime, sp.maxTime = min(sp.minTime, r.Timestamp.Unix()), max(sp.maxTime, r.Timestamp.Unix())
	}
	ctx = statement.Loader(ctx)
	out := map[uint64]bool{}
	for project, sp := range byProject {
		keys := make([]key, 0, len(sp.pairs))
		for k := range sp.pairs {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			return keys[i].date < keys[j].date || keys[i].date == keys[j].date && keys[i].event < keys[j].event
		})
		for start := 0; start < len(keys); start += statement.Chunk {
			part := keys[start:min(start+statement.Chunk, len(keys))]
			pairs := make([]any, len(part))
			for i, k := range part {
				pairs[i] = clickhouse.GroupSet{Value: []any{k.date, k.event}}
			}
			// The timestamp range prunes month partitions; the pairs
			// select the sort key's ranges; seq only filters them.
			q, err := s.conn.Query(ctx, `SELECT seq FROM events
				WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp <= toDateTime(?)
				AND (toDate(timestamp), event) IN ? AND seq >= ? AND seq <= ?`,
				project, sp.minTime, sp.maxTime, clickhouse.GroupSet{Value: pairs}, sp.minSeq, sp.maxSeq)
			if err != nil {
				return nil, err
			}
			for q.Next() {
				var seq uint64
				if err := q.Scan(&seq); err != nil {
					q.Close()
					return nil, err
				}
				out[seq] = true
			}
			q.Close()
			if err := q.Err(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// RestoreCopies copies into events_by_distinct_id the rows of events,
// among the seqs given (rows Written found), that the copy lacks.
// The copy is filled by a materialized view on each INSERT into events,
// and ClickHouse writes the table before its views: an insert that dies
// in between (the server killed, the connection cut) leaves rows in events
// and not in the copy, and since the retry leaves those rows out of its
// insert, the view never sees them again. The rows are copied from events
// as stored, so the copy holds what events does; seqs the copy already
// has are skipped, so an interrupted restore can run again. The counts
// of events_hourly, another view, are corrected too (restoreHourly), the
// rows' seqs added to events_first_seq (restoreFirstSeq) and their times
// to person_last_seen (restoreLastSeen). Only
// the recovery path calls it: a normal batch overlaps nothing.
func (s *Store) RestoreCopies(ctx context.Context, rows []Row, written map[uint64]bool) error {
	byProject := map[uint64][]Row{}
	for _, r := range rows {
		if written[r.Seq] {
			byProject[r.ProjectID] = append(byProject[r.ProjectID], r)
		}
	}
	ctx = statement.Loader(ctx)
	for project, all := range byProject {
		for start := 0; start < len(all); start += statement.Chunk {
			part := all[start:min(start+statement.Chunk, len(all))]
			seqs := make([]uint64, len(part))
			dids := map[string]bool{}
			var didList []string
			lo, hi := part[0].Seq, part[0].Seq
			minTime, maxTime := part[0].Timestamp.Unix(), part[0].Timestamp.Unix()
			for i, r := range part {
				seqs[i] = r.Seq
				if !dids[r.DistinctID] {
					dids[r.DistinctID] = true
					didList = append(didList, r.DistinctID)
				}
				lo, hi = min(lo, r.Seq), max(hi, r.Seq)
				minTime, maxTime = min(minTime, r.Timestamp.Unix()), max(maxTime, r.Timestamp.Unix())
			}
			// The same filter as the view's (schema 0009): the API's
			// command events are not copied.
			err := s.conn.Exec(ctx, `INSERT INTO events_by_distinct_id (project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq)
				SELECT project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq FROM events
				WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp <= toDateTime(?) AND seq IN `+statement.InArray("UInt64")+`
				  AND visitParamHas(properties, '$actor') = 0
				  AND seq NOT IN (SELECT seq FROM events_by_distinct_id WHERE project_id = ? AND distinct_id IN `+statement.InArray("String")+` AND seq >= ? AND seq <= ?)`,
				project, minTime, maxTime, seqs, project, didList, lo, hi)
			if err != nil {
				return fmt.Errorf("restore events_by_distinct_id: %w", err)
			}
		}
	}
	if err := s.restoreHourly(ctx, rows, written); err != nil {
		return err
	}
	if err := s.restoreFirstSeq(ctx, rows, written); err != nil {
		return err
	}
	return s.restoreLastSeen(ctx, rows, written)
}
