// Package timeline reconstructs how a person's properties changed over a
// window, from the person's events: the properties_timeline route.
package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/personhub/personhub/pkg/proptime"
)

// DefaultMaxBytes bounds the JSON of the points' properties of one
// timeline. Each point carries all of the person's properties, so without
// a bound the answer grows as points × properties: 250 KB of events (one
// event setting 2,000 properties, then 2,000 events changing a crucial
// key) made a 440 MB answer, built in memory.
const DefaultMaxBytes = 16 << 20

// TooLargeError: the timeline's points would exceed the byte bound; a
// narrower window (or fewer relevant events) has fewer points.
type TooLargeError struct{ Max int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("The timeline's points hold more than %d bytes of properties; narrow date_from/date_to or the relevant events.", e.Max)
}

// Field is the input to narrow (httpapi maps it to a 400 with this attr).
func (e *TooLargeError) Field() string { return "date_from" }

// Event is one stored event of the person, in stream order.
type Event struct {
	Name       string
	Timestamp  time.Time
	Properties string // JSON object with $set, $set_once, $unset inside
}

// Point is a period that starts at Timestamp during which the crucial
// properties kept their values. Properties holds all of the person's
// properties at Timestamp (not only the crucial ones), as PostHog shows them.
// Properties is their JSON, encoded when the point starts (the state
// changes after it).
type Point struct {
	Timestamp          time.Time       `json:"timestamp"`
	Properties         json.RawMessage `json:"properties"`
	RelevantEventCount int             `json:"relevant_event_count"`
}

// Query selects what the timeline shows.
type Query struct {
	From, To time.Time
	// Keys are the crucial person property keys. With none, no change is
	// relevant: the window is one point counting every relevant event.
	Keys []string
	// Events names the relevant events; empty means every event.
	Events []string
	// MaxBytes bounds the points' properties JSON (0: DefaultMaxBytes).
	MaxBytes int
}

// Build folds the events' property changes in order ($set_once, $set,
// $unset, as the ingester does) and returns one point per change of the
// crucial keys among the relevant events inside the window. Events before
// the window only set the starting state. Without crucial keys there is at
// most one point (PostHog: without filters no change is relevant). Points
// whose properties exceed q.MaxBytes in all are a *TooLargeError.
func Build(events []Event, q Query) ([]Point, error) {
	relevant := map[string]bool{}
	for _, e := range q.Events {
		relevant[e] = true
	}
	state := NewState()
	points := []Point{}
	var current map[string]any
	budget := q.MaxBytes
	if budget <= 0 {
		budget = DefaultMaxBytes
	}
	size := 0
	for _, ev := range events {
		state.Fold(ev.Properties, ev.Timestamp, true)
		if ev.Timestamp.Before(q.From) || ev.Timestamp.After(q.To) {
			continue
		}
		if len(relevant) > 0 && !relevant[ev.Name] {
			continue
		}
		view := project(state.Props, q.Keys)
		if current == nil || !reflect.DeepEqual(view, current) {
			// Encoding costs what the point weighs, so the bound also
			// bounds the work.
			raw, err := json.Marshal(state.Props)
			if err != nil {
				return nil, err
			}
			if size += len(raw); size > budget {
				return nil, &TooLargeError{Max: budget}
			}
			points = append(points, Point{Timestamp: ev.Timestamp.UTC(), Properties: raw})
			current = view
		}
		points[len(points)-1].RelevantEventCount++
	}
	return points, nil
}

// project is the part of state that decides where points start: the
// crucial keys' values (nothing when there are none).
func project(state map[string]any, keys []string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := state[k]; ok {
			out[k] = v
		}
	}
	return out
}

// State is a person's properties as Fold leaves them, with the moments
// that timestamp-aware writes recorded (package proptime).
type State struct {
	Props map[string]any
	times proptime.Times
}

// NewState is a person without properties.
func NewState() *State { return &State{Props: map[string]any{}} }

// Fold folds one event's property updates (its stored properties, raw;
// its timestamp, ts) into s: $set_once (only with setOnce), then $set,
// then $unset, with the ingester's rules, timestamp-aware writes
// ($set_timestamp) included (docs/events.md).
func (s *State) Fold(raw string, ts time.Time, setOnce bool) {
	var props struct {
		Set          map[string]any  `json:"$set"`
		SetOnce      map[string]any  `json:"$set_once"`
		Unset        json.RawMessage `json:"$unset"`
		SetTimestamp any             `json:"$set_timestamp"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	if dec.Decode(&props) != nil {
		return
	}
	var w proptime.Write
	w.Moment, w.Aware = proptime.Moment(props.SetTimestamp, ts)
	for k, v := range props.SetOnce {
		if _, ok := s.Props[k]; !ok && setOnce {
			s.Props[k] = v
			s.times.SetOnce(k, w)
		}
	}
	for k, v := range props.Set {
		if apply, _ := s.times.Set(k, w); apply {
			s.Props[k] = v
		}
	}
	var list []string
	if json.Unmarshal(props.Unset, &list) != nil {
		var obj map[string]any
		if json.Unmarshal(props.Unset, &obj) == nil {
			for k := range obj {
				list = append(list, k)
			}
		}
	}
	for _, k := range list {
		delete(s.Props, k)
		s.times.Unset(k)
	}
}

// SortedKeys returns keys sorted and without duplicates.
func SortedKeys(keys []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, k := range keys {
		if k != "" && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
