package httpapi

import (
	"net/http"

	"github.com/personhub/personhub/pkg/action"
)

// actionBody is the body limit of action writes (steps with filters).
const actionBody = 1 << 20

// projectItem is the project of the path and its {id} (an unknown id is
// a 404): actions and cohorts.
func (a *API) projectItem(r *http.Request) (uint64, uint64, error) {
	proj, err := a.project(r)
	if err != nil {
		return 0, 0, err
	}
	id, err := parseID(pathVar(r, "id"))
	if err != nil {
		return 0, 0, errNotFound
	}
	return proj.ID, id, nil
}

// listActions serves GET /api/projects/{project_id}/actions/: live
// actions by id, paginated.
func (a *API) listActions(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	win, err := paginate(r.URL.Query(), offsetPaging)
	if err != nil {
		return err
	}
	all, err := a.actions.List(r.Context(), proj.ID)
	if err != nil {
		return err
	}
	writePage(a, w, r, win, all, func(x action.Action) action.Action { return x })
	return nil
}

// createAction serves POST /api/projects/{project_id}/actions/.
func (a *API) createAction(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	in, err := action.Decode(body)
	if err != nil {
		return err
	}
	act, err := a.actions.Create(r.Context(), proj.ID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, act)
	return nil
}

// getAction serves GET /api/projects/{project_id}/actions/{id}/ (a
// soft-deleted action too, with deleted: true).
func (a *API) getAction(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	act, err := a.actions.Retrieve(r.Context(), project, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, act)
	return nil
}

// patchAction serves PATCH /api/projects/{project_id}/actions/{id}/.
func (a *API) patchAction(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	in, err := action.Decode(body)
	if err != nil {
		return err
	}
	act, err := a.actions.Update(r.Context(), project, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, act)
	return nil
}

// deleteAction serves DELETE /api/projects/{project_id}/actions/{id}/: a
// soft delete, 204.
func (a *API) deleteAction(w http.ResponseWriter, r *http.Request) error {
	project, id, err := a.projectItem(r)
	if err != nil {
		return err
	}
	if err := a.actions.Delete(r.Context(), project, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
