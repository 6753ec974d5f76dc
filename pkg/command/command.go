// Package command builds the commands the API, cohorts and
// transformations append to the log, and owns appending to the log: one
// publisher with a bounded window of unacknowledged messages for capture,
// `ingester publish` and the API alike (Publisher), and for the API the
// step "append a command and wait until the ingester has folded it" (Log).
// The names and property keys of commands are pkg/event's vocabulary;
// docs/events.md describes them.
package command

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// Command is one command before it is stamped with its uuid, time and
// actor (Envelope). Make one with the builders below.
type Command struct {
	// Event is the command's name (pkg/event).
	Event string
	// DistinctID is the envelope's distinct_id.
	DistinctID string
	// ID, when set, is the envelope's uuid (a caller that reports the
	// command's id, such as a deletion request's, picks it); else Append
	// stamps a fresh one.
	ID         string
	set        map[string]any // the top-level $set; nil: absent
	unset      []string       // the top-level $unset; nil: absent
	properties []member       // properties besides the actor
}

// member is one member of a JSON object being written.
type member struct {
	key   string
	value any
}

// SetProperties is the $set of props on the person owning distinctID
// (PATCH /persons/{id}/, update_property).
func SetProperties(distinctID string, props map[string]any) Command {
	return Command{Event: event.Set, DistinctID: distinctID, set: props}
}

// DeleteProperty is the $unset of key on the person owning distinctID
// (delete_property).
func DeleteProperty(distinctID, key string) Command {
	return Command{Event: event.DeletePersonProperty, DistinctID: distinctID, unset: []string{key}}
}

// DeletePerson deletes person personID, recorded under one of its
// distinct ids; deleteEvents also queues the deletion of its events.
func DeletePerson(distinctID string, personID uint64, deleteEvents bool) Command {
	return Command{Event: event.DeletePerson, DistinctID: distinctID, properties: []member{
		{event.PropPersonID, personID}, {event.PropDeleteEvents, deleteEvents}}}
}

// DeletePersonEvents queues the deletion of person personID's events and
// keeps the person.
func DeletePersonEvents(distinctID string, personID uint64) Command {
	return Command{Event: event.DeletePersonEvents, DistinctID: distinctID, properties: []member{
		{event.PropPersonID, personID}}}
}

// EventDeletionDistinctID is the distinct id of a project-wide
// DeleteFilteredEvents: the envelope needs one; the command is about no
// person.
const EventDeletionDistinctID = "$event_deletion"

// DeleteFilteredEvents queues the deletion of the events filter (the JSON
// object of deletion.Filter) matches, up to the command's sequence: of
// person personID, recorded under one of its distinct ids, or of the
// whole project when personID is 0 (distinctID is then
// EventDeletionDistinctID).
func DeleteFilteredEvents(distinctID string, personID uint64, filter json.RawMessage) Command {
	props := []member{{event.PropDeletionFilter, filter}}
	if personID != 0 {
		props = append(props, member{event.PropPersonID, personID})
	}
	return Command{Event: event.DeleteFilteredEvents, DistinctID: distinctID, properties: props}
}

// SplitPerson moves the distinct ids moved off person personID, each to a
// new person of its own, in commands of at most event.MaxSplitPerEvent
// ids recorded under main, the id the person keeps. No ids, no commands.
func SplitPerson(personID uint64, main string, moved []string) []Command {
	var out []Command
	for start := 0; start < len(moved); start += event.MaxSplitPerEvent {
		chunk := moved[start:min(start+event.MaxSplitPerEvent, len(moved))]
		out = append(out, Command{Event: event.SplitPerson, DistinctID: main, properties: []member{
			{event.PropPersonID, personID}, {event.PropSplitIDs, chunk}, {event.PropSplitMainID, main}}})
	}
	return out
}

// MergePersons merges the persons owning sources into the person owning
// target: one $merge_dangerously each (it merges identified persons too),
// recorded under target with the source as alias.
func MergePersons(target string, sources []string) []Command {
	out := make([]Command, 0, len(sources))
	for _, s := range sources {
		out = append(out, Command{Event: event.MergeDangerously, DistinctID: target, properties: []member{{"alias", s}}})
	}
	return out
}

// ResetDistinctID detaches distinctID from the person owning it.
func ResetDistinctID(distinctID string) Command {
	return Command{Event: event.ResetPersonDistinctID, DistinctID: distinctID}
}

// AddToStaticCohort makes ids members of static cohort cohortID, in
// commands of bounded size (cohortCommands).
func AddToStaticCohort(cohortID uint64, ids []string) []Command {
	return cohortCommands(event.AddToStaticCohort, cohortID, ids)
}

// RemoveFromStaticCohort ends the membership of ids in static cohort
// cohortID, in commands of bounded size (cohortCommands).
func RemoveFromStaticCohort(cohortID uint64, ids []string) []Command {
	return cohortCommands(event.RemoveFromStaticCohort, cohortID, ids)
}

// maxCohortIDBytes bounds the ids of one cohort command as JSON, well
// under the envelope limit (event.MaxSize) whatever the ids' escaping
// costs.
const maxCohortIDBytes = 256 << 10

// cohortCommands splits ids into commands of at most
// event.MaxCohortIDsPerEvent ids and maxCohortIDBytes of them. Their
// distinct id is "$cohort_<id>", no person's: the command is about the
// ids it lists.
func cohortCommands(name string, cohortID uint64, ids []string) []Command {
	var out []Command
	var chunk []string
	size := 0
	flush := func() {
		if len(chunk) > 0 {
			out = append(out, Command{Event: name, DistinctID: "$cohort_" + strconv.FormatUint(cohortID, 10), properties: []member{
				{event.PropCohortID, cohortID}, {event.PropCohortDistinctIDs, chunk}}})
		}
		chunk, size = nil, 0
	}
	for _, d := range ids {
		b, _ := json.Marshal(d)
		if len(chunk) == event.MaxCohortIDsPerEvent || size+len(b) > maxCohortIDBytes {
			flush()
		}
		chunk, size = append(chunk, d), size+len(b)+1
	}
	flush()
	return out
}

// TransformationsDistinctID is the distinct id of SetTransformations
// commands: the envelope needs one; the ingester never folds the command.
const TransformationsDistinctID = "$transformations"

// SetTransformations sets the project's transformation chain to refs, the
// JSON array of its content-addressed steps (transform.Ref).
func SetTransformations(refs json.RawMessage) Command {
	return Command{Event: event.SetTransformations, DistinctID: TransformationsDistinctID, properties: []member{
		{event.PropTransformations, refs}}}
}

// Envelope returns the command's JSON envelope, with uuid id, timestamp
// now and, unless nil, the actor that made it (event.PropActor). Objects
// are written with their keys sorted, as encoding/json writes a map: the
// bytes are those of the maps the envelopes were built as before.
func (c Command) Envelope(id string, now time.Time, actor *event.Actor) ([]byte, error) {
	props := slices.Clone(c.properties)
	if actor != nil {
		props = append(props, member{event.PropActor, *actor})
	}
	properties, err := appendObject(nil, props)
	if err != nil {
		return nil, err
	}
	top := []member{{"distinct_id", c.DistinctID}, {"event", c.Event}, {"properties", json.RawMessage(properties)},
		{"timestamp", now.UTC().Format(time.RFC3339Nano)}, {"uuid", id}}
	if c.set != nil {
		top = append(top, member{"$set", c.set})
	}
	if c.unset != nil {
		top = append(top, member{"$unset", c.unset})
	}
	return appendObject(make([]byte, 0, 128+len(properties)), top)
}

// appendObject appends the JSON object of ms to buf, its keys sorted as
// encoding/json sorts a map's. A json.RawMessage value is appended as it
// is (it was written by encoding/json).
func appendObject(buf []byte, ms []member) ([]byte, error) {
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	buf = append(buf, '{')
	for i, m := range ms {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		buf = append(append(buf, k...), ':')
		v, ok := m.value.(json.RawMessage)
		if !ok {
			if v, err = json.Marshal(m.value); err != nil {
				return nil, err
			}
		}
		buf = append(buf, v...)
	}
	return append(buf, '}'), nil
}
