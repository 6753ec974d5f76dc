package httpapi

import (
	"context"
	"maps"
	"net/http"

	"github.com/personhub/personhub/pkg/plugin"
)

// pluginConfigJSON is a plugin config as the API shows it; secret values
// are already masked by the plugin service.
type pluginConfigJSON struct {
	ID          uint64         `json:"id"`
	Plugin      uint64         `json:"plugin"`
	Enabled     bool           `json:"enabled"`
	Order       int            `json:"order"`
	Config      map[string]any `json:"config"`
	TeamID      uint64         `json:"team_id"`
	Name        *string        `json:"name"`
	Description *string        `json:"description"`
	Deleted     bool           `json:"deleted"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
	// Metrics are the ingester's counts of the config's runs (config
	// routes only; null when they cannot be read).
	Metrics *plugin.ConfigMetrics `json:"metrics,omitempty"`
}

func toPluginConfigJSON(c plugin.Config) pluginConfigJSON {
	const ts = "2006-01-02T15:04:05.000000Z"
	cfg := maps.Clone(c.Config)
	if cfg == nil {
		cfg = map[string]any{}
	}
	// Attachments show among the values, as PostHog shows them (never
	// their contents).
	for k, att := range c.Attachments {
		cfg[k] = att.Shown()
	}
	return pluginConfigJSON{ID: c.ID, Plugin: c.PluginID, Enabled: c.Enabled, Order: c.Order, Config: cfg,
		TeamID: c.ProjectID, Name: c.Name, Description: c.Description, Deleted: c.Deleted,
		CreatedAt: c.CreatedAt.UTC().Format(ts), UpdatedAt: c.UpdatedAt.UTC().Format(ts)}
}

// configJSON returns toPluginConfigJSON with the config's metrics. A
// bucket that cannot be read shows no metrics rather than failing the
// request: the config itself was read.
func (a *API) configJSON(ctx context.Context) func(plugin.Config) pluginConfigJSON {
	return func(c plugin.Config) pluginConfigJSON {
		out := toPluginConfigJSON(c)
		m, err := a.plugins.ConfigMetrics(ctx, c.ID)
		if err != nil {
			a.log.Warn("plugin config metrics unreadable", "plugin_config_id", c.ID, "err", err)
			return out
		}
		out.Metrics = &m
		return out
	}
}

// configTarget checks the project (the key's organization's) and returns
// the actor and the project id.
func (a *API) configTarget(r *http.Request) (plugin.Actor, uint64, error) {
	p, err := a.project(r)
	if err != nil {
		return plugin.Actor{}, 0, err
	}
	k := keyFrom(r.Context())
	return plugin.Actor{OrganizationID: k.OrganizationID, KeyID: k.ID, KeyLabel: k.Label}, p.ID, nil
}

// configTargetID is configTarget and the config {id} of the path.
func (a *API) configTargetID(r *http.Request) (plugin.Actor, uint64, uint64, error) {
	actor, project, err := a.configTarget(r)
	if err != nil {
		return actor, 0, 0, err
	}
	id, err := configID(r)
	return actor, project, id, err
}

// configID is the {id} of a plugin config path.
func configID(r *http.Request) (uint64, error) {
	id, err := parseID(pathVar(r, "id"))
	if err != nil {
		return 0, errNotFound
	}
	return id, nil
}

// listPluginConfigs serves GET /api/projects/{project_id}/plugin_configs/:
// the project's configs by order, then id, paginated.
func (a *API) listPluginConfigs(w http.ResponseWriter, r *http.Request) error {
	actor, project, err := a.configTarget(r)
	if err != nil {
		return err
	}
	win, err := paginate(r.URL.Query(), offsetPaging)
	if err != nil {
		return err
	}
	all, err := a.plugins.ListConfigs(r.Context(), actor, project)
	if err != nil {
		return err
	}
	writePage(a, w, r, win, all, a.configJSON(r.Context()))
	return nil
}

// createPluginConfig serves POST /api/projects/{project_id}/plugin_configs/.
func (a *API) createPluginConfig(w http.ResponseWriter, r *http.Request) error {
	actor, project, err := a.configTarget(r)
	if err != nil {
		return err
	}
	in, err := readConfigInput(r)
	if err != nil {
		return err
	}
	c, err := a.plugins.CreateConfig(r.Context(), actor, project, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, a.configJSON(r.Context())(c))
	return nil
}

// getPluginConfig serves GET /api/projects/{project_id}/plugin_configs/{id}/.
func (a *API) getPluginConfig(w http.ResponseWriter, r *http.Request) error {
	actor, project, id, err := a.configTargetID(r)
	if err != nil {
		return err
	}
	c, err := a.plugins.GetConfig(r.Context(), actor, project, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.configJSON(r.Context())(c))
	return nil
}

// patchPluginConfig serves PATCH /api/projects/{project_id}/plugin_configs/{id}/.
func (a *API) patchPluginConfig(w http.ResponseWriter, r *http.Request) error {
	actor, project, id, err := a.configTargetID(r)
	if err != nil {
		return err
	}
	in, err := readConfigInput(r)
	if err != nil {
		return err
	}
	c, err := a.plugins.PatchConfig(r.Context(), actor, project, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.configJSON(r.Context())(c))
	return nil
}

// deletePluginConfig serves DELETE /api/projects/{project_id}/plugin_configs/{id}/.
func (a *API) deletePluginConfig(w http.ResponseWriter, r *http.Request) error {
	actor, project, id, err := a.configTargetID(r)
	if err != nil {
		return err
	}
	if err := a.plugins.DeleteConfig(r.Context(), actor, project, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readConfigInput reads a config create or PATCH body: JSON (at most
// configBody bytes), or multipart/form-data with attachments (at most the
// route's configFormBody).
func readConfigInput(r *http.Request) (plugin.ConfigInput, error) {
	if boundary, ok := plugin.FormBoundary(r.Header.Get("Content-Type")); ok {
		in, err := plugin.DecodeConfigForm(r.Body, boundary)
		if err != nil {
			return in, bodyError(r, err)
		}
		return in, nil
	}
	body, err := readJSONUpTo(r, configBody)
	if err != nil {
		return plugin.ConfigInput{}, err
	}
	return plugin.DecodeConfigInput(body)
}
