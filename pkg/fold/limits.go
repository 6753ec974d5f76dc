package fold

import (
	"encoding/json"
	"sort"

	"github.com/personhub/personhub/pkg/event"
)

// DefaultMaxPersonBytes is the default bound on a person's properties,
// measured as the JSON object the store keeps (docs/events.md).
const DefaultMaxPersonBytes = 512 << 10

// WarningPersonPropertiesTooLarge is raised when an event's $set or
// $set_once would grow a person's properties beyond the limit: the event's
// property changes are not applied to that person (its $unset still is,
// and the event is stored as usual).
const WarningPersonPropertiesTooLarge = "person_properties_size_violation"

// allowedChanges returns the $set_once and $set of in's event to apply to
// p (whose properties are props): the event's own, or none when they would take p's properties beyond
// f.MaxPersonBytes and beyond their present size (a person already over
// the limit, stored before it existed, may still shrink or keep its size).
// A refusal is recorded as a warning naming the keys.
//
// The outcome depends only on the person's state, the event and the limit,
// so a replay with the same limit folds the same persons.
func (f *Folder) allowedChanges(in Input, p *personState, props map[string]any) (setOnce, set map[string]any) {
	ev := &in.Event
	if f.MaxPersonBytes <= 0 || len(ev.Set)+len(ev.SetOnce) == 0 {
		return ev.SetOnce, ev.Set
	}
	if maxJSONSize(props)+maxJSONSize(ev.Set)+maxJSONSize(ev.SetOnce) <= f.MaxPersonBytes {
		// Far from the limit (the common case): the merged properties
		// cannot exceed it, so the exact size need not be encoded.
		return ev.SetOnce, ev.Set
	}
	next := make(map[string]any, len(props)+len(ev.Set)+len(ev.SetOnce))
	for k, v := range props {
		next[k] = v
	}
	for k, v := range ev.SetOnce {
		if _, ok := next[k]; !ok {
			next[k] = v
		}
	}
	for k, v := range ev.Set {
		next[k] = v
	}
	for _, k := range ev.Unset {
		delete(next, k)
	}
	size := jsonSize(next)
	if size <= f.MaxPersonBytes || size <= jsonSize(props) {
		return ev.SetOnce, ev.Set
	}
	keys := make([]string, 0, len(ev.Set)+len(ev.SetOnce))
	for k := range ev.Set {
		keys = append(keys, k)
	}
	for k := range ev.SetOnce {
		if _, dup := ev.Set[k]; !dup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	f.warnings = append(f.warnings, Warning{
		ProjectID: in.ProjectID, Seq: in.Seq, Type: WarningPersonPropertiesTooLarge, Timestamp: ev.Timestamp,
		Details: map[string]any{
			"event_uuid": ev.UUID.String(), "event": ev.Event, "distinct_id": ev.DistinctID,
			"person_uuid": p.row.UUID.String(), "keys": keys,
			"size": size, "max_size": f.MaxPersonBytes,
		},
	})
	return nil, nil
}

// maxJSONSize bounds from above the length of v as encoding/json encodes
// it, for the types decoded JSON holds: a string's byte may take up to six
// (an escape such as \u003c; invalid UTF-8 becomes \ufffd). Another type
// gives a bound no limit passes, so jsonSize decides.
func maxJSONSize(v any) int {
	const unknown = 1 << 40
	switch t := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case string:
		return 2 + 6*len(t)
	case json.Number:
		if !event.IsNumber(string(t)) {
			return unknown // Marshal refuses it: jsonSize says so
		}
		return len(t)
	case map[string]any:
		n := 2
		for k, e := range t {
			n += 2 + 6*len(k) + 2 + maxJSONSize(e)
		}
		return n
	case []any:
		n := 2
		for _, e := range t {
			n += 1 + maxJSONSize(e)
		}
		return n
	}
	return unknown
}

// jsonSize is the length of props as the store encodes it (encoding/json).
func jsonSize(props map[string]any) int {
	raw, err := json.Marshal(props)
	if err != nil {
		// Not encodable: the store would refuse it anyway; count it as
		// too large rather than let it through.
		return int(^uint(0) >> 1)
	}
	return len(raw)
}
