package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/person"
)

// cohortLog records static cohort membership as commands of the key in the
// request's context, like person writes (docs/cohorts.md).
type cohortLog struct{ a *API }

func (a *API) cohortLog() cohort.Log {
	if a.writes == nil {
		return nil
	}
	return cohortLog{a}
}

func (l cohortLog) Append(ctx context.Context, projectID uint64, cmds ...command.Command) (uint64, error) {
	return l.a.publishAs(ctx, projectID, cmds...)
}

// Await answers command.ErrPending (cohort.ErrPending) when the change is
// not folded within the writes' wait.
func (l cohortLog) Await(ctx context.Context, projectID, seq uint64) error {
	return l.a.writes.commands().Await(ctx, projectID, seq)
}

// removePersonFromCohort serves PATCH .../cohorts/{id}/remove_person_from_static_cohort/
// with {"person_id": integer id or uuid}: 404 when the person is not a
// member; 200 with the cohort once the removal is folded.
func (a *API) removePersonFromCohort(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	body, err := readObject(r)
	if err != nil {
		return err
	}
	var ref string
	switch v := body["person_id"].(type) {
	case nil:
		return required("person_id")
	case string:
		ref = v
	case json.Number:
		ref = v.String()
	default:
		return invalid("person_id", "A person is identified by its integer id or its uuid.")
	}
	v, err := a.cohorts.RemoveMember(r.Context(), a.cohortLog(), project, id, ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCohortJSON(v))
	return nil
}

// cohortPersonsPage is PostHog's answer of GET /cohorts/{id}/persons/.
type cohortPersonsPage struct {
	Results  []person.Person `json:"results"`
	Next     *string         `json:"next"`
	Previous *string         `json:"previous"`
}

// cohortPersons serves GET /api/projects/{project_id}/cohorts/{id}/persons/:
// the persons of the cohort's current membership (a soft-deleted cohort's
// too), in the persons list's order and JSON; limit (default 100) and
// offset; format=csv (all members without a limit).
func (a *API) cohortPersons(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	csv, err := wantsCSV(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	win, err := paginate(q, offsetPaging)
	if err != nil {
		return err
	}
	members, err := a.cohorts.Members(r.Context(), project, id)
	if err != nil {
		return err
	}
	query := chstore.ListQuery{ProjectID: project, Properties: members, Limit: win.Limit, Offset: win.Offset}
	return a.queryPersons(w, r, query, win, csv, func(results []person.Person, total uint64) {
		page := cohortPersonsPage{Results: results}
		page.Next, page.Previous = a.pageLinks(r, win, total)
		writeJSON(w, http.StatusOK, page)
	})
}
