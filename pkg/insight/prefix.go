package insight

import (
	"context"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
)

// Pages in person order from the persons up to an id (the analysis
// figures, docs/performance.md).
//
// Stickiness, the funnel's fast path and path without a key answer the
// persons that qualify, by person id. Grouping every event of the range
// into persons costs several bare scans: every row's distinct id is
// probed in the overrides (the join) and lands in a hash table of every
// active person, merged across threads. A page needs only the first
// persons that qualify. So the scan first keeps the persons up to an id
// X (scan.upTo), and cheaply: in its PREWHERE, the rows whose stored
// person_id is at most X, or whose distinct id an override gives to a
// person at most X (a small set); only those rows read the other columns,
// meet the join and are grouped. After the join, pid <= X drops the rows
// an override gave to a later person. That is exact: every row whose
// current person is at most X is kept, so those persons are complete, and
// the qualifying ones among them are the first of the whole answer.
//
// X is the id of about the (offset + limit) x prefixPersonsPerActor-th
// person of the project; when fewer persons than offset + limit qualify
// up to it, X moves prefixGrowth times further; past maxPrefixPersons
// (deep pages, rare answers) the whole grouping answers instead.

const (
	// prefixPersonsPerActor: persons of the project (below X) per actor
	// wanted. Generous: rows below X cost little (in the bench: a funnel's third
	// step holds 1 person in 27; 128 x 101 persons are 1.3% of 1M).
	prefixPersonsPerActor = 128
	// prefixGrowth multiplies the persons below X after a short answer.
	prefixGrowth = 16
	// maxPrefixPersons: beyond, a bound costs as much as none.
	maxPrefixPersons = 1 << 20
)

// prefixQuery builds the statement over the scan of the persons up to
// id upTo, selecting for each of them pid (UInt64) and ok (UInt8: the
// person qualifies).
type prefixQuery func(upTo uint64) (string, []any)

// prefixPage answers page of the qualifying persons by pid from the
// persons up to an id, or from full when the page is unbounded or no
// bound of at most maxPrefixPersons persons holds it.
func (st *Store) prefixPage(ctx context.Context, project uint64, page Page, q prefixQuery, full func() ([]Actor, error)) ([]Actor, error) {
	if page.Limit <= 0 {
		return full()
	}
	need := page.Offset + page.Limit
	for m := need * st.prefixPersons; m <= maxPrefixPersons; m *= prefixGrowth {
		upTo, ok, err := st.personIDNear(ctx, project, m)
		if err != nil {
			return nil, err
		}
		if !ok {
			break // fewer persons than m: the bound would keep them all
		}
		sql, args := q(upTo)
		found, err := st.prefixActors(ctx, sql, args)
		if err != nil {
			return nil, err
		}
		if len(found) >= need {
			return found[page.Offset:need], nil
		}
	}
	return full()
}

// personIDNear is the id of about the m-th person of the project in id
// order, false when it has fewer rows. Any id would keep the answer
// exact (it only bounds the persons read), so it is the m-th row of one
// thread's read in storage order, which reads about m rows: parts are
// written in stream order and persons' ids are stream sequences, so
// that is near the m-th smallest id (ORDER BY id would read and sort
// every person of the project: 40 ms at 1M).
func (st *Store) personIDNear(ctx context.Context, project uint64, m int) (uint64, bool, error) {
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_threads": 1}))
	sql, args := chstore.PersonNear(project, m).Text()
	rows, err := st.conn.Query(ctx, sql, args...)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	var id uint64
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	if err := rows.Scan(&id); err != nil {
		return 0, false, err
	}
	return id, true, rows.Err()
}

// prefixActors runs a prefixQuery and returns its qualifying persons by
// pid.
func (st *Store) prefixActors(ctx context.Context, sql string, args []any) ([]Actor, error) {
	var found []Actor
	rows, err := st.conn.Query(readCtx(ctx), sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid uint64
		var ok uint8
		if err := rows.Scan(&pid, &ok); err != nil {
			return nil, err
		}
		if ok != 0 {
			found = append(found, Actor{PersonID: pid})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(found, func(a, b Actor) int {
		switch {
		case a.PersonID < b.PersonID:
			return -1
		case a.PersonID > b.PersonID:
			return 1
		}
		return 0
	})
	return found, nil
}
