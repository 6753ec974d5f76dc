package chstore

// ValueRecounts reports how many full and partial recounts
// CountPropertyValues made (values_counts.go).
func (s *Store) ValueRecounts() (full, partial int) {
	s.values.mu.Lock()
	defer s.values.mu.Unlock()
	return s.values.full, s.values.partial
}
