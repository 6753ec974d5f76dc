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

// EmailGrams is emailGrams (grams.go), for the migration's test.
var EmailGrams = emailGrams

// SearchCandidates is the statement naming the candidates of q's search=
// and its arguments: run inside an IN, its reads are not in the progress
// a client receives (18.16), so a test runs it on its own to count them.
func (s *Store) SearchCandidates(ctx context.Context, q ListQuery) (string, []any, error) {
	grams, err := s.searchGrams(ctx, q)
	sql, args := searchCandidates(q.ProjectID, q.Search, grams)
	return sql, args, err
}

// SlotPage reports whether q's unfiltered page is served from the slot
// counts (listslots.go), and its ids.
func (s *Store) SlotPage(ctx context.Context, q ListQuery) ([]uint64, bool, error) {
	total, _, ok, err := s.LiveCount(ctx, q.ProjectID)
	if err != nil || !ok {
		return nil, false, err
	}
	rids, ok, err := s.slotPage(ctx, q, total)
	return ridsToIDs(rids), ok, err
}

// ListByWindows is the unfiltered list without the slot counts (the
// windows' path of listdeep.go for every page), for an A/B.
func (s *Store) ListByWindows(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	list, total, _, err := s.listUnfiltered(ctx, q, false)
	return list, total, err
}

// ListByPropertiesByKey is the properties list verifying every candidate
// by key, without the newest versions (listnewest.go), for an A/B.
func (s *Store) ListByPropertiesByKey(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	return s.listByPropertiesWith(ctx, q, false)
}

// KeyReadCtx and LoaderCtx are the contexts of the API's key reads and of
// the fold's lookups, for the test of their priorities.
var (
	KeyReadCtx = keyReadCtx
	LoaderCtx  = loaderCtx
)
