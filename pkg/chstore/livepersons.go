package chstore

import "github.com/personhub/personhub/pkg/chstore/statement"

// The reads other packages' statements make of the persons table, as
// subqueries: the analysis and cohorts evaluate their own conditions
// (over the table's columns: id, uuid, created_at, property_keys,
// property_values, distinct_ids, with their arguments) on the project's
// live rows, read FINAL.

// LivePersons is the SELECT of the ids of the project's live persons
// that meet where.
func LivePersons(projectID uint64, where string, args ...any) statement.Subquery {
	return statement.NewSubquery("SELECT id FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 AND "+where,
		append([]any{projectID}, args...)...)
}

// LivePersonRows is the SELECT of the project's live persons with the
// columns a person filter reads: pid and id (both the person's id),
// property_keys and property_values.
func LivePersonRows(projectID uint64) statement.Subquery {
	return statement.NewSubquery("SELECT id AS pid, id, property_keys, property_values FROM persons FINAL WHERE project_id = ? AND is_deleted = 0", projectID)
}

// LiveDistinctIDs is the SELECT of the distinct ids of the project's live
// persons that meet where.
func LiveDistinctIDs(projectID uint64, where string, args ...any) statement.Subquery {
	return statement.NewSubquery("SELECT arrayJoin(distinct_ids) FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 AND "+where,
		append([]any{projectID}, args...)...)
}

// OverLivePersons is the SELECT of one row: columns (expressions over the
// persons columns, aggregates, with their arguments args) over the
// project's live persons, or over the one live person of id person when
// person is not 0.
func OverLivePersons(projectID, person uint64, columns string, args ...any) statement.Subquery {
	args = append(args[:len(args):len(args)], projectID)
	if person != 0 {
		// The sort key: every version of the row passes, so PREWHERE is
		// safe under FINAL (the caller's settings keep other filters
		// after it).
		return statement.NewSubquery("SELECT "+columns+" FROM persons FINAL PREWHERE project_id = ? AND id = ? WHERE is_deleted = 0",
			append(args, person)...)
	}
	return statement.NewSubquery("SELECT "+columns+" FROM persons FINAL WHERE project_id = ? AND is_deleted = 0", args...)
}

// PersonNear is the SELECT of the id of the project's person at row m of
// one thread's read in storage order (with max_threads 1), none when it
// has fewer rows: parts are written in stream order and persons' ids are
// stream sequences, so that is near the m-th smallest id, read from
// about m rows (ORDER BY id would read and sort every person of the
// project: 40 ms at 1M).
func PersonNear(projectID uint64, m int) statement.Subquery {
	return statement.NewSubquery("SELECT id FROM persons WHERE project_id = ? LIMIT ?, 1", projectID, m)
}
