package cohort

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

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
// the subquery selects" (sub with its args), through the current owner of
// each id: a member id merged into another person makes that person the
// member. Scoped to one person, sub reads only the person's ids
// (onlyPerson), and the owner is the row itself: a persons row lists the
// ids its person owns (distinct_ids, written with every change of them),
// so the ids found need only be in the row's list, with no lookup of
// person_distinct_ids (a FINAL read per cohort, most of the statement's
// time: docs/performance-history.md, "under steady writes"). The list is the row's newest,
// so an id that left the person since the caller read its ids is no
// longer the person's.
func (r *resolver) ownerOf(sub string, args ...any) propfilter.Clause {
	if r.person == nil {
		return propfilter.Clause{
			SQL:  "id IN (SELECT person_id FROM person_distinct_ids FINAL WHERE project_id = ? AND is_deleted = 0 AND distinct_id IN (" + sub + "))",
			Args: append([]any{r.project}, args...),
		}
	}
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

// onlyPerson narrows a scan of rows with a distinct_id column to the
// scoped person's ids (empty when not scoped). Conditions of a scoped
// resolver are exact for that person's row only; the person's membership
// is all a scoped query asks, so narrowing every inner set to the rows of
// its distinct ids (key reads instead of project scans) cannot change it.
func (r *resolver) onlyPerson(column string) (string, []any) {
	if r.person == nil {
		return "", nil
	}
	return " AND " + column + " IN ?", []any{groupSet(r.person.distinctIDs)}
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
		only, args := r.onlyPerson("distinct_id")
		return r.ownerOf("SELECT distinct_id FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ?"+only+" AND is_deleted = 0",
			append([]any{r.project, c.ID}, args...)...), nil
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
		sql := "SELECT [" + strings.Join(exprs, ", ") + "] FROM persons FINAL WHERE project_id = ? AND is_deleted = 0"
		args = append(args, projectID)
		if person != nil {
			// The sort key: every version of the row passes, so PREWHERE
			// is safe under FINAL (readCtx keeps other filters after it).
			sql = "SELECT [" + strings.Join(exprs, ", ") + "] FROM persons FINAL PREWHERE project_id = ? AND id = ? WHERE is_deleted = 0"
			args = append(args, person.id)
		}
		var got []uint64
		if err := s.conn.QueryRow(readCtx(ctx), sql, args...).Scan(&got); err != nil {
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

func groupSet[T any](values []T) clickhouse.GroupSet {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return clickhouse.GroupSet{Value: out}
}
