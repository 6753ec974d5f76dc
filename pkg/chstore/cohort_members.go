package chstore

import (
	"context"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
)

// writeCohortMembers writes the static cohort membership rows a batch
// folded (cohort_people, docs/cohorts.md). They depend on no other row of
// the batch and a refold writes the same ones, so they go with the events.
func (s *Store) writeCohortMembers(ctx context.Context, rows []fold.CohortMember) error {
	if len(rows) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO cohort_people (project_id, cohort_id, distinct_id, person_id, is_deleted, version)`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := batch.Append(r.ProjectID, r.CohortID, r.DistinctID, r.PersonID, statement.BoolByte(r.IsDeleted), r.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}
