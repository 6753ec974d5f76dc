package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Stale person_order keys after a crash (docs/architecture.md, "Crash
// safety"). person_order is written before the persons rows, and a
// refold after a crash may draw other batch boundaries than the crashed
// attempt: that attempt wrote a person's key as of its batch's end (K1,
// live) and maybe not the person's row; the refold folds past that point
// in one batch, writes the person's later key (K2) and tombstones only the
// key of the created_at it read from persons (fold.Batch.Rekeyed), never
// K1. Persons rows are states at a sequence and come out right whatever
// the batching; only the tombstones depend on it. So once the commit
// point has passed every row of the crashed attempt, the ingester
// tombstones every live key above the crash's commit point that is not
// its person's current key.
//
// Only the ingester's own projects (mine): with partitions, another
// ingester's rows above this one's commit point are its live work, and a
// key it wrote just before its persons rows is its person's next key, not
// a stale one.

// OrderRepair is the repair the ingester owes person_order.
type OrderRepair struct {
	// Pending: live keys with a version above From may be stale.
	Pending bool
	From    uint64
	// Through is the highest person_order version found above the
	// commit point: the repair waits until the commit point reaches it,
	// so that every person a stale key names has its final row.
	Through uint64
}

// Due reports whether the repair can run at commit point c.
func (r OrderRepair) Due(c uint64) bool { return r.Pending && c >= r.Through }

// BeginOrderRepair is called at start and before a retry, with the
// commit point c. Rows above c come from a write without its marker: it
// records a pending repair from c (so a second crash before the repair
// still repairs from here), and returns every repair not done yet.
func (s *Store) BeginOrderRepair(ctx context.Context, consumer string, c uint64, mine func(project uint64) bool) (OrderRepair, error) {
	// Narrow columns of the table, no FINAL: any version counts.
	tops, err := s.versionsAbove(ctx, "person_order", c)
	if err != nil {
		return OrderRepair{}, err
	}
	var above uint64
	for project, v := range tops {
		if mine(project) {
			above = max(above, v)
		}
	}
	if above > c {
		if err := s.insertRow(ctx, `INSERT INTO ingest_repairs (consumer, from_seq, through_seq, done, written_at)`,
			consumer, c, above, uint8(0), time.Now().UTC()); err != nil {
			return OrderRepair{}, fmt.Errorf("record pending repair: %w", err)
		}
	}
	// A pending row written at or after the newest done row's commit point
	// is not repaired yet (one written before it was: the repair ran from
	// the lowest pending point).
	var n, from uint64
	err = s.conn.QueryRow(ctx, `SELECT count(), min(from_seq) FROM ingest_repairs
		WHERE consumer = ? AND done = 0 AND from_seq >= (SELECT max(through_seq) FROM ingest_repairs WHERE consumer = ? AND done = 1)`,
		consumer, consumer).Scan(&n, &from)
	if err != nil || n == 0 {
		return OrderRepair{}, err
	}
	return OrderRepair{Pending: true, From: from, Through: max(above, c)}, nil
}

// repairOrderSQL tombstones each live person_order key with a version
// above from that is not its person's current key: the person's newest
// row has another created_at, is deleted, or does not exist. Bounded: the
// candidates are the live rows above from (a scan of narrow columns, no
// FINAL), their keys' newest rows are read by key, and persons by
// (project_id, id) for those ids only. argMax instead of FINAL, so no
// filter ever runs on an old version (18.16 and 24.x alike).
//
// The tombstone's version is the person's current version, which is
// above the stale row's: a stale key was written for the person's state
// at its version v, the person's state at any sequence is a function of
// the log, and its newest row (the state at the commit point, past v) has
// another key, so it changed after v. Should the log fold differently
// (or the person be missing), the stale version + 1 still outranks every
// row of that key. Strictly newer either way: ReplacingMergeTree keeps
// the last inserted of equal versions, but argMax readers do not.
// Idempotent: a second run finds the keys tombstoned. Both sides of the
// join have an alias: current ClickHouse refuses a joined subquery
// without one (joined_subquery_requires_alias).
const repairOrderSQL = `INSERT INTO person_order (project_id, rank, rid, is_deleted, version)
SELECT project_id, rank, rid, 1, greatest(p_version, o_version + 1)
FROM (
	SELECT project_id, rank, rid, max(version) AS o_version, argMax(is_deleted, version) AS o_deleted
	FROM person_order
	WHERE project_id IN ? AND (project_id, rank, rid) IN (SELECT project_id, rank, rid FROM person_order WHERE version > ? AND is_deleted = 0)
	GROUP BY project_id, rank, rid
	HAVING o_deleted = 0
) AS order_rows ANY LEFT JOIN (
	SELECT project_id, bitNot(id) AS rid, bitNot(toUInt32(argMax(created_at, version))) AS p_rank,
		argMax(is_deleted, version) AS p_deleted, max(version) AS p_version
	FROM persons
	WHERE project_id IN ? AND (project_id, id) IN (SELECT project_id, bitNot(rid) FROM person_order WHERE version > ? AND is_deleted = 0)
	GROUP BY project_id, id
) AS person_rows USING (project_id, rid)
WHERE p_version = 0 OR p_deleted = 1 OR rank != p_rank`

// RepairOrder runs the repair from r.From at commit point c (r.Due(c)) and
// records it done.
func (s *Store) RepairOrder(ctx context.Context, consumer string, r OrderRepair, c uint64, mine func(project uint64) bool) error {
	above, err := s.versionsAbove(ctx, "person_order", r.From)
	if err != nil {
		return err
	}
	var projects []uint64
	for project := range above {
		if mine(project) {
			projects = append(projects, project)
		}
	}
	if len(projects) > 0 {
		if err := s.conn.Exec(ctx, repairOrderSQL, statement.Set(projects), r.From, statement.Set(projects), r.From); err != nil {
			return fmt.Errorf("repair person_order: %w", err)
		}
	}
	if err := s.insertRow(ctx, `INSERT INTO ingest_repairs (consumer, from_seq, through_seq, done, written_at)`,
		consumer, r.From, c, uint8(1), time.Now().UTC()); err != nil {
		return fmt.Errorf("record repair: %w", err)
	}
	return nil
}
