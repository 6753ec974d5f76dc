package chstore

import "context"

// ValueRecounts reports how many full and partial recounts
// CountPropertyValues made (values_counts.go).
func (s *Store) ValueRecounts() (full, partial int) {
	s.values.mu.Lock()
	defer s.values.mu.Unlock()
	return s.values.full, s.values.partial
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
