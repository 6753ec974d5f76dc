package cohort

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/propfilter"
)

// readCtx keeps filters after FINAL (a WHERE moved to PREWHERE would test
// old versions of a row on ClickHouse 18.16) and allows long statements
// (values are spliced by the driver).
func readCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
		"optimize_move_to_prewhere": 0, "max_query_size": statement.MaxQuerySize}))
}

// ownerOf is the condition "the persons row owns one of the distinct ids
// ids selects", through the current owner of each id: a member id merged
// into another person makes that person the member.
//
// Scoped to one person, ids reads only the person's ids: a scoped
// resolver answers for that person's row alone, so narrowing every inner
// set to the rows of its distinct ids (key reads instead of project
// scans) cannot change the answer. The owner is then the row itself: a
// persons row lists the ids its person owns (distinct_ids, written with
// every change of them), so the ids found need only be in the row's
// list, with no lookup of person_distinct_ids (a FINAL read per cohort,
// most of the statement's time: docs/performance-history.md, "under
// steady writes"). The list is the row's newest, so an id that left the
// person since the caller read its ids is no longer the person's.
func (r *resolver) ownerOf(ids statement.Subquery) propfilter.Clause {
	if r.person == nil {
		sql, args := distinctids.LiveOwnersOf(r.project, ids).In("id")
		return propfilter.Clause{SQL: sql, Args: args}
	}
	sub, args := ids.Text()
	if len(r.person.distinctIDs) == 0 {
		return propfilter.Clause{SQL: "(1 = 0)"}
	}
	return propfilter.Clause{SQL: "hasAny(distinct_ids, (SELECT groupArray(distinct_id) FROM (" + sub + ")))", Args: args}
}

// personScope is the one person a scoped resolver evaluates membership
// for: its id and the distinct ids its row lists.
type personScope struct {
	id          uint64
	distinctIDs []string
}

// Options are the persons list's filter options: cohort filters compiled
// against the project's cohorts (unknown or deleted: a 400).
func (s *Service) Options(projectID uint64) propfilter.Options {
	return propfilter.Options{Cohorts: &resolver{s: s, project: projectID}}
}

// resolver compiles cohort filters of one project; stack holds the cohorts
// being compiled, so a reference loop is an error instead of a recursion.
// With person set, conditions are compiled for that person's row only
// (persons/cohorts/).
type resolver struct {
	s       *Service
	project uint64
	stack   []uint64
	person  *personScope
}

// CohortClause implements propfilter.CohortResolver. Cohorts named inside
// another cohort's definition still count when deleted (the definition
// stays what it was); named at the top level, a deleted cohort is unknown.
func (r *resolver) CohortClause(ctx context.Context, id uint64) (propfilter.Clause, bool, error) {
	if slices.Contains(r.stack, id) {
		return propfilter.Clause{}, false, invalid("filters", "Cohorts cannot reference other cohorts in a loop.")
	}
	c, err := r.s.get(ctx, r.project, id)
	if errors.Is(err, ErrNotFound) || (err == nil && c.Deleted && len(r.stack) == 0) {
		return propfilter.Clause{}, false, nil
	}
	if err != nil {
		return propfilter.Clause{}, false, err
	}
	cl, err := r.clause(ctx, c)
	return cl, err == nil, err
}

// clause is the membership condition of c over a persons row.
func (r *resolver) clause(ctx context.Context, c Cohort) (propfilter.Clause, error) {
	if c.IsStatic {
		var only []string // every member; scoped, the person's ids only
		if r.person != nil {
			only = r.person.distinctIDs
		}
		return r.ownerOf(chstore.StaticMembers(r.project, c.ID, only)), nil
	}
	if len(r.stack) >= maxNesting {
		return propfilter.Clause{}, invalid("filters", "Cohorts are nested deeper than %d levels.", maxNesting)
	}
	r.stack = append(r.stack, c.ID)
	defer func() { r.stack = r.stack[:len(r.stack)-1] }()
	cl, err := propfilter.ParseWith(ctx, c.properties(), propfilter.Options{Cohorts: r, Behavioral: r.behavioral})
	if err != nil {
		return cl, err
	}
	if cl.SQL == "" {
		cl.SQL = "(1 = 1)"
	}
	return cl, nil
}

// compile checks that a definition compiles (filters valid, cohorts it
// names exist, no loop) and returns its condition.
// With person, the condition holds for that person's row only.
func (s *Service) compile(ctx context.Context, projectID uint64, c Cohort, person *personScope) (propfilter.Clause, error) {
	r := &resolver{s: s, project: projectID, person: person}
	if c.ID != 0 {
		r.stack = []uint64{c.ID}
		defer func() { r.stack = nil }()
	}
	cl, err := r.clause(ctx, c)
	var pe *propfilter.Error
	if errors.As(err, &pe) {
		return cl, invalid("filters", "Filters are invalid: %s", pe.Detail)
	}
	return cl, err
}

// countChunk bounds the cohorts counted by one statement.
const countChunk = 50

// counts returns, per cohort, the live persons of the project that are
// members (with person, whether that person is: 0 or 1): one statement per
// chunk of cohorts, each a countIf over one scan of the persons (with
// person, a key read of its row, the conditions compiled for it alone).
// A definition that no longer compiles (it names a cohort since removed)
// has no count (ok false).
func (s *Service) counts(ctx context.Context, projectID uint64, cohorts []Cohort, person *personScope) (n []uint64, ok []bool, err error) {
	n, ok = make([]uint64, len(cohorts)), make([]bool, len(cohorts))
	for start := 0; start < len(cohorts); start += countChunk {
		var exprs []string
		var args []any
		var idx []int
		for i := start; i < min(start+countChunk, len(cohorts)); i++ {
			cl, err := s.compile(ctx, projectID, cohorts[i], person)
			var ce *Error
			if errors.As(err, &ce) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			exprs = append(exprs, "countIf("+cl.SQL+")")
			args = append(args, cl.Args...)
			idx = append(idx, i)
		}
		if len(exprs) == 0 {
			continue
		}
		one := uint64(0)
		if person != nil {
			one = person.id
		}
		sql, qargs := chstore.OverLivePersons(projectID, one, "["+strings.Join(exprs, ", ")+"]", args...).Text()
		var got []uint64
		if err := s.conn.QueryRow(readCtx(ctx), sql, qargs...).Scan(&got); err != nil {
			return nil, nil, fmt.Errorf("cohort: count members: %w", err)
		}
		for j, i := range idx {
			n[i], ok[i] = got[j], true
		}
	}
	return n, ok, nil
}

// withCounts evaluates the cohorts' member counts now (and remembers them
// for persons/cohorts/, countcache.go).
func (s *Service) withCounts(ctx context.Context, projectID uint64, cohorts []Cohort) ([]View, error) {
	at := s.now().UTC()
	n, ok, err := s.counts(ctx, projectID, cohorts, nil)
	if err != nil {
		return nil, err
	}
	out := make([]View, len(cohorts))
	for i, c := range cohorts {
		out[i] = View{Cohort: c, CalculatedAt: at}
		if ok[i] {
			out[i].Count = &n[i]
		}
		s.countCache.put(projectID, out[i])
	}
	return out, nil
}

// memberships reports, per cohort, whether the person is a member.
func (s *Service) memberships(ctx context.Context, projectID uint64, cohorts []Cohort, person personScope) ([]bool, error) {
	n, ok, err := s.counts(ctx, projectID, cohorts, &person)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(cohorts))
	for i := range cohorts {
		out[i] = ok[i] && n[i] > 0
	}
	return out, nil
}
