package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// pluginJSON is a plugin as the API shows it.
type pluginJSON struct {
	ID               uint64              `json:"id"`
	PluginType       string              `json:"plugin_type"`
	Name             string              `json:"name"`
	Description      *string             `json:"description"`
	URL              *string             `json:"url"`
	Icon             *string             `json:"icon"`
	ConfigSchema     json.RawMessage     `json:"config_schema"`
	Tag              *string             `json:"tag"`
	LatestTag        *string             `json:"latest_tag"`
	IsGlobal         bool                `json:"is_global"`
	OrganizationID   string              `json:"organization_id"`
	OrganizationName string              `json:"organization_name"`
	Capabilities     plugin.Capabilities `json:"capabilities"`
	Metrics          json.RawMessage     `json:"metrics"`
	PublicJobs       json.RawMessage     `json:"public_jobs"`
}

func (a *API) toPluginJSON(ctx context.Context, p plugin.Plugin) pluginJSON {
	var url *string
	if p.URL != nil {
		u := repository.DisplayURL(*p.URL)
		url = &u
	}
	return pluginJSON{ID: p.ID, PluginType: p.Type, Name: p.Name, Description: p.Description, URL: url, Icon: p.Icon,
		ConfigSchema: p.ConfigSchema, Tag: p.Tag, LatestTag: p.LatestTag, IsGlobal: p.IsGlobal,
		OrganizationID: p.OrganizationID, OrganizationName: a.plugins.OrganizationName(ctx, p.OrganizationID),
		Capabilities: p.Capabilities, Metrics: p.Metrics, PublicJobs: p.PublicJobs}
}

// fromPluginError maps the plugin domain's errors (see toAPIError).
func fromPluginError(e *plugin.Error) (*Error, bool) {
	switch e.Kind {
	case plugin.KindInvalid:
		return invalid(e.Attr, e.Detail), false
	case plugin.KindForbidden:
		return &Error{Status: http.StatusForbidden, Type: "authentication_error", Code: "permission_denied", Detail: e.Detail}, false
	case plugin.KindNotFound:
		return errNotFound, false
	case plugin.KindUnavailable:
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Detail: e.Detail}, true
	}
	return nil, true
}

// pluginActor checks that the organization in the path is the key's (or
// "@current") and returns who acts. Another organization is a 404, the
// same as an unknown one.
func pluginActor(r *http.Request) (plugin.Actor, error) {
	k := keyFrom(r.Context())
	if org := pathVar(r, "organization_id"); org != k.OrganizationID && org != "@current" {
		return plugin.Actor{}, errNotFound
	}
	return plugin.Actor{OrganizationID: k.OrganizationID, KeyID: k.ID, KeyLabel: k.Label}, nil
}

// pluginTarget is the actor and the {id} of the path.
func pluginTarget(r *http.Request) (plugin.Actor, uint64, error) {
	actor, err := pluginActor(r)
	if err != nil {
		return actor, 0, err
	}
	id, err := parseID(pathVar(r, "id"))
	if err != nil {
		return actor, 0, errNotFound
	}
	return actor, id, nil
}

// listPlugins serves GET pipeline_transformations/: the visible
// transformations by id, paginated.
func (a *API) listPlugins(w http.ResponseWriter, r *http.Request) error {
	actor, err := pluginActor(r)
	if err != nil {
		return err
	}
	win, err := paginate(r.URL.Query(), offsetPaging)
	if err != nil {
		return err
	}
	all, err := a.plugins.List(r.Context(), actor)
	if err != nil {
		return err
	}
	writePage(a, w, r, win, all, func(p plugin.Plugin) pluginJSON { return a.toPluginJSON(r.Context(), p) })
	return nil
}

// createPlugin serves POST pipeline_transformations/.
func (a *API) createPlugin(w http.ResponseWriter, r *http.Request) error {
	actor, err := pluginActor(r)
	if err != nil {
		return err
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	in, err := plugin.DecodePluginInput(body)
	if err != nil {
		return err
	}
	p, err := a.plugins.Create(r.Context(), actor, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, a.toPluginJSON(r.Context(), p))
	return nil
}

// getPlugin serves GET pipeline_transformations/{id}/.
func (a *API) getPlugin(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	p, err := a.plugins.Get(r.Context(), actor, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.toPluginJSON(r.Context(), p))
	return nil
}

// patchPlugin serves PATCH pipeline_transformations/{id}/.
func (a *API) patchPlugin(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	in, err := plugin.DecodePluginInput(body)
	if err != nil {
		return err
	}
	p, err := a.plugins.Patch(r.Context(), actor, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.toPluginJSON(r.Context(), p))
	return nil
}

// deletePlugin serves DELETE pipeline_transformations/{id}/.
func (a *API) deletePlugin(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	if err := a.plugins.Delete(r.Context(), actor, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sourceStatus is a file's transpile or parse status (?include=status).
type sourceStatus struct {
	Status string  `json:"status"`
	Error  *string `json:"error"`
}

// writeSource answers {filename: source}; with ?include=status,
// {"files": {filename: source}, "status": {filename: {status, error}}}
// where status lists the files that have one.
func writeSource(w http.ResponseWriter, r *http.Request, b plugin.Bundle) error {
	switch inc := r.URL.Query().Get("include"); inc {
	case "":
		writeJSON(w, http.StatusOK, b.Sources())
		return nil
	case "status":
	default:
		return invalid("include", "include must be status.")
	}
	status := map[string]sourceStatus{}
	names := make([]string, 0, len(b))
	for name := range b {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if f := b[name]; f.Status != "" {
			st := sourceStatus{Status: f.Status}
			if f.Error != "" {
				e := f.Error
				st.Error = &e
			}
			status[name] = st
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": b.Sources(), "status": status})
	return nil
}

// pluginSource serves GET pipeline_transformations/{id}/source/.
func (a *API) pluginSource(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	b, err := a.plugins.Source(r.Context(), actor, id)
	if err != nil {
		return err
	}
	return writeSource(w, r, b)
}

// updatePluginSource serves PATCH pipeline_transformations/{id}/update_source/.
func (a *API) updatePluginSource(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	if inc := r.URL.Query().Get("include"); inc != "" && inc != "status" {
		return invalid("include", "include must be status.")
	}
	body, err := readJSON(r)
	if err != nil {
		return err
	}
	changes, err := plugin.DecodeSourceInput(body)
	if err != nil {
		return err
	}
	b, err := a.plugins.UpdateSource(r.Context(), actor, id, changes)
	if err != nil {
		return err
	}
	return writeSource(w, r, b)
}

// checkPluginUpdates serves GET pipeline_transformations/{id}/check_for_updates/.
func (a *API) checkPluginUpdates(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	p, err := a.plugins.CheckForUpdates(r.Context(), actor, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"plugin": a.toPluginJSON(r.Context(), p)})
	return nil
}

// upgradePlugin serves POST pipeline_transformations/{id}/upgrade/.
func (a *API) upgradePlugin(w http.ResponseWriter, r *http.Request) error {
	actor, id, err := pluginTarget(r)
	if err != nil {
		return err
	}
	p, err := a.plugins.Upgrade(r.Context(), actor, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.toPluginJSON(r.Context(), p))
	return nil
}

// pluginRepository serves GET pipeline_transformations/repository/.
func (a *API) pluginRepository(w http.ResponseWriter, r *http.Request) error {
	if _, err := pluginActor(r); err != nil {
		return err
	}
	entries, err := a.plugins.Repository(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, entries)
	return nil
}

// unusedPlugins serves GET pipeline_transformations/unused/.
func (a *API) unusedPlugins(w http.ResponseWriter, r *http.Request) error {
	actor, err := pluginActor(r)
	if err != nil {
		return err
	}
	ids, err := a.plugins.Unused(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ids)
	return nil
}

// exportsUnsubscribeConfigs serves GET pipeline_transformations/exports_unsubscribe_configs/.
func (a *API) exportsUnsubscribeConfigs(w http.ResponseWriter, r *http.Request) error {
	actor, err := pluginActor(r)
	if err != nil {
		return err
	}
	configs, err := a.plugins.ExportsUnsubscribeConfigs(r.Context(), actor)
	if err != nil {
		return err
	}
	out := make([]pluginConfigJSON, 0, len(configs))
	for _, c := range configs {
		out = append(out, toPluginConfigJSON(c))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pluginActivity serves GET pipeline_transformations/activity/: the
// organization's Plugin and PluginConfig entries.
func (a *API) pluginActivity(w http.ResponseWriter, r *http.Request) error {
	actor, err := pluginActor(r)
	if err != nil {
		return err
	}
	log := a.plugins.Activity()
	if log == nil {
		writeJSON(w, http.StatusOK, activityPage{Results: []activityJSON{}})
		return nil
	}
	return a.writeActivity(w, r, log, activity.Query{OrganizationID: actor.OrganizationID,
		Scopes: []string{plugin.ScopePlugin, plugin.ScopePluginConfig}})
}
