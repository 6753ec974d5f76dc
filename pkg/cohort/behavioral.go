package cohort

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Actions resolves the actions behavioural filters name (pkg/insight, as
// the analysis routes resolve them).
type Actions interface {
	// ActionEvents is a SELECT with columns pid and uuid of the action's
	// events at or after since, attributed to current live persons.
	ActionEvents(ctx context.Context, project, actionID uint64, since time.Time, cohorts propfilter.CohortResolver) (string, []any, error)
}

// intervals are the behavioural filters' time units.
var intervals = map[string]func(t time.Time, n int) time.Time{
	"hour":  func(t time.Time, n int) time.Time { return t.Add(-time.Duration(n) * time.Hour) },
	"day":   func(t time.Time, n int) time.Time { return t.AddDate(0, 0, -n) },
	"week":  func(t time.Time, n int) time.Time { return t.AddDate(0, 0, -7*n) },
	"month": func(t time.Time, n int) time.Time { return t.AddDate(0, -n, 0) },
	"year":  func(t time.Time, n int) time.Time { return t.AddDate(-n, 0, 0) },
}

// countOperators are performed_event_multiple's operators (PostHog's
// get_count_operator; no operator means eq).
var countOperators = map[string]string{"gte": ">=", "lte": "<=", "gt": ">", "lt": "<", "eq": "=", "exact": "="}

// performed selects the events of one name at or after since that a
// behavioural filter counts (eventstore.Performed): scoped to one person,
// only its distinct ids'.
func (r *resolver) performed(event string, since time.Time) eventstore.Performed {
	p := eventstore.Performed{Project: r.project, Event: event, Since: since}
	if r.person != nil {
		p.DistinctIDs = r.person.distinctIDs
	}
	return p
}

// behavioral compiles {"type":"behavioral","key":K,"value":V,
// "event_type":"events"|"actions","time_value":N,"time_interval":unit}
// with V performed_event (the person did K at or after now minus N units)
// or performed_event_multiple (with "operator" gte|lte|gt|lt|eq|exact and
// "operator_value" C: the person did K, and the number of times compares
// so to C). K is an event name, or for event_type actions an action id.
func (r *resolver) behavioral(ctx context.Context, f map[string]any) (propfilter.Clause, error) {
	value, _ := f["value"].(string)
	if value != "performed_event" && value != "performed_event_multiple" {
		return propfilter.Clause{}, invalid("filters", "Behavioral filters support values performed_event and performed_event_multiple, not %v.", f["value"])
	}
	n, err := whole(f["time_value"], 100_000)
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
	if r.person != nil && len(r.person.distinctIDs) == 0 {
		// Behaviour is events of the person's distinct ids: none, no behaviour.
		return propfilter.Clause{SQL: "(1 = 0)"}, nil
	}
	if value == "performed_event" && (f["event_type"] == nil || f["event_type"] == "events") {
		// The cheaper form: owners of the distinct ids that sent it.
		if event, _ := f["key"].(string); event != "" {
			return r.ownerOf(r.performed(event, since).IDs()), nil
		}
	}
	events, args, err := r.behaviourEvents(ctx, f, since)
	if err != nil {
		return propfilter.Clause{}, err
	}
	having := ""
	if value == "performed_event_multiple" {
		op, ok := countOperators[fmt.Sprint(f["operator"])]
		if f["operator"] == nil {
			op, ok = "=", true
		}
		if !ok {
			return propfilter.Clause{}, invalid("filters", "operator must be gte, lte, gt, lt, eq or exact, not %v.", f["operator"])
		}
		count, err := whole(f["operator_value"], 1_000_000_000)
		if err != nil {
			return propfilter.Clause{}, invalid("filters", "performed_event_multiple needs operator_value, a whole number greater than 0.")
		}
		// count(), not a per-person set of uuids: the ingester writes one
		// events row per stream message, also after a crash or a retry
		// (docs/architecture.md, "One events row per message"), as trends.
		having = " GROUP BY pid HAVING count() " + op + " ?"
		args = append(args, count)
	}
	return propfilter.Clause{SQL: "id IN (SELECT pid FROM (" + events + ")" + having + ")", Args: args}, nil
}

// behaviourEvents is the SELECT (pid, uuid) of the events a behavioural
// filter counts: of an event name, or of an action.
func (r *resolver) behaviourEvents(ctx context.Context, f map[string]any, since time.Time) (string, []any, error) {
	switch t := f["event_type"]; t {
	case nil, "events":
		event, _ := f["key"].(string)
		if event == "" {
			return "", nil, invalid("filters", "A behavioral filter needs the event name as key.")
		}
		sql, args := r.performed(event, since).Owned().Text()
		return sql, args, nil
	case "actions":
		id, err := whole(f["key"], 1<<53)
		if err != nil {
			return "", nil, invalid("filters", "A behavioral filter on actions needs the action id as key, not %v.", f["key"])
		}
		if r.s.actions == nil {
			return "", nil, invalid("filters", "unknown action %d", id)
		}
		sql, args, err := r.s.actions.ActionEvents(ctx, r.project, uint64(id), since, r)
		var ie *insight.Error
		if errors.As(err, &ie) {
			return "", nil, invalid("filters", "%s", ie.Detail)
		}
		return sql, args, err
	default:
		return "", nil, invalid("filters", "Behavioral filters support event_type events or actions, not %v.", t)
	}
}

// whole reads a whole number from 1 to max given as a JSON number or a
// decimal string.
func whole(v any, max int) (int, error) {
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
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("not a whole number from 1 to %d: %v", max, v)
	}
	return n, nil
}
