package httpapi

import (
	"net/http"
	"time"

	"github.com/personhub/personhub/pkg/transform"
)

// dryRunJSON is the answer of a dry run: the event that would be stored
// (null: dropped) and what each step did.
type dryRunJSON struct {
	Event   *transform.Event       `json:"event"`
	Dropped bool                   `json:"dropped"`
	Steps   []transform.StepResult `json:"steps"`
}

// testPluginConfig serves POST /api/projects/{project_id}/plugin_configs/{id}/test/:
// the project's transformation chain (its enabled configs, plus config
// {id} even when disabled) run on the sample event of the body, in fresh
// sandboxes; nothing is stored or counted.
func (a *API) testPluginConfig(w http.ResponseWriter, r *http.Request) error {
	actor, project, id, err := a.configTargetID(r)
	if err != nil {
		return err
	}
	raw, err := readJSON(r)
	if err != nil {
		return err
	}
	ev, err := transform.DecodeSample(raw, project, time.Now())
	if err != nil {
		return err
	}
	links, err := a.plugins.Chain(r.Context(), actor, project, id)
	if err != nil {
		return err
	}
	res, err := a.transforms.DryRun(r.Context(), transform.Steps(links), ev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, dryRunJSON{Event: res.Event, Dropped: res.Event == nil, Steps: res.Steps})
	return nil
}
