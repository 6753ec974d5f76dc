package eventstore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// TimelineEvent is an event of a person for the properties timeline.
type TimelineEvent struct {
	UUID       uuid.UUID // PersonUpdates only
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

// MaxPersonUpdates bounds the property-updating events read for one
// person's properties at a moment (PersonUpdates).
const MaxPersonUpdates = 100_000

// PersonUpdates returns, in stream order (the order the ingester folded
// them), the events of the given distinct ids at or before until (to the
// millisecond) that carry person property updates: $set, $set_once or
// $unset in their stored properties, which hold them at the top level in
// canonical text. complete is false when there are more than
// MaxPersonUpdates: out then holds the first ones only.
func (s *Store) PersonUpdates(ctx context.Context, projectID uint64, distinctIDs []string, until time.Time) (out []TimelineEvent, complete bool, err error) {
	if len(distinctIDs) == 0 {
		return nil, true, nil
	}
	until = until.UTC()
	rows, err := s.conn.Query(statement.Bound(ctx, nil), `SELECT uuid, event, timestamp, timestamp_ms, properties FROM events FINAL
		WHERE project_id = ? AND distinct_id IN ? AND timestamp <= ?
			AND (position(properties, ?) > 0 OR position(properties, ?) > 0)
		ORDER BY seq LIMIT ?`,
		projectID, statement.Set(distinctIDs), until.Truncate(time.Second), `"$set`, `"$unset"`, MaxPersonUpdates+1)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var e TimelineEvent
		var ms uint16
		if err := rows.Scan(&e.UUID, &e.Name, &e.Timestamp, &ms, &e.Properties); err != nil {
			return nil, false, err
		}
		if n++; n > MaxPersonUpdates {
			return out, false, rows.Err()
		}
		// The second is compared in the statement, the millisecond here.
		if e.Timestamp = e.Timestamp.Add(time.Duration(ms) * time.Millisecond).UTC(); e.Timestamp.After(until) {
			continue
		}
		out = append(out, e)
	}
	return out, true, rows.Err()
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
// block of rows, whatever their number); updatesOnly: only those that
// carry person property updates ($set, $set_once or $unset). fn's error
// ends the read and is returned.
func (s *Store) EachPersonEvent(ctx context.Context, projectID uint64, distinctIDs []string, updatesOnly bool, fn func(PersonEvent) error) error {
	if len(distinctIDs) == 0 {
		return nil
	}
	where, args := "project_id = ? AND distinct_id IN ?", []any{projectID, statement.Set(distinctIDs)}
	if updatesOnly {
		where += " AND (position(properties, ?) > 0 OR position(properties, ?) > 0)"
		args = append(args, `"$set`, `"$unset"`)
	}
	rows, err := s.conn.Query(statement.Bound(ctx, nil), `SELECT uuid, event, distinct_id, timestamp, timestamp_ms, properties FROM events FINAL
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
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}
