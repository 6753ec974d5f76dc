package event

import "slices"

// Event names with special meaning to the fold (docs/events.md).
const (
	Identify         = "$identify"
	CreateAlias      = "$create_alias"
	MergeDangerously = "$merge_dangerously"
	// Set is the event the API publishes for property writes.
	Set = "$set"
	// DeletePersonProperty carries $unset. PostHog's capture accepts it
	// from clients, so it is an ordinary event; only the API's copy, on
	// the command subject, carries an actor.
	DeletePersonProperty = "$delete_person_property"
)

// Commands: person writes only the API may publish, on its own subject
// (stream.CommandSubject). The ingester dead-letters them anywhere else.
const (
	// DeletePerson deletes PropPersonID (and, with PropDeleteEvents,
	// queues the deletion of its events).
	DeletePerson = "$delete_person"
	// DeletePersonEvents queues the deletion of PropPersonID's events and
	// keeps the person (DELETE ...?keep_person=true&delete_events=true).
	DeletePersonEvents = "$delete_person_events"
	// SplitPerson moves PropSplitIDs off PropPersonID, each to a new
	// person of its own.
	SplitPerson = "$split_person"
	// ResetPersonDistinctID detaches the command's distinct_id from the
	// person owning it, so that its next event starts a fresh person
	// (POST /persons/reset_person_distinct_id/). The owner keeps its other
	// ids; an id that is its owner's only one stays attached.
	ResetPersonDistinctID = "$reset_person_distinct_id"
	// AddToStaticCohort makes each distinct id in PropCohortDistinctIDs
	// that a live person owns at this point of the log a member of static
	// cohort PropCohortID (docs/cohorts.md).
	AddToStaticCohort = "$add_to_static_cohort"
	// RemoveFromStaticCohort ends the membership of each distinct id in
	// PropCohortDistinctIDs in static cohort PropCohortID.
	RemoveFromStaticCohort = "$remove_from_static_cohort"
	// SetTransformations sets the project's transformation chain, from
	// this point of the log on, to PropTransformations: a JSON array of
	// content-addressed steps (transform.Ref). The ingester consumes it
	// (it folds nothing and writes no events row); docs/architecture.md,
	// "Transformations".
	SetTransformations = "$set_transformations"
	// DeleteFilteredEvents queues the deletion of the events, up to this
	// sequence, that PropDeletionFilter matches: of person PropPersonID
	// when it is present (the person stays), else of the whole project.
	DeleteFilteredEvents = "$delete_filtered_events"
)

// Properties of command events.
const (
	// PropActor is the key that made a change through the API (Actor);
	// the activity log is written from it.
	PropActor        = "$actor"
	PropPersonID     = "$person_id"
	PropDeleteEvents = "$delete_events"
	PropSplitIDs     = "$split_distinct_ids"
	PropSplitMainID  = "$main_distinct_id"
	// PropCohortID and PropCohortDistinctIDs are the cohort and the
	// member distinct ids of the static cohort commands.
	PropCohortID          = "$cohort_id"
	PropCohortDistinctIDs = "$cohort_distinct_ids"
	// PropTransformations is SetTransformations' chain. Not reserved: it
	// means something only on that (reserved) command, and clients may
	// have used the name.
	PropTransformations = "$transformations"
	// PropDeletionFilter is DeleteFilteredEvents' filter: a JSON object
	// with after, before (RFC 3339), events (names) and properties (an
	// event property filter), each optional (deletion.Filter).
	PropDeletionFilter = "$deletion_filter"
)

// PropSetTimestamp makes an event's property writes timestamp-aware
// (docs/events.md, "Timestamp-aware $set"): true, or an RFC 3339 moment
// that replaces the event's timestamp. Capture stamps true into the
// events that carry $set of a project with timestamped_person_properties.
const PropSetTimestamp = "$set_timestamp"

// MaxSplitPerEvent is the most distinct ids one $split_person moves; the
// API splits a person with more ids in several events.
const MaxSplitPerEvent = 256

// MaxCohortIDsPerEvent is the most distinct ids one static cohort command
// names (well under the envelope's size limit at the longest distinct
// ids); the API sends a longer list in several commands.
const MaxCohortIDsPerEvent = 1000

// Actor is who made a change through the API: PropActor's value.
type Actor struct {
	KeyID          string `json:"key_id"`
	KeyLabel       string `json:"key_label"`
	OrganizationID string `json:"organization_id"`
}

// ReservedEvents are the command names: only the API may publish them.
var ReservedEvents = []string{DeletePerson, DeletePersonEvents, SplitPerson, ResetPersonDistinctID, AddToStaticCohort, RemoveFromStaticCohort, SetTransformations, DeleteFilteredEvents}

// ReservedProperties are the properties only commands may carry. They mean
// nothing on an ordinary event except PropActor, which would write the
// activity log in a key's name; all of them are refused outside commands
// so that an event in the log that carries one was made by the API.
var ReservedProperties = []string{PropActor, PropPersonID, PropDeleteEvents, PropSplitIDs, PropSplitMainID, PropCohortID, PropCohortDistinctIDs, PropDeletionFilter}

// ReservedEvent reports whether name is a command name.
func ReservedEvent(name string) bool { return slices.Contains(ReservedEvents, name) }

// Reserved returns why the event may only come from the API (a command
// name, or a reserved property in properties), or "" for an ordinary
// event. Capture refuses such events; the ingester dead-letters them when
// they arrive outside the command subject.
func (e Event) Reserved() string {
	if ReservedEvent(e.Event) {
		return "event name " + e.Event + " is reserved for the API's person writes"
	}
	for _, k := range ReservedProperties {
		if _, ok := e.Properties[k]; ok {
			return "property " + k + " is reserved for the API's person writes"
		}
	}
	return ""
}
