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

// StaticMembers is the SELECT of the distinct ids that are members of a
// static cohort of the project (cohort_people, FINAL), of those among ids
// only when ids is not nil (a key read).
func StaticMembers(projectID, cohortID uint64, ids []string) statement.Subquery {
	if ids == nil {
		return statement.NewSubquery("SELECT distinct_id FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ? AND is_deleted = 0", projectID, cohortID)
	}
	return statement.NewSubquery("SELECT distinct_id FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ? AND distinct_id IN ? AND is_deleted = 0",
		projectID, cohortID, statement.Set(ids))
}

// StaticMembersAmong is the SELECT of the distinct ids that are members
// of a static cohort of the project and among those ids selects.
func StaticMembersAmong(projectID, cohortID uint64, ids statement.Subquery) statement.Subquery {
	in, args := ids.In("distinct_id")
	return statement.NewSubquery("SELECT distinct_id FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ? AND is_deleted = 0 AND "+in,
		append([]any{projectID, cohortID}, args...)...)
}
