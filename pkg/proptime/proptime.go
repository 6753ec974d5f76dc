// Package proptime holds the rules of timestamp-aware property writes
// (docs/events.md, "Timestamp-aware $set"): a person keeps, per property
// key, the moment of the event that gave the key its value, and an event
// marked timestamp-aware ($set_timestamp) changes a key only when it is
// not older than that moment. The ingester's fold (pkg/fold) and the
// reconstructions from events (pkg/timeline) apply the same functions.
//
// Moments are epoch milliseconds read from the events in the log (their
// timestamp, or their $set_timestamp), never from a clock, so the rules
// give the same state on every replay.
package proptime

import (
	"encoding/json"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// Moment returns an event's moment for timestamp-aware writes and whether
// the event is timestamp-aware: flag is its $set_timestamp property and
// ts its timestamp. true takes ts; an RFC 3339 string (event.ParseTime)
// is the moment itself, but never later than ts: a moment in the event's
// future would hold its keys against every later write. Anything else
// (absent, false, another type, a string that does not parse) makes the
// event ordinary, with ts as its moment (an ordinary write records it on
// a person that keeps moments).
func Moment(flag any, ts time.Time) (ms int64, aware bool) {
	switch v := flag.(type) {
	case bool:
		return ts.UnixMilli(), v
	case string:
		if t, err := event.ParseTime(v); err == nil {
			return min(t.UnixMilli(), ts.UnixMilli()), true
		}
	}
	return ts.UnixMilli(), false
}

// Times are a person's recorded moments, key to epoch milliseconds. A nil
// or empty Times is a person that never saw a timestamp-aware write: its
// writes follow the log order alone and record nothing.
type Times map[string]int64

// Write is a write to a property: its key, its event's moment, and
// whether the event is timestamp-aware.
type Write struct {
	Moment int64
	Aware  bool
}

// Set decides whether a $set of key by w applies, and records w's moment
// for key when it does and the person keeps moments. A timestamp-aware
// $set applies unless key has a recorded moment after w's (a value never
// given a moment counts as the oldest); an ordinary $set always applies
// (last in the log wins). It reports whether t changed.
func (t *Times) Set(key string, w Write) (apply, changed bool) {
	if w.Aware {
		if r, ok := (*t)[key]; ok && r > w.Moment {
			return false, false
		}
	}
	return true, t.record(key, w)
}

// SetOnce records w's moment for a key that a $set_once gave its value
// (only ever to an absent key, rules unchanged) and reports whether t
// changed.
func (t *Times) SetOnce(key string, w Write) bool { return t.record(key, w) }

// record sets key's moment to w's when w is timestamp-aware or t already
// keeps moments.
func (t *Times) record(key string, w Write) bool {
	if !w.Aware && len(*t) == 0 {
		return false
	}
	if *t == nil {
		*t = Times{}
	}
	if r, ok := (*t)[key]; ok && r == w.Moment {
		return false
	}
	(*t)[key] = w.Moment
	return true
}

// Unset forgets key's moment (its value is removed) and reports whether t
// changed.
func (t Times) Unset(key string) bool {
	if _, ok := t[key]; !ok {
		return false
	}
	delete(t, key)
	return true
}

// Merge returns the moments of the properties a merge keeps: props are
// the merged properties, each from the person kept (target) when it has
// the key, else from the one merged away (source); each kept value keeps
// the moment recorded with it, if any. Nil when there are none.
func Merge(props map[string]any, target, source map[string]any, targetTimes, sourceTimes Times) Times {
	if len(targetTimes)+len(sourceTimes) == 0 {
		return nil
	}
	var out Times
	for k := range props {
		var r int64
		var ok bool
		if _, inTarget := target[k]; inTarget {
			r, ok = targetTimes[k]
		} else if _, inSource := source[k]; inSource {
			r, ok = sourceTimes[k]
		}
		if ok {
			if out == nil {
				out = Times{}
			}
			out[k] = r
		}
	}
	return out
}

// Encode is t as the persons table keeps it (property_times): a JSON
// object of key to epoch milliseconds, keys sorted, or "" when t is
// empty, so a person without moments costs nothing.
func Encode(t Times) string {
	if len(t) == 0 {
		return ""
	}
	raw, err := json.Marshal(map[string]int64(t))
	if err != nil {
		return "" // a map of strings to integers always encodes
	}
	return string(raw)
}

// Decode reads Encode's form ("" is no moments).
func Decode(s string) (Times, error) {
	if s == "" {
		return nil, nil
	}
	var t Times
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, err
	}
	if len(t) == 0 {
		return nil, nil
	}
	return t, nil
}
