// Package distinctids owns person_distinct_ids (which person each
// distinct id names, with the row it replaced) and
// person_distinct_id_overrides (the rows that moved an id to another
// person, which the analysis reads): the fold's lookups, the ingester's
// writes, and the reads of a distinct id's owners by the API and the
// persons list.
package distinctids

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/fold"
)

// Store reads and writes the distinct ids' tables through a store's pool.
type Store struct {
	conn driver.Conn
}

// New returns the distinct ids' tables as reached through conn.
func New(conn driver.Conn) *Store { return &Store{conn: conn} }

// Owners names every person that has owned a distinct id, read by key
// without FINAL: a superset of its live owner, for a list's key
// condition. The list's test on the newest row, has(distinct_ids, ?),
// decides, as the person shown does: its distinct_ids are the ones the
// API returns.
func Owners(projectID uint64, distinctID string) statement.Subquery {
	return statement.NewSubquery("SELECT person_id FROM person_distinct_ids WHERE project_id = ? AND distinct_id = ?", projectID, distinctID)
}

// LiveOwners returns the person each live distinct id among distinctIDs
// names, and those persons' ids (a person once per distinct id). ctx
// carries the caller's read settings.
func (s *Store) LiveOwners(ctx context.Context, projectID uint64, distinctIDs []string) (map[string]uint64, []uint64, error) {
	rows, err := s.conn.Query(ctx, "SELECT distinct_id, person_id FROM person_distinct_ids FINAL WHERE project_id = ? AND distinct_id IN ? AND is_deleted = 0",
		projectID, statement.Set(distinctIDs))
	if err != nil {
		return nil, nil, fmt.Errorf("distinct ids: %w", err)
	}
	defer rows.Close()
	owner := map[string]uint64{}
	var ids []uint64
	for rows.Next() {
		var d string
		var id uint64
		if err := rows.Scan(&d, &id); err != nil {
			return nil, nil, err
		}
		owner[d] = id
		ids = append(ids, id)
	}
	return owner, ids, rows.Err()
}

// Load returns the rows of the ids that exist (fold.Loader's
// LoadDistinctIDs), read at the loader's priority.
func (s *Store) Load(ctx context.Context, projectID uint64, ids []string) (map[string]fold.DistinctIDRow, error) {
	out := make(map[string]fold.DistinctIDRow, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, err := statement.KeyTable(ctx, "String", ids)
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, " AND distinct_id IN (SELECT key FROM keys)", projectID, func(r fold.DistinctIDRow) { out[r.DistinctID] = r })
	return out, err
}

// LoadProject calls fn with every row of the project (the fold's read of
// a whole project, fold.ProjectLoader), read at the loader's priority.
func (s *Store) LoadProject(ctx context.Context, projectID uint64, fn func(fold.DistinctIDRow)) error {
	return s.scan(statement.Loader(ctx), "", projectID, fn)
}

// scan calls fn with the newest row of each of the project's ids that
// cond (an AND clause, "" for all) selects.
func (s *Store) scan(ctx context.Context, cond string, projectID uint64, fn func(fold.DistinctIDRow)) error {
	rows, err := s.conn.Query(ctx, `SELECT distinct_id, person_id, is_deleted, version, prev_person_id, prev_is_deleted, prev_version, first_seq
		FROM person_distinct_ids FINAL WHERE project_id = ?`+cond, projectID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r := fold.DistinctIDRow{ProjectID: projectID}
		var del, prevDel uint8
		if err := rows.Scan(&r.DistinctID, &r.PersonID, &del, &r.Version, &r.Prev.PersonID, &prevDel, &r.Prev.Version, &r.FirstSeq); err != nil {
			return err
		}
		r.IsDeleted, r.Prev.IsDeleted = del == 1, prevDel == 1
		fn(r)
	}
	return rows.Err()
}

// Write appends the rows.
func (s *Store) Write(ctx context.Context, rows []fold.DistinctIDRow) error {
	if len(rows) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_distinct_ids (project_id, distinct_id, person_id, is_deleted, version, prev_person_id, prev_is_deleted, prev_version, first_seq)`)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := batch.Append(r.ProjectID, r.DistinctID, r.PersonID, statement.BoolByte(r.IsDeleted), r.Version,
			r.Prev.PersonID, statement.BoolByte(r.Prev.IsDeleted), r.Prev.Version, r.FirstSeq); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// WriteOverrides writes the distinct id rows that are overrides too
// (fold.DistinctIDRow.Overridden), in the stage of the distinct ids: a
// crash leaves them as it leaves those, and the refold writes the same
// rows again (the rule reads each row alone).
func (s *Store) WriteOverrides(ctx context.Context, rows []fold.DistinctIDRow) error {
	var over []fold.DistinctIDRow
	for _, r := range rows {
		if r.Overridden() {
			over = append(over, r)
		}
	}
	if len(over) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO person_distinct_id_overrides (project_id, distinct_id, person_id, is_deleted, version)`)
	if err != nil {
		return err
	}
	for _, r := range over {
		if err := batch.Append(r.ProjectID, r.DistinctID, r.PersonID, statement.BoolByte(r.IsDeleted), r.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}
