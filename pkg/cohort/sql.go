package cohort

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/propfilter"
)

// readCtx keeps filters after FINAL (a WHERE moved to PREWHERE would test
// old versions of a row on ClickHouse 18.16) and allows long statements
// (values are spliced by the driver).
func readCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
		"optimize_move_to_prewhere": 0, "max_query_size": chstore.MaxQuerySize}))
}

// ownerOf is the condition "the persons row owns one of the distinct ids
// the subquery selects", through the current owner of each id: a member id
// merged into another person makes that person the member.
func ownerOf(sub string) string {
	return "id IN (SELECT person_id FROM person_distinct_ids FINAL WHERE project_id = ? AND is_deleted = 0 AND distinct_id IN (" + sub + "))"
}

// Options are the persons list's filter options: cohort filters compiled
// against the project's cohorts (unknown or deleted: a 400).
func (s *Service) Options(projectID uint64) propfilter.Options {
	return propfilter.Options{Cohorts: &resolver{s: s, project: projectID}}
}

// resolver compiles cohort filters of one project; stack holds the cohorts
// being compiled, so a reference loop is an error instead of a recursion.
type resolver struct {
	s       *Service
	project uint64
	stack   []uint64
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
		return propfilter.Clause{
			SQL:  ownerOf("SELECT distinct_id FROM cohort_people FINAL WHERE project_id = ? AND cohort_id = ? AND is_deleted = 0"),
			Args: []any{r.project, r.project, c.ID},
		}, nil
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
func (s *Service) compile(ctx context.Context, projectID uint64, c Cohort) (propfilter.Clause, error) {
	r := &resolver{s: s, project: projectID}
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
// members (and, with personID > 0, are that person): one statement per
// chunk of cohorts, each a countIf over one scan of the persons.
// A definition that no longer compiles (it names a cohort since removed)
// has no count (ok false).
func (s *Service) counts(ctx context.Context, projectID uint64, cohorts []Cohort, personID uint64) (n []uint64, ok []bool, err error) {
	n, ok = make([]uint64, len(cohorts)), make([]bool, len(cohorts))
	for start := 0; start < len(cohorts); start += countChunk {
		var exprs []string
		var args []any
		var idx []int
		for i := start; i < min(start+countChunk, len(cohorts)); i++ {
			cl, err := s.compile(ctx, projectID, cohorts[i])
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
		if personID > 0 {
			sql += " AND id = ?"
			args = append(args, personID)
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

func (s *Service) withCounts(ctx context.Context, projectID uint64, cohorts []Cohort) ([]View, error) {
	n, ok, err := s.counts(ctx, projectID, cohorts, 0)
	if err != nil {
		return nil, err
	}
	out := make([]View, len(cohorts))
	for i, c := range cohorts {
		out[i] = View{Cohort: c}
		if ok[i] {
			out[i].Count = &n[i]
		}
	}
	return out, nil
}

// memberships reports, per cohort, whether the person is a member.
func (s *Service) memberships(ctx context.Context, projectID uint64, cohorts []Cohort, personID uint64) ([]bool, error) {
	n, ok, err := s.counts(ctx, projectID, cohorts, personID)
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
