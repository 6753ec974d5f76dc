package eventstore

import (
	"context"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/event"
)

// Attributed selects the events of one project, each with the person
// that owns its distinct id now (so the events of a person merged away
// count for the survivor), the events of persons deleted since left out.
// The analysis routes and behavioural cohorts read events through it.
//
// That owner is read as PostHog's "persons on events" with overrides
// (docs/architecture.md, "Who an event belongs to"): events.person_id,
// unless the distinct id has an override (its owner changed since the
// event was folded), whose person then counts, or whose tombstone drops
// the event. Only the overrides table, which holds the changed ids alone,
// is read whole.
type Attributed struct {
	Project  uint64
	From, To time.Time // [From, To); From zero: no lower bound
	// Names, when set, are the only event names wanted: the events are
	// cut by name (and range) in a PREWHERE, so ClickHouse uses the sort
	// key's event column and reads the wide properties and distinct_id
	// columns, and joins, only for those rows (docs/performance.md, the
	// analysis figures). nil: any event.
	Names []string
	// UpTo, when above 0, keeps only the persons of ids up to it.
	UpTo uint64
	// Among, when set, is a SELECT of one column of person ids: the
	// selection keeps every row of those persons, cut in the PREWHERE as
	// UpTo is. It also keeps the rows an override took from them to
	// other persons: the caller's own condition on the group drops those
	// persons (a filter on pid would run the statement once more).
	Among statement.Subquery
	// Stored: every row's stored person is its current, live one
	// (StoredIsCurrent), so the selection leaves out the overrides: no
	// join, no probe of their distinct ids.
	Stored bool
}

// attributedPID is a row's current person after overridesJoin: the
// override's, or the person stored with the row.
const attributedPID = "if(o_pid = 0, person_id, o_pid)"

// overridesJoin joins a row of events (or events_hourly) with the
// override of its distinct id in the project (distinctids.Overrides).
// An id without an override joins the defaults: o_pid 0 (no person has
// id 0), o_deleted 0; the caller keeps o_deleted = 0. The subquery has
// an alias (current ClickHouse refuses a joined subquery without one,
// joined_subquery_requires_alias); its columns are read unqualified.
func overridesJoin(project uint64) (string, []any) {
	q, args := distinctids.Overrides(project).Text()
	return "ANY LEFT JOIN (" + q + ") AS overrides USING distinct_id", args
}

// lastDate bounds the dates a selection states: ClickHouse 18.16 reads
// a Date from 2106 on as 0000-00-00.
var lastDate = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// EpochSeconds is t as a DateTime's seconds, clamped to the range a
// DateTime holds: a range may start before 1970 (date_from=-60y, or
// 1970-01-01 east of UTC), and toDateTime of a negative number wraps to
// 2106 on ClickHouse 18.16 (an empty scan) where current releases clamp.
func EpochSeconds(t time.Time) int64 { return min(max(t.Unix(), 0), 1<<32-1) }

// epochDate is the UTC date of t clamped as EpochSeconds.
func epochDate(t time.Time) string {
	return time.Unix(EpochSeconds(t), 0).UTC().Format(time.DateOnly)
}

// amongCond keeps, in a PREWHERE, the rows of the persons of among: the
// rows stored with one of them, or whose distinct id an override gives
// to one of them.
func amongCond(project uint64, among statement.Subquery) (string, []any) {
	stored, args := among.In("person_id")
	given, gargs := distinctids.OverriddenTo(project, among).In("distinct_id")
	return "(" + stored + " OR " + given + ")", append(append([]any{}, args...), gargs...)
}

// Events is the SELECT of pid (the current person), uuid, timestamp,
// event, distinct_id and properties of the selected events, the API's
// person writes left out (reference §14.8: they are never analysis
// events).
func (a Attributed) Events() statement.Subquery {
	var args []any
	// PREWHERE on events alone (read without FINAL, so no old version
	// is tested); the overrides table is FINAL and keeps its filter in
	// WHERE. An id without an override joins the defaults: o_pid 0 (no
	// person has id 0), o_deleted 0.
	pid, overrides := attributedPID, ""
	if a.Stored {
		pid = "person_id"
	} else {
		overrides, args = overridesJoin(a.Project)
		overrides = " " + overrides
	}
	q := "SELECT " + pid + " AS pid, uuid, timestamp, event, distinct_id, properties FROM events" + overrides +
		" PREWHERE project_id = ? AND timestamp < toDateTime(?)"
	args = append(args, a.Project, EpochSeconds(a.To))
	// The range is also stated on the sort key's toDate(timestamp):
	// ClickHouse 18.16 does not derive it from a timestamp condition, so
	// without it a scan of one day reads every granule of the project
	// (the events' column is DateTime('UTC'): dates in UTC). 18.16's
	// dates end in 2105 (later ones read as 0000-00-00): no upper date
	// for selections without an end.
	if a.To.Before(lastDate) {
		q += " AND toDate(timestamp) <= toDate(?)"
		args = append(args, epochDate(a.To.Add(-time.Second)))
	}
	if !a.From.IsZero() {
		q += " AND toDate(timestamp) >= toDate(?) AND timestamp >= toDateTime(?)"
		args = append(args, epochDate(a.From), EpochSeconds(a.From))
	}
	if len(a.Names) > 0 {
		q += " AND event IN (" + statement.Marks(len(a.Names)) + ")"
		args = append(args, statement.Args(a.Names)...)
	}
	switch {
	case a.UpTo > 0 && a.Stored:
		q += " AND person_id <= ?"
		args = append(args, a.UpTo)
	case a.UpTo > 0:
		// The rows of the persons up to UpTo: their own, or given to
		// them by an override (a small set, probed only here).
		given, gargs := distinctids.OverriddenUpTo(a.Project, a.UpTo).In("distinct_id")
		q += " AND (person_id <= ? OR " + given + ")"
		args = append(append(args, a.UpTo), gargs...)
	}
	q, args = a.among(q, args)
	q += " WHERE 1"
	if !a.Stored {
		q += " AND o_deleted = 0"
	}
	if a.UpTo > 0 && !a.Stored {
		q += " AND pid <= ?" // an override gave the row to a later person
		args = append(args, a.UpTo)
	}
	if a.Names == nil || slices.ContainsFunc(a.Names, MayBeCommand) {
		// Only then: the condition reads properties for every row
		// (18.16 evaluates both sides of AND), the widest column.
		cmd, cargs := commandEvents()
		q += " AND " + cmd
		args = append(args, cargs...)
	}
	return statement.NewSubquery(q, args...)
}

// among adds the cut to Among's persons to a PREWHERE.
func (a Attributed) among(q string, args []any) (string, []any) {
	switch {
	case a.Among.IsZero():
		return q, args
	case a.Stored:
		in, inArgs := a.Among.In("person_id")
		return q + " AND " + in, append(args, inArgs...)
	default:
		c, cargs := amongCond(a.Project, a.Among)
		return q + " AND " + c, append(args, cargs...)
	}
}

// HourlyPID is the expression of a row's current person in HourlyFrom.
func (a Attributed) HourlyPID() string {
	if a.Stored {
		return "person_id"
	}
	return attributedPID
}

// HourlyFrom is the FROM clause, with its filters, of the rows of
// events_hourly (schema 0014: per event, UTC hour, distinct id and person
// as stored, the number of events) of the selection, which must name its
// events (Names) and cut at whole UTC hours. Its columns (event, hour,
// distinct_id, person_id, events; o_pid without Stored) are there to
// select and group on directly, the current person being HourlyPID. One
// level, no subquery around it: ClickHouse 18.16 runs the IN subqueries
// of a PREWHERE once more for each SELECT around it (a retention
// statement spent 40% more; docs/performance-history.md, "from counts
// kept per hour"). UpTo is not applied.
func (a Attributed) HourlyFrom() (string, []any) {
	q, args := "FROM events_hourly", []any{}
	if !a.Stored {
		join, jargs := overridesJoin(a.Project)
		q += " " + join
		args = append(args, jargs...)
	}
	q += " PREWHERE project_id = ? AND event IN (" + statement.Marks(len(a.Names)) + ") AND hour < toDateTime(?)"
	args = append(append(append(args, a.Project), statement.Args(a.Names)...), EpochSeconds(a.To))
	if !a.From.IsZero() {
		q += " AND hour >= toDateTime(?)"
		args = append(args, EpochSeconds(a.From))
	}
	q, args = a.among(q, args)
	if a.Stored {
		return q, args
	}
	return q + " WHERE o_deleted = 0", args
}

// Querier runs a read (chstore.Store.Conn(), or a caller's gate around it).
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

// StoredIsCurrent reports whether every event of the project in [from,
// to) (whole UTC hours; from zero: from the start) still belongs to the
// person stored with it: whether every override of the project has a
// version below the lowest seq of the range's events (schema 0017). An
// override is written when an id's owner changes, at the version of that
// change, and a project's events are folded in stream order (with the
// write lane, a command folds at the version of the event it follows,
// P, and an event of seq P is folded before it: hence strictly below).
// So an event folded after every change was stored with the id's
// current owner, and no id of it is tombstoned: a later owner would have
// written a newer override. Two small reads (the overrides' versions,
// the range's hours) instead of joining every row with the overrides.
// A range with no events answers false (minMerge of nothing is 0).
func StoredIsCurrent(ctx context.Context, q Querier, project uint64, from, to time.Time) (bool, error) {
	overrides, args := distinctids.NewestOverride(project).Text()
	rows, err := q.Query(ctx, "SELECT ("+overrides+"), "+
		"(SELECT minMerge(min_seq) FROM events_first_seq WHERE project_id = ? AND hour >= toDateTime(?) AND hour < toDateTime(?))",
		append(args, project, EpochSeconds(from), EpochSeconds(to))...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var newest, lowest uint64
	if rows.Next() {
		if err := rows.Scan(&newest, &lowest); err != nil {
			return false, err
		}
	}
	return newest < lowest, rows.Err()
}

// commandEvents is the condition that leaves out the events the API's
// person writes produce (reference §14.8). The command names are never
// analysis events; $set and $delete_person_property are also ordinary
// capture events, and the API's copies are told apart by the reserved
// $actor property (capture refuses it, pkg/event), stored as the start
// of an Actor object.
func commandEvents() (string, []any) {
	args := make([]any, 0, len(event.ReservedEvents)+3)
	for _, n := range event.ReservedEvents {
		args = append(args, n)
	}
	args = append(args, event.Set, event.DeletePersonProperty, `"`+event.PropActor+`":{"key_id":`)
	return "NOT (event IN (" + statement.Marks(len(event.ReservedEvents)) + ") OR (event IN (?, ?) AND position(properties, ?) > 0))", args
}

// MayBeCommand reports whether events of this name may be the API's
// person writes, which Events leaves out (and events_hourly does not
// count: schema 0014's view leaves out their $actor copies).
func MayBeCommand(name string) bool {
	return event.ReservedEvent(name) || name == event.Set || name == event.DeletePersonProperty
}
