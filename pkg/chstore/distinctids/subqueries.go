package distinctids

import (
	"github.com/personhub/personhub/pkg/chstore/statement"
)

// The reads other owners' statements make of the distinct ids' tables,
// as subqueries: the analysis attributes events through the overrides
// (eventstore.Attributed), cohorts find the owners of the ids that did
// something.

// Overrides is the SELECT of the project's overrides (FINAL): distinct_id,
// o_pid (the id's current person) and o_deleted (a tombstone), for a
// join on distinct_id whose unmatched rows read o_pid 0 (no person has id
// 0) and o_deleted 0.
func Overrides(projectID uint64) statement.Subquery {
	return statement.NewSubquery("SELECT distinct_id, person_id AS o_pid, is_deleted AS o_deleted FROM person_distinct_id_overrides FINAL WHERE project_id = ?", projectID)
}

// OverriddenTo is the SELECT of the distinct ids an override gives to
// one of the persons of among (a SELECT of one column of person ids).
func OverriddenTo(projectID uint64, among statement.Subquery) statement.Subquery {
	in, args := among.In("person_id")
	return statement.NewSubquery("SELECT distinct_id FROM person_distinct_id_overrides FINAL WHERE project_id = ? AND is_deleted = 0 AND "+in,
		append([]any{projectID}, args...)...)
}

// OverriddenUpTo is the SELECT of the distinct ids an override gives to a
// person of id up to upTo.
func OverriddenUpTo(projectID, upTo uint64) statement.Subquery {
	return statement.NewSubquery("SELECT distinct_id FROM person_distinct_id_overrides FINAL WHERE project_id = ? AND person_id <= ? AND is_deleted = 0", projectID, upTo)
}

// NewestOverride is the SELECT of the highest version of the project's
// overrides (0 when it has none): the fold's sequence of its latest
// change of an id's owner.
func NewestOverride(projectID uint64) statement.Subquery {
	return statement.NewSubquery("SELECT max(version) FROM person_distinct_id_overrides WHERE project_id = ?", projectID)
}

// LiveOwnerRows is the SELECT of distinct_id and pid (the person that owns
// it) of the project's live distinct ids, of those among ids only when
// ids is not nil.
func LiveOwnerRows(projectID uint64, ids []string) statement.Subquery {
	if ids == nil {
		return statement.NewSubquery("SELECT distinct_id, person_id AS pid FROM person_distinct_ids FINAL WHERE project_id = ? AND is_deleted = 0", projectID)
	}
	return statement.NewSubquery("SELECT distinct_id, person_id AS pid FROM person_distinct_ids FINAL WHERE project_id = ? AND distinct_id IN ? AND is_deleted = 0",
		projectID, statement.Set(ids))
}

// LiveOwnersOf is the SELECT of the persons that own one of the distinct
// ids ids selects (a SELECT of one column) now.
func LiveOwnersOf(projectID uint64, ids statement.Subquery) statement.Subquery {
	in, args := ids.In("distinct_id")
	return statement.NewSubquery("SELECT person_id FROM person_distinct_ids FINAL WHERE project_id = ? AND is_deleted = 0 AND "+in,
		append([]any{projectID}, args...)...)
}

// LiveIDs is the SELECT of the distinct ids among ids that the project
// has live (owned by a person now).
func LiveIDs(projectID uint64, ids []string) statement.Subquery {
	return statement.NewSubquery("SELECT distinct_id FROM person_distinct_ids FINAL WHERE project_id = ? AND distinct_id IN ? AND is_deleted = 0",
		projectID, statement.Set(ids))
}
