package deletion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/propfilter"
)

// Bounds of a filtered deletion's filter.
const (
	// MaxFilterEvents is the most event names one filter lists.
	MaxFilterEvents = 100
	// MaxFilterBytes bounds the filter's JSON (its properties included),
	// well under a command's envelope limit.
	MaxFilterBytes = 64 << 10
)

// Filter selects the events a filtered deletion deletes, besides its
// project, its sequence (events up to the command's) and, person-scoped,
// its person. Every field is optional, but a request needs one (an empty
// filter would delete every event). It travels in the command as JSON
// (event.PropDeletionFilter) and is stored as such in
// event_deletion_requests.
type Filter struct {
	// After (inclusive) and Before (exclusive) bound the events'
	// timestamps, to the millisecond.
	After  *time.Time `json:"after,omitempty"`
	Before *time.Time `json:"before,omitempty"`
	// Events are event names; an event with any of them matches.
	Events []string `json:"events,omitempty"`
	// Properties is an event property filter (propfilter, Options.Events).
	Properties json.RawMessage `json:"properties,omitempty"`
}

// Empty says whether the filter selects every event.
func (f Filter) Empty() bool {
	return f.After == nil && f.Before == nil && len(f.Events) == 0 && !hasProperties(f.Properties)
}

// hasProperties says whether raw is a property filter that constrains
// (not absent, null, [], {} or blank).
func hasProperties(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null")) && !bytes.Equal(t, []byte("[]")) && !bytes.Equal(t, []byte("{}"))
}

// ParseFilter reads a filter stored as JSON.
func ParseFilter(raw string) (Filter, error) {
	var f Filter
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("filter: %w", err)
	}
	return f, nil
}

// Cond is a condition over an events row with ? placeholders.
type Cond struct {
	SQL  string
	Args []any
	// ByProperties says whether the property filter constrains: a
	// filter of empty groups ({"type":"AND","values":[]}, PostHog's
	// "no filter") compiles to nothing.
	ByProperties bool
}

// ErrSelectsEverything is Compile's answer for a filter that constrains
// nothing: it would delete every event in its scope, which no request may.
var ErrSelectsEverything = errors.New("the filter selects every event")

// Compile returns the filter's condition over an events row (columns
// timestamp, timestamp_ms, event, properties). now is the instant the
// property filter's relative dates ("-7d") count back from: the request's
// time, so that every run of it deletes the same events. A filter that
// selects every event is refused (ErrSelectsEverything), also when it
// is stored: the deleter never runs one. The property filter's errors
// are *propfilter.Error.
func (f Filter) Compile(ctx context.Context, now time.Time) (Cond, error) {
	c := Cond{SQL: "1"}
	and := func(sql string, args ...any) {
		c.SQL += " AND " + sql
		c.Args = append(c.Args, args...)
	}
	// The whole-second bounds let ClickHouse skip other months'
	// partitions; the millisecond ones are exact.
	if f.After != nil {
		and("timestamp >= toDateTime(?) AND toUInt64(toUInt32(timestamp)) * 1000 + timestamp_ms >= ?",
			uint32(f.After.Unix()), uint64(f.After.UnixMilli()))
	}
	if f.Before != nil {
		and("timestamp <= toDateTime(?) AND toUInt64(toUInt32(timestamp)) * 1000 + timestamp_ms < ?",
			uint32(f.Before.Unix()), uint64(f.Before.UnixMilli()))
	}
	if len(f.Events) > 0 {
		set := make([]any, len(f.Events))
		for i, e := range f.Events {
			set[i] = e
		}
		and("event IN ?", clickhouse.GroupSet{Value: set})
	}
	if hasProperties(f.Properties) {
		cl, err := propfilter.ParseWith(ctx, string(f.Properties), propfilter.Options{Events: true, Now: func() time.Time { return now }})
		if err != nil {
			return Cond{}, err
		}
		if cl.SQL != "" {
			and(cl.SQL, cl.Args...)
			c.ByProperties = true
		}
	}
	if c.SQL == "1" {
		return Cond{}, ErrSelectsEverything
	}
	return c, nil
}
