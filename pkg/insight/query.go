package insight

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Querier runs a ClickHouse query (chstore.Store.Conn()).
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

// Store answers the actor queries of one ClickHouse database.
type Store struct {
	conn    Querier
	actions action.Getter // nil: no actions store; every action id is unknown
	// prefixPersons is prefixPersonsPerActor; tests lower it to page
	// small projects from bounds (prefix.go).
	prefixPersons int
	// noHourly: never read the hourly counts (hourly.go); tests compare
	// both paths.
	noHourly bool
	// noStored: always attribute through the overrides (scan.stored);
	// tests compare both paths.
	noStored bool
}

// New returns a Store; actions may be nil.
func New(conn Querier, actions action.Getter) *Store {
	return &Store{conn: conn, actions: actions, prefixPersons: prefixPersonsPerActor}
}

// Actor is one person of an answer with its value: the number of matching
// events (or the property aggregate) for trends, 0 elsewhere.
type Actor struct {
	PersonID uint64
	Value    float64
	// Appearances (retention): 1 at position j when the person was active
	// in the j-th interval from the cohort's, position 0 being the cohort.
	Appearances []int
}

// Page is the window of an answer: Limit 0 means every actor.
type Page struct{ Limit, Offset int }

func (p Page) sql() (string, []any) {
	if p.Limit <= 0 {
		if p.Offset > 0 {
			return " LIMIT ?, 18446744073709551615", []any{p.Offset} // 18.16: no OFFSET without LIMIT
		}
		return "", nil
	}
	return " LIMIT ?, ?", []any{p.Offset, p.Limit}
}

// scan is the events of one series attributed to current, live persons
// (eventstore.Attributed: each event belongs to the person that owns its
// distinct id NOW, and persons deleted since are gone before any LIMIT),
// with the series' filters; persons are read only when a filter or the
// search needs their columns.
type scan struct {
	project  uint64
	from, to time.Time // [from, to); from zero: no lower bound
	where    cond      // over the columns below, e_keys/e_values included
	f        *filters
	extra    []cond // more SELECT expressions of the scan
	// names, when set, are the only event names the where can match:
	// the events are then cut by name (and range) in a PREWHERE, so
	// ClickHouse uses the sort key's event column and reads the wide
	// properties and distinct_id columns, and joins, only for those rows
	// (docs/performance.md, the analysis figures). nil: any event.
	names []string
	// upTo, when above 0, keeps only the persons of ids up to it, cut
	// in the PREWHERE (prefix.go).
	upTo uint64
	// among, when set, is a statement of one column of person ids: the
	// scan keeps every row of those persons, cut in the PREWHERE as upTo
	// is (retention's cohort, docs/performance.md). It also keeps
	// the rows an override took from them to other persons: the caller's
	// own condition on the group drops those persons (a filter on pid
	// would run the statement once more).
	among cond
	// stored: every row's stored person is its current, live one
	// (storedIsCurrent), so the scan leaves out the overrides: no join,
	// no probe of their distinct ids (docs/performance-history.md, "without the override join").
	stored bool
}

// attributed is the scan's selection of events, as their owner builds it.
func (s scan) attributed() eventstore.Attributed {
	return eventstore.Attributed{Project: s.project, From: s.from, To: s.to, Names: s.names,
		UpTo: s.upTo, Among: s.among.subquery(), Stored: s.stored}
}

// sql selects pid, uuid, timestamp and extra.
func (s scan) sql() (string, []any) {
	var args []any
	cols := []string{"pid", "uuid", "timestamp"}
	if arrays := eventArrays(s.f.keys()); arrays.sql != "" {
		cols = append(cols, arrays.sql)
		args = append(args, arrays.args...)
	}
	for _, x := range s.extra {
		cols = append(cols, x.sql)
		args = append(args, x.args...)
	}
	inner, iargs := s.attributed().Events().Text()
	args = append(args, iargs...)
	q := "SELECT " + strings.Join(cols, ", ") + " FROM (" + inner + ")"
	if s.f.person {
		// id too: cohort conditions are over a persons row. Both sides
		// of the join have an alias, as current ClickHouse requires.
		persons, pargs := chstore.LivePersonRows(s.project).Text()
		q += " AS scanned ALL INNER JOIN (" + persons + ") AS person_rows USING pid"
		args = append(args, pargs...)
	}
	if s.where.sql != "" {
		q += " WHERE " + s.where.sql
		args = append(args, s.where.args...)
	}
	return q, args
}

// match builds the scan of one series over f's range, with the global
// filters, breakdown and search.
func (st *Store) match(ctx context.Context, project uint64, f *Filter, e Entity) (scan, error) {
	fs := newFilters()
	fs.ctx, fs.cohorts = ctx, f.Cohorts
	if fs.cohorts == nil {
		fs.cohorts = noCohorts{}
	}
	series, err := st.seriesCond(ctx, project, fs, e)
	if err != nil {
		return scan{}, err
	}
	global, err := fs.compile("properties", f.Properties)
	if err != nil {
		return scan{}, err
	}
	s := scan{project: project, from: f.Range.From, to: f.Range.To, f: fs, where: and(series, global), names: st.seriesNames(ctx, project, e)}
	if f.Range.All {
		s.from = time.Time{}
	}
	// The hours of the range's events, from the one holding its start:
	// more hours only lower the seq the check compares with.
	if !st.noStored {
		if s.stored, err = st.storedIsCurrent(ctx, project, s.from.Truncate(time.Hour), s.to); err != nil {
			return scan{}, err
		}
	}
	if f.BreakdownValue != nil {
		typ := "event"
		if f.BreakdownType == "person" {
			typ = "person"
		}
		// An absent property extracts as "" (reference §2): "" selects "none".
		leaf := map[string]any{"key": f.Breakdown, "type": typ, "value": *f.BreakdownValue}
		if *f.BreakdownValue == "" {
			leaf["operator"] = "is_not_set"
		}
		bd, err := fs.compile("breakdown", []any{leaf})
		if err != nil {
			return scan{}, err
		}
		s.where = and(s.where, bd)
	}
	if f.Search != "" {
		fs.person = true
		byPerson := "positionCaseInsensitiveUTF8(property_values[indexOf(property_keys, ?)], ?) > 0"
		s.where = and(s.where, or(
			cond{byPerson, []any{"email", f.Search}},
			cond{byPerson, []any{"name", f.Search}},
			cond{"positionCaseInsensitiveUTF8(distinct_id, ?) > 0", []any{f.Search}}))
	}
	return s, nil
}

// seriesNames are the event names an entity can match, nil when any:
// its event, or every step's of its action (nil if a step takes any
// event or the action cannot be read; seriesCond reports that).
func (st *Store) seriesNames(ctx context.Context, project uint64, e Entity) []string {
	if e.Type != "actions" {
		if e.ID == nil {
			return nil
		}
		return []string{*e.ID}
	}
	if st.actions == nil {
		return nil
	}
	a, err := st.actions.Get(ctx, project, e.ActionID)
	if err != nil || len(a.Steps) == 0 {
		return nil
	}
	names := make([]string, 0, len(a.Steps))
	for _, step := range a.Steps {
		if step.Event == "" {
			return nil
		}
		names = append(names, step.Event)
	}
	return names
}

// unionNames is the names of a scan matching either of two: nil (any
// event) when one of them is nil.
func unionNames(a, b []string) []string {
	if a == nil || b == nil {
		return nil
	}
	return append(append([]string{}, a...), b...)
}

// funnelNames are the event names a funnel that is not strict reads
// (its steps', exclusions' and correlation entity's), nil when any.
func (st *Store) funnelNames(ctx context.Context, project uint64, fn *Funnel, corr *Entity) []string {
	names := []string{}
	for _, e := range fn.Steps {
		names = unionNames(names, st.seriesNames(ctx, project, e))
	}
	for _, x := range fn.Exclusions {
		names = unionNames(names, st.seriesNames(ctx, project, x.Entity))
	}
	if corr != nil {
		names = unionNames(names, st.seriesNames(ctx, project, *corr))
	}
	return names
}

// noCohorts is the resolver of an API without cohorts: none exists.
type noCohorts struct{}

func (noCohorts) CohortClause(context.Context, uint64) (propfilter.Clause, bool, error) {
	return propfilter.Clause{}, false, nil
}

// seriesCond is the condition of one entity: its event (or any of its
// action's steps) and its own filters.
func (st *Store) seriesCond(ctx context.Context, project uint64, fs *filters, e Entity) (cond, error) {
	if e.Type == "actions" {
		var a action.Action
		err := action.ErrNotFound
		if st.actions != nil {
			a, err = st.actions.Get(ctx, project, e.ActionID)
		}
		if errors.Is(err, action.ErrNotFound) {
			return cond{}, invalidf("actions", "unknown action %d", e.ActionID)
		}
		if err != nil {
			return cond{}, err
		}
		steps := make([]cond, 0, len(a.Steps))
		for _, step := range a.Steps {
			props, err := decodeJSON("actions", string(step.Properties))
			if err != nil {
				return cond{}, err
			}
			c, err := fs.compile("actions", props)
			if err != nil {
				return cond{}, err
			}
			name := cond{"1", nil}
			if step.Event != "" {
				name = cond{"event = ?", []any{step.Event}}
			}
			steps = append(steps, and(name, c))
		}
		if len(steps) == 0 {
			return cond{"0", nil}, nil
		}
		own, err := fs.compile("actions", e.Properties)
		if err != nil {
			return cond{}, err
		}
		return and(or(steps...), own), nil
	}
	own, err := fs.compile("events", e.Properties)
	if err != nil {
		return cond{}, err
	}
	if e.ID == nil {
		return own, nil
	}
	return and(cond{"event = ?", []any{*e.ID}}, own), nil
}

// bucket is the SQL of the interval start of col in the project's zone,
// and lit the SQL literal of a bucket start computed in Go, so the two
// compare: hours are DateTimes, the others Dates (weeks from Monday).
func bucket(iv Interval, col string, loc *time.Location) cond {
	tz := loc.String()
	switch iv {
	case Hour:
		return cond{"toStartOfHour(" + col + ", ?)", []any{tz}}
	case Week:
		return cond{"toMonday(toDate(" + col + ", ?))", []any{tz}}
	case Month:
		return cond{"toStartOfMonth(toDate(" + col + ", ?))", []any{tz}}
	}
	return cond{"toDate(" + col + ", ?)", []any{tz}}
}

func lit(iv Interval, t time.Time) cond {
	if iv == Hour {
		return cond{"toDateTime(?)", []any{eventstore.EpochSeconds(t)}}
	}
	return cond{"toDate(?)", []any{t.Format("2006-01-02")}}
}

// readCtx: filters stay after FINAL (no move to PREWHERE, which on 18.16
// would test old versions of persons and distinct ids); bound values may
// be long. Settings given by withSettings are added.
func readCtx(ctx context.Context) context.Context {
	s := clickhouse.Settings{"optimize_move_to_prewhere": 0, "max_query_size": 32 << 20}
	if more, ok := ctx.Value(settingsKey{}).(clickhouse.Settings); ok {
		maps.Copy(s, more)
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(s))
}

type settingsKey struct{}

// withSettings gives the statements run with ctx more settings (readCtx),
// over those ctx already gives.
func withSettings(ctx context.Context, s clickhouse.Settings) context.Context {
	all := clickhouse.Settings{}
	if more, ok := ctx.Value(settingsKey{}).(clickhouse.Settings); ok {
		maps.Copy(all, more)
	}
	maps.Copy(all, s)
	return context.WithValue(ctx, settingsKey{}, all)
}

// manyGroups is for a GROUP BY of hundreds of thousands of keys (trends'
// persons): two-level hash tables from the first row, where ClickHouse
// starts with one table and converts it at 100,000 keys. Smaller tables
// per bucket stay in cache and merge bucket by bucket: 15-20% less CPU
// for trends at 626k persons (docs/performance-history.md, "when no override
// applies").
var manyGroups = clickhouse.Settings{"group_by_two_level_threshold": 1}

func (st *Store) actors(ctx context.Context, sql string, args []any, withValue bool) ([]Actor, error) {
	return st.scanActors(ctx, sql, args, func(rows driver.Rows, a *Actor) error {
		dest := []any{&a.PersonID}
		if withValue {
			dest = append(dest, &a.Value)
		}
		return rows.Scan(dest...)
	})
}

// scanActors runs sql and reads each row into an Actor with scan.
func (st *Store) scanActors(ctx context.Context, sql string, args []any, scan func(driver.Rows, *Actor) error) ([]Actor, error) {
	rows, err := st.conn.Query(readCtx(ctx), sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Actor
	for rows.Next() {
		var a Actor
		if err := scan(rows, &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func sprintf(pattern, arg string) string { return strings.Replace(pattern, "%s", arg, 1) }
