package eventstore

import (
	"context"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// ReserveProperties prepares an events insert, reserves its properties
// column (statement.ReserveStrings) and reports whether it could; the
// batch is aborted.
func (s *Store) ReserveProperties(ctx context.Context, rows, size int) (bool, error) {
	batch, err := s.conn.PrepareBatch(ctx, insertEvents)
	if err != nil {
		return false, err
	}
	defer batch.Abort()
	return statement.ReserveStrings(batch, 8, rows, size), nil
}
