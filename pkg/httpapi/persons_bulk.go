package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/csvexport"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/person"
)

// Bounds of the persons routes that take lists (PostHog's).
const (
	// MaxBulkDelete is the most persons one bulk_delete names.
	MaxBulkDelete = 1000
	// MaxMerge is the most persons one merge names.
	MaxMerge = 100
	// MaxBatchLookup is the most distinct ids one batch_by_distinct_ids
	// looks up (PostHog silently drops the rest; here it is a 400).
	MaxBatchLookup = 200
)

// bulkDeleteResult is PostHog's summary of a bulk deletion.
type bulkDeleteResult struct {
	PersonsFound     int                 `json:"persons_found"`
	PersonsDeleted   int                 `json:"persons_deleted"`
	EventsQueued     bool                `json:"events_queued_for_deletion"`
	RecordingsQueued bool                `json:"recordings_queued_for_deletion"`
	DeletionErrors   []map[string]string `json:"deletion_errors"`
}

// bulkDelete serves POST /persons/bulk_delete/: up to MaxBulkDelete persons
// named by ids (integer ids or uuids) or by distinct_ids, each deleted as
// DELETE /persons/{id}/ would (delete_events, keep_person alike). Answered
// once every deletion is folded, with PostHog's summary and status (202:
// the events' deletion is queued). delete_recordings is accepted and
// reported as PostHog does; this service stores no recordings.
func (a *API) bulkDelete(w http.ResponseWriter, r *http.Request) error {
	proj, body, err := a.projectWithBody(r)
	if err != nil {
		return err
	}
	deleteEvents, err := bodyBool(body, "delete_events")
	if err != nil {
		return err
	}
	keepPerson, err := bodyBool(body, "keep_person")
	if err != nil {
		return err
	}
	deleteRecordings, err := bodyBool(body, "delete_recordings")
	if err != nil {
		return err
	}
	filter, filtered, err := deletionFilter(r, body, false)
	if err != nil {
		return err
	}
	if filtered && !deleteEvents {
		return invalid("delete_events", "after, before and event choose which events to delete: they need delete_events true.")
	}
	persons, err := a.bulkTargets(r, proj.ID, body, MaxBulkDelete)
	if err != nil {
		return err
	}
	var cmds []command.Command
	for _, p := range persons {
		if filtered {
			// The matching events, then (unless kept) the person: the
			// request is folded while the person is live.
			c, err := filteredCommand(p, filter)
			if err != nil {
				return err
			}
			cmds = append(cmds, c)
			if !keepPerson {
				cmds = append(cmds, command.DeletePerson(commandDistinctID(p), p.ID, false))
			}
			continue
		}
		c := command.DeletePerson(commandDistinctID(p), p.ID, deleteEvents)
		switch {
		case keepPerson && !deleteEvents:
			continue
		case keepPerson:
			c = command.DeletePersonEvents(commandDistinctID(p), p.ID)
		}
		cmds = append(cmds, c)
	}
	if len(cmds) > 0 {
		if err := a.apply(r, proj.ID, cmds...); err != nil {
			return err
		}
	}
	res := bulkDeleteResult{PersonsFound: len(persons), EventsQueued: deleteEvents && len(persons) > 0,
		RecordingsQueued: deleteRecordings && len(persons) > 0, DeletionErrors: []map[string]string{}}
	if !keepPerson && len(persons) > 0 {
		// Count what the fold did: a person deleted meanwhile by
		// another request is found but not deleted by this one.
		ids := make([]uint64, len(persons))
		for i, p := range persons {
			ids[i] = p.ID
		}
		live, err := a.store.PersonsByID(r.Context(), proj.ID, ids)
		if err != nil {
			return err
		}
		res.PersonsDeleted = len(persons) - len(live)
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

// projectWithBody reads the project of a collection write and its JSON
// object body.
func (a *API) projectWithBody(r *http.Request) (controlplane.Project, map[string]any, error) {
	proj, err := a.project(r)
	if err != nil {
		return proj, nil, err
	}
	body, err := readObject(r)
	return proj, body, err
}

// commandDistinctID is the distinct id a command about p is recorded
// through: its oldest, or its uuid for a person left without any (a reset
// racing a split); commands name their person by $person_id, and an id
// owned by nobody changes nothing in the fold.
func commandDistinctID(p chstore.PersonRecord) string {
	if len(p.DistinctIDs) > 0 {
		return p.DistinctIDs[0]
	}
	return p.UUID.String()
}

// bodyBool reads an optional boolean of a JSON body: true/false, or a
// string parseBool reads (PostHog takes any value as true).
func bodyBool(body map[string]any, field string) (bool, error) {
	switch v := body[field].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		return parseBool(field, v)
	}
	return false, invalid(field, field+" must be true or false.")
}

// bulkTargets resolves the ids or distinct_ids of bulk_delete and merge
// (exactly one of them, at most max) to the live persons they name, each
// once. Names that match no live person are skipped, as in PostHog.
func (a *API) bulkTargets(r *http.Request, projectID uint64, body map[string]any, max int) ([]chstore.PersonRecord, error) {
	ids, err := bodyList(body, "ids", max)
	if err != nil {
		return nil, err
	}
	dids, err := bodyList(body, "distinct_ids", max)
	if err != nil {
		return nil, err
	}
	switch {
	// PostHog's wording, which clients may match on.
	case len(ids) > 0 && len(dids) > 0:
		return nil, invalid("ids", "You must provide either distinct_ids or ids, not both.")
	case len(ids) == 0 && len(dids) == 0:
		return nil, invalid("ids", "You need to specify either distinct_ids or ids (integer ids or uuids), at most "+strconv.Itoa(max)+".")
	}
	var found []chstore.PersonRecord
	seen := map[uint64]bool{}
	keep := func(p chstore.PersonRecord, ok bool) {
		if ok && !seen[p.ID] {
			seen[p.ID] = true
			found = append(found, p)
		}
	}
	if len(dids) > 0 {
		names, err := stringItems("distinct_ids", dids)
		if err != nil {
			return nil, err
		}
		byDID, err := a.store.PersonsByDistinctID(r.Context(), projectID, names)
		pick(names, byDID, keep)
		return found, err
	}
	intIDs, uuids, err := personKeys(ids)
	if err != nil {
		return nil, err
	}
	byID, err := a.store.PersonsByID(r.Context(), projectID, intIDs)
	if err != nil {
		return nil, err
	}
	byUUID, err := a.store.PersonsByUUID(r.Context(), projectID, uuids)
	pick(intIDs, byID, keep)
	pick(uuids, byUUID, keep)
	return found, err
}

// pick hands keep, in the order of keys, the person found for each.
func pick[K comparable](keys []K, found map[K]chstore.PersonRecord, keep func(chstore.PersonRecord, bool)) {
	for _, k := range keys {
		p, ok := found[k]
		keep(p, ok)
	}
}

// bodyList reads an optional list of a JSON body, at most max long.
func bodyList(body map[string]any, field string, max int) ([]any, error) {
	raw, ok := body[field]
	if !ok || raw == nil {
		return nil, nil
	}
	list, isList := raw.([]any)
	if !isList {
		return nil, invalid(field, field+" must be a list.")
	}
	if len(list) > max {
		return nil, invalid(field, fmt.Sprintf("You can only pass %d %s in one call; got %d.", max, field, len(list)))
	}
	return list, nil
}

// stringItems checks that every item of a list is a string.
func stringItems(field string, list []any) ([]string, error) {
	out := make([]string, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, invalid(field, field+" must be a list of strings.")
		}
		out[i] = s
	}
	return out, nil
}

// personKeys splits person names into integer ids and uuids: a JSON
// integer, or a string holding an integer or a uuid.
func personKeys(list []any) ([]uint64, []uuid.UUID, error) {
	var ids []uint64
	var uuids []uuid.UUID
	for _, v := range list {
		s := fmt.Sprint(v)
		switch v.(type) {
		case json.Number, string:
		default:
			s = ""
		}
		if id, err := parseID(s); err == nil {
			ids = append(ids, id)
		} else if u, err := uuid.Parse(s); err == nil {
			uuids = append(uuids, u)
		} else {
			return nil, nil, invalid("ids", fmt.Sprintf("Each of ids must be a person's integer id or uuid; %.80q is neither.", s))
		}
	}
	return ids, uuids, nil
}

// deleteEvents serves POST /persons/{id}/delete_events/: the deletion of
// the person's events up to now is queued and the person stays (as
// DELETE ...?keep_person=true&delete_events=true). 202, PostHog's status,
// once the request is folded (queued); its progress is in
// deletion_status/.
//
// With after, before or event in the body, only the person's events that
// they match are queued (events_delete.go).
func (a *API) deleteEvents(w http.ResponseWriter, r *http.Request) error {
	projectID, p, body, err := a.targetWithBody(r)
	if err != nil {
		return err
	}
	f, filtered, err := deletionFilter(r, body, false)
	if err != nil {
		return err
	}
	c := command.DeletePersonEvents(commandDistinctID(p), p.ID)
	if filtered {
		if c, err = filteredCommand(p, f); err != nil {
			return err
		}
	}
	if err := a.apply(r, projectID, c); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// applyCommand publishes a command and answers 204 once it is folded.
func (a *API) applyCommand(w http.ResponseWriter, r *http.Request, projectID uint64, c command.Command) error {
	if err := a.apply(r, projectID, c); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deletionItem is one queued deletion: PostHog's fields (status pending or
// completed) and ours (stage, times, the count of deleted events).
type deletionItem struct {
	PersonID         uint64     `json:"person_id"`
	PersonUUID       uuid.UUID  `json:"person_uuid"`
	CreatedAt        time.Time  `json:"created_at"`
	Status           string     `json:"status"`
	Stage            string     `json:"stage"`
	StartedAt        *time.Time `json:"started_at"`
	DeleteVerifiedAt *time.Time `json:"delete_verified_at"`
	EventsDeleted    *uint64    `json:"events_deleted"`
	RequestSeq       uint64     `json:"request_seq"`
}

func deletionJSON(q deletion.Request) deletionItem {
	it := deletionItem{PersonID: q.PersonID, PersonUUID: q.PersonUUID, CreatedAt: q.RequestedAt.UTC(),
		Status: "pending", Stage: q.Status, RequestSeq: q.RequestSeq}
	if q.Status == deletion.StatusRunning {
		t := q.StartedAt.UTC()
		it.StartedAt = &t
	}
	if q.Status == deletion.StatusVerified {
		started, verified, n := q.StartedAt.UTC(), q.VerifiedAt.UTC(), q.EventsDeleted
		it.Status, it.StartedAt, it.DeleteVerifiedAt, it.EventsDeleted = "completed", &started, &verified, &n
	}
	return it
}

// deletionStages maps the status parameter to the stored statuses:
// PostHog's pending (not verified yet), completed and all, and ours.
var deletionStages = map[string][]string{
	"all": nil, "pending": {deletion.StatusPending, deletion.StatusRunning}, "completed": {deletion.StatusVerified},
	"waiting": {deletion.StatusPending}, "running": {deletion.StatusRunning}, "verified": {deletion.StatusVerified},
}

// deletionStatus serves GET /persons/deletion_status/: the project's
// queued deletions of events, newest request first, filtered by status,
// person_uuid or person_id, with the project's counts by stage.
func (a *API) deletionStatus(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	win, err := paginate(q, offsetPaging)
	if err != nil {
		return err
	}
	f := deletion.QueueFilter{ProjectID: proj.ID, Limit: win.Limit, Offset: win.Offset}
	status := q.Get("status")
	if status == "" {
		status = "all"
	}
	stages, ok := deletionStages[status]
	if !ok {
		return invalid("status", "status must be one of pending, completed, all (PostHog's), waiting, running, verified.")
	}
	f.Statuses = stages
	if v := q.Get("person_uuid"); v != "" {
		if f.PersonUUID, err = uuid.Parse(v); err != nil {
			return invalid("person_uuid", "person_uuid must be a uuid.")
		}
	}
	if v := q.Get("person_id"); v != "" {
		if f.PersonID, err = parseID(v); err != nil || f.PersonID == 0 {
			return invalid("person_id", "person_id must be a person's integer id.")
		}
	}
	list, total, counts, err := a.writes.Deletions.List(r.Context(), f)
	if err != nil {
		return err
	}
	results := make([]deletionItem, len(list))
	for i, it := range list {
		results[i] = deletionJSON(it)
	}
	filtered, ftotal, err := a.writes.Deletions.ListFiltered(r.Context(), f)
	if err != nil {
		return err
	}
	fresults := make([]filteredDeletionItem, len(filtered))
	for i, it := range filtered {
		fresults[i] = filteredDeletionJSON(it)
	}
	next, prev := a.pageLinks(r, win, total)
	writeJSON(w, http.StatusOK, struct {
		envelope
		Counts         deletion.Counts `json:"counts"`
		EventDeletions any             `json:"event_deletions"`
	}{envelope{Count: total, Next: next, Previous: prev, Results: results}, counts,
		map[string]any{"count": ftotal, "results": fresults}})
	return nil
}

// resetResult answers reset_person_distinct_id: whether the id was
// detached, and the person that owns or owned it, as it is now (null when
// the id had no live owner).
type resetResult struct {
	Success  bool           `json:"success"`
	Detached bool           `json:"detached"`
	Person   *person.Person `json:"person"`
	Detail   string         `json:"detail,omitempty"`
}

// resetDistinctID serves POST /persons/reset_person_distinct_id/ with
// {"distinct_id"}: the id leaves its person, so its next event starts a
// fresh one. 202, PostHog's status, whenever the request is valid:
//
//   - an id owned by nobody (unknown, or of a deleted person: PostHog's
//     flow is delete, then reset) already starts a fresh person: nothing
//     is recorded;
//   - a person's only id is not detached (detached false, and a detail
//     saying why): it would leave a person no event can reach, holding
//     its events and properties where nothing finds them; delete the
//     person instead. This is also the state after delete, reset and a
//     new event, which PostHog's reset leaves alone too.
func (a *API) resetDistinctID(w http.ResponseWriter, r *http.Request) error {
	proj, body, err := a.projectWithBody(r)
	if err != nil {
		return err
	}
	raw, ok := body["distinct_id"]
	if !ok || raw == nil {
		return required("distinct_id")
	}
	d, isString := raw.(string)
	if !isString || d == "" {
		return invalid("distinct_id", "distinct_id must be a non-empty string.")
	}
	owners, err := a.store.PersonsByDistinctID(r.Context(), proj.ID, []string{d})
	if err != nil {
		return err
	}
	p, owned := owners[d]
	if !owned {
		writeJSON(w, http.StatusAccepted, resetResult{Success: true})
		return nil
	}
	if len(p.DistinctIDs) < 2 {
		pj := personJSON(p)
		writeJSON(w, http.StatusAccepted, resetResult{Success: true, Person: &pj,
			Detail: fmt.Sprintf("Not detached: %.80q is the only distinct id of person %d, and a person needs one. To start over, delete the person (DELETE /persons/%d/).", d, p.ID, p.ID)})
		return nil
	}
	if err := a.apply(r, proj.ID, command.ResetDistinctID(d)); err != nil {
		return err
	}
	res := resetResult{Success: true, Detached: true}
	after, err := a.store.GetPerson(r.Context(), proj.ID, p.ID)
	switch {
	case err == nil:
		pj := personJSON(after)
		res.Person = &pj
	case !errors.Is(err, chstore.ErrNotFound):
		return err
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

// batchByDistinctIDs serves GET (?distinct_ids=<JSON list>) and POST
// ({"distinct_ids": [...]}) /persons/batch_by_distinct_ids/: a map from
// each distinct id to the person owning it; ids owned by nobody are
// absent. At most MaxBatchLookup ids. CSV: a row per id found.
func (a *API) batchByDistinctIDs(w http.ResponseWriter, r *http.Request) error {
	return a.batchLookup(w, r, "distinct_ids", "distinct_id", func(r *http.Request, projectID uint64, names []string) (map[string]chstore.PersonRecord, error) {
		return a.store.PersonsByDistinctID(r.Context(), projectID, names)
	})
}

// batchByUUIDs serves GET (?uuids=<JSON list>) and POST ({"uuids": [...]})
// /persons/batch_by_uuids/, PostHog's route: a map from each uuid (in
// canonical form) to its live person; uuids of nobody are absent. At most
// MaxBatchLookup; a string that is not a uuid is a 400. CSV: a row per
// uuid found.
func (a *API) batchByUUIDs(w http.ResponseWriter, r *http.Request) error {
	return a.batchLookup(w, r, "uuids", "uuid", func(r *http.Request, projectID uint64, names []string) (map[string]chstore.PersonRecord, error) {
		uuids := make([]uuid.UUID, len(names))
		for i, n := range names {
			u, err := uuid.Parse(n)
			if err != nil {
				return nil, invalid("uuids", fmt.Sprintf("One or more UUIDs are invalid: %.80q is not a uuid.", n))
			}
			// The canonical form keys the answer (as PostHog's), the
			// CSV's rows too: batchLookup reads names after find.
			uuids[i], names[i] = u, u.String()
		}
		found, err := a.store.PersonsByUUID(r.Context(), projectID, uuids)
		out := make(map[string]chstore.PersonRecord, len(found))
		for i, u := range uuids {
			if p, ok := found[u]; ok {
				out[names[i]] = p
			}
		}
		return out, err
	})
}

// batchLookup serves the batch lookups: the names listed in field (a JSON
// list in the query of a GET, in the body of a POST; at most
// MaxBatchLookup strings) mapped to the persons find gives, as
// {"results": {name: Person}}, or in CSV a row per name found (column
// column, then the person). find may rewrite names in place, to the form
// its answer is keyed by.
func (a *API) batchLookup(w http.ResponseWriter, r *http.Request, field, column string,
	find func(r *http.Request, projectID uint64, names []string) (map[string]chstore.PersonRecord, error)) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	csv, err := wantsCSV(r)
	if err != nil {
		return err
	}
	var list []any
	if r.Method == http.MethodGet {
		if raw := r.URL.Query().Get(field); raw != "" {
			var v any
			if json.Unmarshal([]byte(raw), &v) != nil {
				return invalid(field, field+" must be a JSON list of strings, e.g. [\"a\",\"b\"].")
			}
			list, err = bodyList(map[string]any{field: v}, field, MaxBatchLookup)
		}
	} else {
		var body map[string]any
		if body, err = readObject(r); err == nil {
			list, err = bodyList(body, field, MaxBatchLookup)
		}
	}
	if err != nil {
		return err
	}
	names, err := stringItems(field, list)
	if err != nil {
		return err
	}
	found, err := find(r, proj.ID, names)
	if err != nil {
		return err
	}
	results := make(map[string]person.Person, len(found))
	for d, p := range found {
		results[d] = personJSON(p)
	}
	if !csv {
		writeJSON(w, http.StatusOK, map[string]any{"results": results})
		return nil
	}
	out := csvexport.NewWriter()
	defer out.Close()
	for _, d := range names {
		if p, ok := results[d]; ok {
			if err := out.Add(map[string]any{column: d, "person": p}); err != nil {
				return err
			}
			delete(results, d) // a repeated name is one row
		}
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, err = out.WriteTo(w)
	return err
}
