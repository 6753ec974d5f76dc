package eventstore

import (
	"time"

	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Performed selects the events of one name at or after Since that a
// behavioural cohort counts (docs/cohorts.md): the project's, or with
// DistinctIDs only those ids' (one person's), read by key from
// events_by_distinct_id (schema 0009: the same rows, $actor events left
// out, sorted by distinct id) instead of a scan of the project's window.
// The events the API's person writes produce (they carry $actor) are not
// behaviour.
type Performed struct {
	Project     uint64
	Event       string
	Since       time.Time
	DistinctIDs []string // nil: every distinct id of the project
}

// from is the table, and the condition on it, of the selection.
func (p Performed) from() (table, where string, args []any) {
	since := p.Since.UTC().Format(time.DateTime)
	if p.DistinctIDs != nil {
		return "events_by_distinct_id", "project_id = ? AND distinct_id IN ? AND event = ? AND timestamp >= toDateTime(?, 'UTC')",
			[]any{p.Project, statement.Set(p.DistinctIDs), p.Event, since}
	}
	return "events", "project_id = ? AND event = ? AND timestamp >= toDateTime(?, 'UTC') AND visitParamHas(properties, '$actor') = 0",
		[]any{p.Project, p.Event, since}
}

// IDs is the SELECT of the distinct_id of each selected event.
func (p Performed) IDs() statement.Subquery {
	table, where, args := p.from()
	return statement.NewSubquery("SELECT distinct_id FROM "+table+" WHERE "+where, args...)
}

// Owned is the SELECT of pid and uuid of each selected event whose
// distinct id has a live owner now, pid being that person: events from
// before a merge count for the merged person.
func (p Performed) Owned() statement.Subquery {
	table, where, args := p.from()
	owners, oargs := distinctids.LiveOwnerRows(p.Project, p.DistinctIDs).Text()
	// The joined subquery has an alias: current ClickHouse refuses one
	// without (joined_subquery_requires_alias).
	return statement.NewSubquery("SELECT pid, uuid FROM "+table+" ALL INNER JOIN ("+owners+") AS owners USING distinct_id WHERE "+where,
		append(oargs, args...)...)
}
