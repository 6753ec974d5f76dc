package chstore

import (
	"context"
	"time"
)

// ValueRecounts reports how many full and partial recounts
// CountPropertyValues made (values_counts.go).
func (s *Store) ValueRecounts() (full, partial int) {
	s.values.mu.Lock()
	defer s.values.mu.Unlock()
	return s.values.full, s.values.partial
}

// SearchCandidates is the statement naming the candidates of q's search=
// and its arguments: run inside an IN, its reads are not in the progress
// a client receives (18.16), so a test runs it on its own to count them.
func (s *Store) SearchCandidates(ctx context.Context, q ListQuery) (string, []any, error) {
	probe, err := s.search.Probe(ctx, q.ProjectID, q.Search)
	sql, args := searchCandidates(q.ProjectID, q.Search, probe).Text()
	return sql, args, err
}

// SlotPage reports whether q's unfiltered page is served from the slot
// counts (listslots.go), and its ids.
func (s *Store) SlotPage(ctx context.Context, q ListQuery) ([]uint64, bool, error) {
	total, _, ok, err := s.LiveCount(ctx, q.ProjectID)
	if err != nil || !ok {
		return nil, false, err
	}
	keys, ok, err := s.slotPage(ctx, q, total)
	ids := make([]uint64, len(keys))
	for i, k := range keys {
		ids[i] = k.id
	}
	return ids, ok, err
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

// ListPhases runs the pieces of the properties list (listprops.go) one
// after another and times each, with two variants of the scan: rows
// decoded but not settled, and reduced on the server to one row.
func (s *Store) ListPhases(ctx context.Context, q ListQuery) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	start := time.Now()
	if _, err := s.personsParts(ctx); err != nil {
		return nil, err
	}
	out["parts"] = time.Since(start)
	start = time.Now()
	snap, ok, err := s.newestSnapshot(ctx, q.ProjectID)
	if err != nil || !ok {
		return nil, err
	}
	out["snapshot"] = time.Since(start)
	f := q.Properties
	args := append([]any{q.ProjectID}, f.Args...)
	start = time.Now()
	var a, b uint64
	if err := s.conn.QueryRow(ctx, "SELECT sum(id), sum(version) FROM persons PREWHERE project_id = ? AND "+f.SQL, args...).Scan(&a, &b); err != nil {
		return nil, err
	}
	out["scan-server"] = time.Since(start)
	start = time.Now()
	rows, err := s.conn.Query(ctx, "SELECT id, version FROM persons PREWHERE project_id = ? AND "+f.SQL, args...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
	}
	rows.Close()
	out["scan-rows"] = time.Since(start)
	start = time.Now()
	live, _, err := s.settledCandidates(ctx, q.ProjectID, f, snap)
	if err != nil {
		return nil, err
	}
	out["scan-settle"] = time.Since(start)
	start = time.Now()
	top := topForList(live, q.Offset+q.Limit)
	out["top"] = time.Since(start)
	start = time.Now()
	if _, err := s.materialiseRows(ctx, q, top); err != nil {
		return nil, err
	}
	out["page"] = time.Since(start)
	return out, nil
}

// WithoutRowCache is a Store on the same pool and hints without the row
// cache (rowcache.go), for A/B benchmarks.
func (s *Store) WithoutRowCache() *Store {
	c := *s
	c.rows = newRowCache(-1)
	return &c
}

// SetMarkClock sets the clock of the pages kept by watermark
// (listmark.go), and MarkHits is how many pages they answered.
func (s *Store) SetMarkClock(now func() time.Time) {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	s.marks.now = now
}

func (s *Store) MarkHits() uint64 {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	return s.marks.hits
}

// ForgetMarks drops the pages kept by watermark (benchmarks).
func (s *Store) ForgetMarks() {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	clear(s.marks.by)
}

// GramProbes is how many statements of capped gram counts search= made
// (search.Index.Probes).
func (s *Store) GramProbes() int { return s.search.Probes() }

// OnGramCensus calls f when a project's gram census load ends, and ages
// every census read (search.Index.WatchCensus).
func (s *Store) OnGramCensus(f func(project uint64), aged bool) { s.search.WatchCensus(f, aged) }

// SetPiecePersons sets the persons of one insert (ingest.go) until the
// returned function restores it.
func SetPiecePersons(n int) (restore func()) {
	old := piecePersons
	piecePersons = n
	return func() { piecePersons = old }
}

// MigrationExec runs st as a migration statement.
func (s *Store) MigrationExec(ctx context.Context, st string) error {
	return storeTarget{s, s.migrationTimeout}.Exec(ctx, st)
}
