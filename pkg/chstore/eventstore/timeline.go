package eventstore

import (
	"context"
	"time"

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
