package httpapi

import (
	"errors"
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
	Timezone       string `json:"timezone"`
	AnonymizeIPs   bool   `json:"anonymize_ips"`
	// TimestampedPersonProperties: capture makes $set timestamp-aware.
	TimestampedPersonProperties bool `json:"timestamped_person_properties"`
}

func toProjectJSON(p controlplane.Project) projectJSON {
	return projectJSON{ID: p.ID, OrganizationID: p.OrganizationID, Name: p.Name, APIToken: p.APIToken,
		CreatedAt: p.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), Timezone: p.TimezoneName(), AnonymizeIPs: p.AnonymizeIPs,
		TimestampedPersonProperties: p.TimestampedPersonProperties}
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

// patchProject serves PATCH /api/projects/{project_id}/: the time zone
// (analysis buckets and relative dates follow it), anonymize_ips
// (capture stores no client address) and timestamped_person_properties
// (capture makes $set timestamp-aware) are settable; other fields of the
// body are ignored.
func (a *API) patchProject(w http.ResponseWriter, r *http.Request) error {
	p, err := a.project(r)
	if err != nil {
		return err
	}
	body, err := readObject(r)
	if err != nil {
		return err
	}
	var u controlplane.ProjectUpdate
	if raw, ok := body["timezone"]; ok {
		tz, ok := raw.(string)
		if !ok {
			return invalid("timezone", "timezone must be an IANA time zone name, e.g. \"Europe/Berlin\".")
		}
		u.Timezone = &tz
	}
	if raw, ok := body["anonymize_ips"]; ok {
		anon, ok := raw.(bool)
		if !ok {
			return invalid("anonymize_ips", "anonymize_ips must be true or false.")
		}
		u.AnonymizeIPs = &anon
	}
	if raw, ok := body["timestamped_person_properties"]; ok {
		on, ok := raw.(bool)
		if !ok {
			return invalid("timestamped_person_properties", "timestamped_person_properties must be true or false.")
		}
		u.TimestampedPersonProperties = &on
	}
	if u != (controlplane.ProjectUpdate{}) {
		p, err = a.keys.UpdateProject(r.Context(), p.ID, u)
		if errors.Is(err, controlplane.ErrInvalidTimezone) {
			return invalid("timezone", "\""+*u.Timezone+"\" is not a known IANA time zone name (e.g. \"Europe/Berlin\", \"UTC\").")
		}
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, toProjectJSON(p))
	return nil
}
