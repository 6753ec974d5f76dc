package httpapi

import (
	"net/http"

	"github.com/personhub/personhub/pkg/chstore"
)

// propertyValues serves GET /api/projects/{project_id}/persons/values/?key=K[&value=V]:
// the bare array [{"name", "count"}] of the most frequent values of person
// property K over live persons, each counted once (docs/cohorts.md).
func (a *API) propertyValues(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var values []chstore.PropertyValue
	if a.writes != nil && a.writes.Progress != nil {
		// Counts kept per bucket of persons, recounted where rows were
		// written since the watermark (pkg/chstore/values_counts.go).
		values, err = a.store.CountPropertyValues(r.Context(), proj.ID, q.Get("key"), q.Get("value"), a.writes.Progress.Of(proj.ID).Seq())
	} else {
		values, err = a.store.PropertyValues(r.Context(), proj.ID, q.Get("key"), q.Get("value"))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, values)
	return nil
}
