package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/progress"
)

// PersonWrites is what the person write routes need: the stream they
// publish change events to, the ingester's watermark they wait on, and the
// activity log.
type PersonWrites struct {
	JS jetstream.JetStream
	// Progress: the watermark of each partition of the stream.
	Progress *progress.Partitions
	Activity *activity.Log
	// Deletions, when set, serves persons/deletion_status/.
	Deletions *deletion.Queue
	// Wait is how long a write waits for the ingester to fold its event
	// before answering 202 (default 5s).
	Wait time.Duration
}

// commands is the log person writes append their commands to and wait
// on.
func (w *PersonWrites) commands() *command.Log {
	return command.NewLog(w.JS, w.Progress, w.Wait)
}

// actorOf is the key of the request in ctx, as commands record it.
func actorOf(ctx context.Context) event.Actor {
	key := keyFrom(ctx)
	return event.Actor{KeyID: key.ID, KeyLabel: key.Label, OrganizationID: key.OrganizationID}
}

// publish appends commands of the request's key (on the project's
// command subject: they carry the reserved $actor), in order, and returns
// the last one's stream sequence. A failure before the first
// acknowledgement changed nothing.
func (a *API) publish(r *http.Request, projectID uint64, cmds ...command.Command) (uint64, error) {
	return a.publishAs(r.Context(), projectID, cmds...)
}

// publishAs is publish for the key in ctx (cohort membership records it
// through cohort.Log, which knows no request).
func (a *API) publishAs(ctx context.Context, projectID uint64, cmds ...command.Command) (uint64, error) {
	seq, err := a.writes.commands().Append(ctx, projectID, actorOf(ctx), cmds...)
	var appendErr *command.AppendError
	if !errors.As(err, &appendErr) {
		return seq, err
	}
	i := appendErr.Appended
	a.log.Error("publish person change", "err", appendErr.Err, "event", appendErr.Event, "published_before", i)
	if i > 0 {
		return 0, &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
			Detail: fmt.Sprintf("The event log became unreachable after %d of %d changes were recorded; they will be applied. Retry to finish.", i, appendErr.Total)}
	}
	return 0, &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
		Detail: "The event log is unreachable; nothing was changed. Try again shortly."}
}

// errPending is answered when the ingester has not folded a recorded write
// within the wait: the change is in the log and will be applied, but reads
// do not show it yet.
var errPending = &Error{Status: http.StatusAccepted, Type: "pending", Code: "not_yet_visible",
	Detail: "The change is recorded in the event log and will be applied when the ingester catches up; reads do not show it yet."}

// awaitFolded waits until the ingester of the project's partition has
// committed seq.
func (a *API) awaitFolded(ctx context.Context, projectID, seq uint64) error {
	err := a.writes.commands().Await(ctx, projectID, seq)
	if errors.Is(err, command.ErrPending) {
		return errPending
	}
	return err
}

// apply publishes commands of the request's key and waits until they are
// folded.
func (a *API) apply(r *http.Request, projectID uint64, cmds ...command.Command) error {
	seq, err := a.publish(r, projectID, cmds...)
	if err != nil {
		return err
	}
	return a.awaitFolded(r.Context(), projectID, seq)
}

// writePerson publishes a command about a person, waits until it is
// folded, and answers 200 with the person as reads now see it.
func (a *API) writePerson(w http.ResponseWriter, r *http.Request, projectID, personID uint64, c command.Command) error {
	if err := a.apply(r, projectID, c); err != nil {
		return err
	}
	p, err := a.store.GetPerson(r.Context(), projectID, personID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, personJSON(p))
	return nil
}

// targetPerson loads the person a write names.
func (a *API) targetPerson(r *http.Request) (uint64, chstore.PersonRecord, error) {
	proj, err := a.project(r)
	if err != nil {
		return 0, chstore.PersonRecord{}, err
	}
	p, err := a.lookupPerson(r, proj.ID)
	if err == nil && len(p.DistinctIDs) == 0 {
		err = invalid("id", "This person has no distinct id to record a change through.")
	}
	return proj.ID, p, err
}

// targetWithBody loads the person a write names and decodes the body.
func (a *API) targetWithBody(r *http.Request) (uint64, chstore.PersonRecord, map[string]any, error) {
	projectID, p, err := a.targetPerson(r)
	if err != nil {
		return 0, p, nil, err
	}
	body, err := readObject(r)
	return projectID, p, body, err
}

// updatePerson serves PATCH /persons/{id}/: a $set of exactly the given
// properties.
func (a *API) updatePerson(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	raw, ok := body["properties"]
	if !ok {
		return required("properties")
	}
	props, ok := raw.(map[string]any)
	if !ok {
		return invalid("properties", "properties must be a JSON object.")
	}
	return a.writePerson(w, r, projectID, p.ID, command.SetProperties(p.DistinctIDs[0], props))
}

// param reads a parameter from the JSON body or, failing that, the query.
func param(r *http.Request, body map[string]any, name string) (any, bool) {
	if v, ok := body[name]; ok {
		return v, true
	}
	if r.URL.Query().Has(name) {
		return r.URL.Query().Get(name), true
	}
	return nil, false
}

// updateProperty serves POST /persons/{id}/update_property/ with key and
// value (JSON types kept from a body; query values are strings).
func (a *API) updateProperty(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	key, ok := param(r, body, "key")
	k, isString := key.(string)
	if !ok {
		return required("key")
	}
	if !isString || k == "" {
		return invalid("key", "key must be a non-empty string.")
	}
	value, ok := param(r, body, "value")
	if !ok {
		return required("value")
	}
	return a.writePerson(w, r, projectID, p.ID, command.SetProperties(p.DistinctIDs[0], map[string]any{k: value}))
}

// deleteProperty serves POST /persons/{id}/delete_property/ with $unset.
func (a *API) deleteProperty(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	key, ok := param(r, body, "$unset")
	if !ok {
		return required("$unset")
	}
	k, isString := key.(string)
	if !isString || k == "" {
		return invalid("$unset", "$unset must be the name of the property to delete.")
	}
	return a.writePerson(w, r, projectID, p.ID, command.DeleteProperty(p.DistinctIDs[0], k))
}

// parseBool reads true/1/yes and false/0/no (any case).
func parseBool(field, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "y", "on":
		return true, nil
	case "false", "0", "no", "n", "off", "":
		return false, nil
	}
	return false, invalid(field, field+" must be true or false.")
}

// deletePerson serves DELETE /persons/{id}/: 204 once the person is gone
// from reads; with delete_events=true its events are queued for deletion.
// With keep_person=true the person stays: only delete_events does
// anything (as PostHog, which then queues the events alone).
func (a *API) deletePerson(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	deleteEvents, err := parseBool("delete_events", q.Get("delete_events"))
	if err != nil {
		return err
	}
	keepPerson, err := parseBool("keep_person", q.Get("keep_person"))
	if err != nil {
		return err
	}
	projectID, p, err := a.targetPerson(r)
	if err != nil {
		return err
	}
	c := command.DeletePerson(p.DistinctIDs[0], p.ID, deleteEvents)
	switch {
	case keepPerson && !deleteEvents:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case keepPerson:
		c = command.DeletePersonEvents(p.DistinctIDs[0], p.ID)
	}
	return a.applyCommand(w, r, projectID, c)
}

// splitResult says what a split created.
type splitResult struct {
	Success bool          `json:"success"`
	Person  person.Person `json:"person"`
	Created []splitPerson `json:"created"`
}

type splitPerson struct {
	DistinctID string    `json:"distinct_id"`
	ID         uint64    `json:"id"`
	UUID       uuid.UUID `json:"uuid"`
}

// splitPersonHandler serves POST /persons/{id}/split/ in PostHog's two
// modes (splitTargets): distinct_ids_to_split moves those ids off, each to
// a new person of its own; otherwise every distinct id but
// main_distinct_id (default: the first) does.
func (a *API) splitPersonHandler(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	main, others, err := splitTargets(p.DistinctIDs, body)
	if err != nil {
		return err
	}
	res := splitResult{Success: true, Created: []splitPerson{}}
	if cmds := command.SplitPerson(p.ID, main, others); len(cmds) > 0 {
		if err := a.apply(r, projectID, cmds...); err != nil {
			return err
		}
	}
	for _, d := range others {
		list, _, err := a.store.ListPersons(r.Context(), chstore.ListQuery{ProjectID: projectID, DistinctID: d, Limit: 1})
		if err != nil {
			return err
		}
		if len(list) == 1 && list[0].ID != p.ID {
			res.Created = append(res.Created, splitPerson{DistinctID: d, ID: list[0].ID, UUID: list[0].UUID})
		}
	}
	after, err := a.store.GetPerson(r.Context(), projectID, p.ID)
	if err != nil {
		return err
	}
	res.Person = personJSON(after)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// mergeResult answers merge/: the person kept, as it is now, and the
// persons the fold merged into it.
type mergeResult struct {
	Success bool          `json:"success"`
	Person  person.Person `json:"person"`
	Merged  []mergedJSON  `json:"merged"`
}

type mergedJSON struct {
	ID   uint64    `json:"id"`
	UUID uuid.UUID `json:"uuid"`
}

// mergePersons serves POST /persons/{id}/merge/ with {"ids": [...]} or
// {"distinct_ids": [...]} (at most MaxMerge): each person named is merged
// into this one, as a $merge_dangerously of one of its distinct ids would
// (identified persons too): its distinct ids move here, its properties
// are kept where this person has none of the same key, the earlier
// creation time is kept, and it is gone. Names of nobody, and this person
// itself, are skipped. split/ takes ids off again. Answered once folded.
func (a *API) mergePersons(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	found, err := a.bulkTargets(r, projectID, body, MaxMerge)
	if err != nil {
		return err
	}
	res := mergeResult{Success: true, Merged: []mergedJSON{}}
	var sources []string
	for _, o := range found {
		if o.ID == p.ID || len(o.DistinctIDs) == 0 {
			continue
		}
		sources = append(sources, o.DistinctIDs[0])
		res.Merged = append(res.Merged, mergedJSON{ID: o.ID, UUID: o.UUID})
	}
	if len(sources) > 0 {
		if err := a.apply(r, projectID, command.MergePersons(p.DistinctIDs[0], sources)...); err != nil {
			return err
		}
		// What the fold did: a person whose id moved elsewhere between
		// the read and the fold is still there, and not reported.
		ids := make([]uint64, len(res.Merged))
		for i, m := range res.Merged {
			ids[i] = m.ID
		}
		live, err := a.store.PersonsByID(r.Context(), projectID, ids)
		if err != nil {
			return err
		}
		res.Merged = slices.DeleteFunc(res.Merged, func(m mergedJSON) bool { _, ok := live[m.ID]; return ok })
	}
	after, err := a.store.GetPerson(r.Context(), projectID, p.ID)
	if err != nil {
		return err
	}
	res.Person = personJSON(after)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// splitTargets validates a split request against the person's distinct
// ids and returns the id the person keeps the split events under (main)
// and the ids to move off. Any invalid request is refused before anything
// is published.
func splitTargets(ids []string, body map[string]any) (main string, moved []string, err error) {
	rawMain, hasMain := body["main_distinct_id"]
	hasMain = hasMain && rawMain != nil
	if rawList, ok := body["distinct_ids_to_split"]; ok && rawList != nil {
		if hasMain {
			return "", nil, invalid("main_distinct_id", "main_distinct_id cannot be combined with distinct_ids_to_split.")
		}
		return partialSplit(ids, rawList)
	}
	main = ids[0]
	if hasMain {
		s, isString := rawMain.(string)
		if !isString || !slices.Contains(ids, s) {
			return "", nil, invalid("main_distinct_id", "main_distinct_id must be one of the person's distinct ids.")
		}
		main = s
	}
	for _, d := range ids {
		if d != main {
			moved = append(moved, d)
		}
	}
	return main, moved, nil
}

// partialSplit checks distinct_ids_to_split: a non-empty list of the
// person's own distinct ids (repeats count once) that leaves it at least
// one. PostHog would leave a person with no distinct id, which no later
// event or write can reach; use main_distinct_id to keep a single one.
func partialSplit(ids []string, raw any) (main string, moved []string, err error) {
	const attr = "distinct_ids_to_split"
	list, ok := raw.([]any)
	if !ok {
		return "", nil, invalid(attr, "distinct_ids_to_split must be a list of strings.")
	}
	if len(list) == 0 {
		return "", nil, invalid(attr, "distinct_ids_to_split must not be empty.")
	}
	var unknown []string
	for _, v := range list {
		d, isString := v.(string)
		switch {
		case !isString:
			return "", nil, invalid(attr, "distinct_ids_to_split must be a list of strings.")
		case !slices.Contains(ids, d):
			unknown = append(unknown, d)
		case !slices.Contains(moved, d):
			moved = append(moved, d)
		}
	}
	if len(unknown) > 0 {
		return "", nil, invalid(attr, fmt.Sprintf("Not distinct ids of this person: %q.", unknown))
	}
	for _, d := range ids {
		if !slices.Contains(moved, d) {
			return d, moved, nil
		}
	}
	return "", nil, invalid(attr, "distinct_ids_to_split names every distinct id of the person; it must keep at least one (use main_distinct_id to keep a single one).")
}

// personActivity serves GET /persons/{id}/activity/ (one person, also after
// it was deleted) and GET /persons/activity/ (the project).
func (a *API) personActivity(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := activity.Query{OrganizationID: proj.OrganizationID, Scope: "Person", ProjectID: proj.ID}
	if raw := pathVar(r, "id"); raw != "" {
		if _, err := parseID(raw); err == nil {
			q.ItemID = raw
		} else {
			p, err := a.lookupPerson(r, proj.ID)
			if err != nil {
				return err
			}
			q.ItemID = fmt.Sprint(p.ID)
		}
	}
	return a.writeActivity(w, r, a.writes.Activity, q)
}
