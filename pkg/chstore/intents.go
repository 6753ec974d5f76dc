package chstore

import (
	"context"
	"time"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// WriteIntent records, before a batch's rows are written, that a consumer
// may write rows up to through without committing them (ingest_intents):
// after a crash, the next start learns from LastIntent how far rows of an
// uncommitted batch can reach, since the commit marker never came.
func (s *Store) WriteIntent(ctx context.Context, consumer string, first, through uint64) error {
	return wrap("write intent", s.insertRow(ctx, `INSERT INTO ingest_intents (consumer, first_seq, through_seq, written_at)`,
		consumer, first, through, time.Now().UTC()))
}

// LastIntent returns the highest sequence a consumer's intents cover (0:
// none).
func (s *Store) LastIntent(ctx context.Context, consumer string) (uint64, error) {
	var seq uint64
	err := s.conn.QueryRow(ctx, "SELECT max(through_seq) FROM ingest_intents WHERE consumer = ?", consumer).Scan(&seq)
	return seq, err
}

// WrittenEvents returns the seqs of rows that the events table already
// holds (eventstore.Store.Written): the ingester's check of what an
// interrupted batch left, before it writes the batch again.
func (s *Store) WrittenEvents(ctx context.Context, rows []eventstore.Row) (map[uint64]bool, error) {
	return s.events.Written(ctx, rows)
}

// RestoreCopies restores the rows the events tables' views lack for the
// rows an interrupted insert left in events (eventstore.Store.RestoreCopies).
func (s *Store) RestoreCopies(ctx context.Context, rows []eventstore.Row, written map[uint64]bool) error {
	return s.events.RestoreCopies(ctx, rows, written)
}
