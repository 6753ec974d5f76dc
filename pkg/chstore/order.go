package chstore

import (
	"context"
	"math"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
)

// The list's order as a sort key of person_order (schema 0008): ascending
// (rank, rid) is created_at DESC, id DESC. created_at is stored to the
// second, so the rank is too.
func orderRank(createdAt time.Time) uint32 { return math.MaxUint32 - uint32(createdAt.Unix()) }

func orderRID(id uint64) uint64 { return math.MaxUint64 - id }

func idOfRID(rid uint64) uint64 { return math.MaxUint64 - rid }

// WritePersonOrder writes a batch's persons at their ordering keys, and a
// tombstone at the old key of each person whose created_at moved. The
// rows are a function of the persons rows (and the store's previous
// created_at); a refold batched differently may leave a crashed
// attempt's key live (repair.go). WriteRows calls it in its first stage;
// exported for tests that cut a write between it and the persons.
func (s *Store) WritePersonOrder(ctx context.Context, b fold.Batch) error {
	if len(b.Persons) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_order (project_id, rank, rid, is_deleted, version)`)
	if err != nil {
		return err
	}
	for _, p := range b.Persons {
		if err := batch.Append(p.ProjectID, orderRank(p.CreatedAt), orderRID(p.ID), statement.BoolByte(p.IsDeleted), p.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	for _, r := range b.Rekeyed {
		if err := batch.Append(r.ProjectID, orderRank(r.CreatedAt), orderRID(r.ID), uint8(1), r.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}
