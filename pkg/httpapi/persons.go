package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/csvexport"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/propfilter"
)

// personJSON renders a stored person in the interface's shape.
func personJSON(p chstore.PersonRecord) person.Person {
	ids := append([]string(nil), p.DistinctIDs...)
	person.SortDistinctIDs(ids)
	props := p.Properties
	if props == nil {
		props = map[string]any{}
	}
	out := person.Person{
		ID: p.ID, UUID: p.UUID, Name: person.DisplayName(props, ids, p.ID), DistinctIDs: ids,
		Properties: props, CreatedAt: p.CreatedAt.UTC().Truncate(time.Second), IsIdentified: p.IsIdentified,
	}
	if p.LastSeenAt != nil {
		seen := p.LastSeenAt.UTC().Format(person.LastSeenLayout)
		out.LastSeenAt = &seen
	}
	return out
}

// listPersons serves GET /api/projects/{project_id}/persons/.
func (a *API) listPersons(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	csv, err := wantsCSV(r)
	if err != nil {
		return err
	}
	win, err := paginate(q, offsetPaging)
	if err != nil {
		return err
	}
	var opts propfilter.Options
	if a.cohorts != nil {
		opts = a.cohorts.Options(proj.ID)
	}
	filter, err := propfilter.ParseWith(r.Context(), q.Get("properties"), opts)
	if err != nil {
		return err
	}
	query := chstore.ListQuery{
		ProjectID: proj.ID, DistinctID: q.Get("distinct_id"), Email: q.Get("email"),
		Search: q.Get("search"), Properties: filter, Limit: win.Limit, Offset: win.Offset,
	}
	if a.writes != nil && a.writes.Progress != nil {
		// Read before the page: an unfiltered page is kept by it
		// (pkg/chstore/listmark.go), so a PATCH this process answered
		// (its wait saw the watermark pass) is never hidden by it.
		c, l := a.writes.Progress.Marks(proj.ID)
		query.Mark = chstore.Watermark{Committed: c, Lane: l, Known: true}
	}
	start := time.Now()
	return a.queryPersons(w, r, query, win, csv, func(results []person.Person, total uint64) {
		next, prev := a.pageLinks(r, win, total)
		writeJSON(w, http.StatusOK, envelope{Count: total, Next: next, Previous: prev, Results: results})
		a.listTime.WithLabelValues(listFilterKind(query)).Observe(time.Since(start).Seconds())
	})
}

// listFilterKind is the filter label of api_persons_list_seconds: a
// property filter scans the project whatever else narrows it, so it wins
// over the indexed filters (distinct id, email, search).
func listFilterKind(q chstore.ListQuery) string {
	switch {
	case q.Properties.SQL != "":
		return "property"
	case q.DistinctID != "" || q.Email != "" || q.Search != "":
		return "indexed"
	default:
		return "none"
	}
}

// queryPersons answers a persons query: as CSV (every match when no limit
// was given), or as a page of persons JSON that answer renders with the
// total number of matches.
func (a *API) queryPersons(w http.ResponseWriter, r *http.Request, query chstore.ListQuery, win window, csv bool,
	answer func(results []person.Person, total uint64)) error {
	if csv {
		if !win.HasLimit {
			// An export without a limit streams every match.
			query.Limit = 0
		}
		return a.writePersonsCSV(w, r, query)
	}
	list, total, err := a.store.ListPersons(r.Context(), query)
	if err != nil {
		return err
	}
	results := make([]person.Person, len(list))
	for i, p := range list {
		results[i] = personJSON(p)
	}
	answer(results, total)
	return nil
}

// writePersonsCSV renders persons as CSV. The header is the union of all
// rows' columns, so rows are collected first (compactly, in a spill file past
// 1 MiB; csvexport.NewWriter's limits bound the memory), then streamed.
func (a *API) writePersonsCSV(w http.ResponseWriter, r *http.Request, q chstore.ListQuery) error {
	out := csvexport.NewWriter()
	defer out.Close()
	err := a.store.EachPerson(r.Context(), q, func(p chstore.PersonRecord) error {
		return out.Add(personJSON(p))
	})
	if err != nil {
		return err
	}
	a.sendPersonsCSV(w, out)
	return nil
}

// sendPersonsCSV answers collected rows as the persons.csv attachment.
func (a *API) sendPersonsCSV(w http.ResponseWriter, out *csvexport.Writer) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="persons.csv"`)
	w.WriteHeader(http.StatusOK)
	if _, err := out.WriteTo(w); err != nil {
		a.log.Warn("csv export cut short", "err", err)
	}
}

// getPerson serves GET /api/projects/{project_id}/persons/{id}/.
func (a *API) getPerson(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	csv, err := wantsCSV(r)
	if err != nil {
		return err
	}
	p, err := a.lookupPerson(r, proj.ID)
	if err != nil {
		return err
	}
	if csv {
		out := csvexport.NewWriter()
		defer out.Close()
		if err := out.Add(personJSON(p)); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, err := out.WriteTo(w)
		return err
	}
	writeJSON(w, http.StatusOK, personJSON(p))
	return nil
}

// lookupPerson finds the person named by {id}: an integer id or a uuid.
func (a *API) lookupPerson(r *http.Request, projectID uint64) (chstore.PersonRecord, error) {
	raw := pathVar(r, "id")
	if id, err := parseID(raw); err == nil {
		return a.store.GetPerson(r.Context(), projectID, id)
	}
	if u, err := uuid.Parse(raw); err == nil {
		return a.store.GetPersonByUUID(r.Context(), projectID, u)
	}
	return chstore.PersonRecord{}, notAPersonID(projectID, raw)
}

// notAPersonID answers a person path whose {id} is neither an integer id
// nor a uuid. It is most often a distinct id, so, as PostHog does, the
// detail shows the list filter that finds a person by distinct id, in
// PostHog's words.
func notAPersonID(projectID uint64, raw string) error {
	const limit = 200 // echo a bounded part of a hostile path
	if len(raw) > limit {
		raw = strings.ToValidUTF8(raw[:limit], "") + "…"
	}
	// PostHog's sentence first: clients match on it.
	return invalid("id", fmt.Sprintf("The ID provided does not look like a personID. If you are using a distinctId, please use /persons?distinct_id=%s instead. "+
		"(A person is identified by its integer id or its uuid; %q is neither: /api/projects/%d/persons/?distinct_id=%s finds it.)", raw, raw, projectID, url.QueryEscape(raw)))
}
