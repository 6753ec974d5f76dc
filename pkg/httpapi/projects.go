package httpapi

import (
	"net/http"

	"github.com/personhub/personhub/pkg/controlplane"
)

// projectJSON is a project as the API shows it.
type projectJSON struct {
	ID             uint64 `json:"id"`
	UUID           string `json:"uuid,omitempty"`
	OrganizationID string `json:"organization"`
	Name           string `json:"name"`
	APIToken       string `json:"api_token"`
	CreatedAt      string `json:"created_at"`
}

func toProjectJSON(p controlplane.Project) projectJSON {
	return projectJSON{ID: p.ID, OrganizationID: p.OrganizationID, Name: p.Name, APIToken: p.APIToken,
		CreatedAt: p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
}

// listProjects serves GET /api/projects/: the projects of the key's
// organization.
func (a *API) listProjects(w http.ResponseWriter, r *http.Request) error {
	win, err := paginate(r.URL.Query(), offsetPaging)
	if err != nil {
		return err
	}
	all, err := a.keys.ListProjects(r.Context(), keyFrom(r.Context()).OrganizationID)
	if err != nil {
		return err
	}
	writePage(a, w, r, win, all, toProjectJSON)
	return nil
}

// getProject serves GET /api/projects/{project_id}/.
func (a *API) getProject(w http.ResponseWriter, r *http.Request) error {
	p, err := a.project(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProjectJSON(p))
	return nil
}
