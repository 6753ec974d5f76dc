package eventstore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// TimelineEvent is an event of a person for the properties timeline.
type TimelineEvent struct {
	Name       string
	Timestamp  time.Time
	Properties string
}

// MaxTimelineEvents bounds the events read for one timeline.
const MaxTimelineEvents = 100_000

// PersonEvents returns, in stream order, the events of the given distinct
// ids up to until (at most MaxTimelineEvents, the latest ones).
func (s *Store) PersonEvents(ctx context.Context, projectID uint64, distinctIDs []string, until time.Time) ([]TimelineEvent, error) {
	if len(distinctIDs) == 0 {
		return nil, nil
	}
	rows, err := s.conn.Query(statement.Bound(ctx, nil), `SELECT event, timestamp, timestamp_ms, properties FROM (
			SELECT event, timestamp, timestamp_ms, properties, seq FROM events FINAL
			WHERE project_id = ? AND distinct_id IN ? AND timestamp <= ?
			ORDER BY seq DESC LIMIT ?) ORDER BY seq`,
		projectID, statement.Set(distinctIDs), until.UTC(), MaxTimelineEvents)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TimelineEvent
	for rows.Next() {
		var e TimelineEvent
		var ms uint16
		if err := rows.Scan(&e.Name, &e.Timestamp, &ms, &e.Properties); err != nil {
			return nil, err
		}
		e.Timestamp = e.Timestamp.Add(time.Duration(ms) * time.Millisecond).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// PersonEvent is one stored event of a person, as an export shows it.
type PersonEvent struct {
	UUID       uuid.UUID
	Name       string
	DistinctID string
	Timestamp  time.Time
	Properties string // the stored JSON object
}

// EachPersonEvent calls fn with every stored event of the given distinct
// ids, in stream order, reading them as a stream (memory bounded by a
// block of rows, whatever their number). updatesOnly: only those that
// carry person property updates ($set, $set_once or $unset in their
// stored properties, which hold them at the top level in canonical
// text). until, when not zero: only those at or before it, to the
// millisecond. fn's error ends the read and is returned.
func (s *Store) EachPersonEvent(ctx context.Context, projectID uint64, distinctIDs []string, updatesOnly bool, until time.Time, fn func(PersonEvent) error) error {
	if len(distinctIDs) == 0 {
		return nil
	}
	until = until.UTC()
	where, args := "project_id = ? AND distinct_id IN ?", []any{projectID, statement.Set(distinctIDs)}
	if updatesOnly {
		where += " AND (position(properties, ?) > 0 OR position(properties, ?) > 0)"
		args = append(args, `"$set`, `"$unset"`)
	}
	if !until.IsZero() {
		// The second is compared here, the millisecond below.
		where += " AND timestamp <= ?"
		args = append(args, until.Truncate(time.Second))
	}
	// Read: the filters stay after FINAL (a replay may have rewritten an
	// event's properties; an old version must not match).
	rows, err := s.conn.Query(statement.Read(ctx), `SELECT uuid, event, distinct_id, timestamp, timestamp_ms, properties FROM events FINAL
		WHERE `+where+` ORDER BY seq`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e PersonEvent
		var ms uint16
		if err := rows.Scan(&e.UUID, &e.Name, &e.DistinctID, &e.Timestamp, &ms, &e.Properties); err != nil {
			return err
		}
		e.Timestamp = e.Timestamp.Add(time.Duration(ms) * time.Millisecond).UTC()
		if !until.IsZero() && e.Timestamp.After(until) {
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}
