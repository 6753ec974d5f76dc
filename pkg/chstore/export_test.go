package chstore

import "context"

// ValueRecounts reports how many full and partial recounts
// CountPropertyValues made (values_counts.go).
func (s *Store) ValueRecounts() (full, partial int) {
	s.values.mu.Lock()
	defer s.values.mu.Unlock()
	return s.values.full, s.values.partial
}

// ReserveEventProperties prepares an events insert, reserves its
// properties column (reserve.go) and reports whether it could, with the
// column's buffer capacity after; the batch is aborted.
func (s *Store) ReserveEventProperties(ctx context.Context, rows, size int) (bool, error) {
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
	if err != nil {
		return false, err
	}
	defer batch.Abort()
	return reserveStrings(batch, 8, rows, size), nil
}
