package cohort

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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

// intervals are the behavioural filters' time units.
var intervals = map[string]func(t time.Time, n int) time.Time{
	"hour":  func(t time.Time, n int) time.Time { return t.Add(-time.Duration(n) * time.Hour) },
	"day":   func(t time.Time, n int) time.Time { return t.AddDate(0, 0, -n) },
	"week":  func(t time.Time, n int) time.Time { return t.AddDate(0, 0, -7*n) },
	"month": func(t time.Time, n int) time.Time { return t.AddDate(0, -n, 0) },
	"year":  func(t time.Time, n int) time.Time { return t.AddDate(-n, 0, 0) },
}

// behavioral compiles {"type":"behavioral","key":event,"value":
// "performed_event","event_type":"events","time_value":N,
// "time_interval":unit}: the person's current distinct ids include one
// that sent the event at or after now minus N units. Events the API's
// person writes produce (they carry $actor) are not behaviour.
func (r *resolver) behavioral(_ context.Context, f map[string]any) (propfilter.Clause, error) {
	event, _ := f["key"].(string)
	if event == "" {
		return propfilter.Clause{}, invalid("filters", "A behavioral filter needs the event name as key.")
	}
	if v, _ := f["value"].(string); v != "performed_event" {
		return propfilter.Clause{}, invalid("filters", "Behavioral filters support value performed_event only, not %v.", f["value"])
	}
	if t, ok := f["event_type"]; ok && t != nil && t != "events" {
		return propfilter.Clause{}, invalid("filters", "Behavioral filters support event_type events only, not %v.", t)
	}
	n, err := positive(f["time_value"])
	if err != nil {
		return propfilter.Clause{}, invalid("filters", "A behavioral filter needs time_value, a whole number from 1 to 100000.")
	}
	unit, _ := f["time_interval"].(string)
	back, ok := intervals[unit]
	if !ok {
		return propfilter.Clause{}, invalid("filters", "time_interval must be hour, day, week, month or year, not %v.", f["time_interval"])
	}
	since := back(r.s.now().UTC(), n).Truncate(time.Second)
	if since.Before(time.Unix(0, 0)) {
		since = time.Unix(0, 0).UTC()
	}
	return propfilter.Clause{
		SQL:  ownerOf("SELECT distinct_id FROM events WHERE project_id = ? AND event = ? AND timestamp >= toDateTime(?, 'UTC') AND visitParamHas(properties, '$actor') = 0"),
		Args: []any{r.project, r.project, event, since.Format(time.DateTime)},
	}, nil
}

func positive(v any) (int, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100_000 {
		return 0, fmt.Errorf("not a positive integer: %v", v)
	}
	return n, nil
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
