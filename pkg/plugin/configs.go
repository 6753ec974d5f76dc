package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/personhub/personhub/pkg/activity"
)

// Plugin configs belong to a project; the API checks that the project is
// the actor's organization's, and these methods check that the config is
// in that project. Every config returned has its secret values masked.

// pluginOf reads the plugin of a config for masking its values: nil when
// it cannot be read (a KV failure, or deleted meanwhile), which masks every
// value (Config.Masked), so a failure never shows a secret.
func (s *Service) pluginOf(ctx context.Context, id uint64) *Plugin {
	p, _, err := get[Plugin](ctx, s.st.plugins, idKey(id))
	if err != nil {
		s.log.Warn("plugin config: plugin unreadable, masking every value", "plugin_id", id, "err", err)
		return nil
	}
	return &p
}

// ListConfigs returns a project's live configs by order, then id.
func (s *Service) ListConfigs(ctx context.Context, actor Actor, projectID uint64) ([]Config, error) {
	all, plugins, err := s.projectConfigs(ctx, actor, projectID)
	if err != nil {
		return nil, err
	}
	out := []Config{}
	for _, c := range all {
		p := plugins[c.PluginID]
		out = append(out, c.Masked(&p))
	}
	slices.SortFunc(out, func(a, b Config) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// projectConfigs returns the project's live configs whose plugin exists
// (unsorted, values in clear) and the plugins by id.
func (s *Service) projectConfigs(ctx context.Context, actor Actor, projectID uint64) ([]Config, map[uint64]Plugin, error) {
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return nil, nil, err
	}
	plugins, err := s.pluginsByID(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := []Config{}
	for _, c := range all {
		if _, ok := plugins[c.PluginID]; ok && c.ProjectID == projectID && c.OrganizationID == actor.OrganizationID && !c.Deleted {
			out = append(out, c)
		}
	}
	return out, plugins, nil
}

func (s *Service) pluginsByID(ctx context.Context) (map[uint64]Plugin, error) {
	all, err := list[Plugin](ctx, s.st.plugins)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]Plugin, len(all))
	for _, p := range all {
		out[p.ID] = p
	}
	return out, nil
}

// configIn reads a live config of the project and its plugin.
func (s *Service) configIn(ctx context.Context, actor Actor, projectID, id uint64) (Config, Plugin, error) {
	c, _, err := get[Config](ctx, s.st.configs, idKey(id))
	if err != nil {
		return c, Plugin{}, err
	}
	if c.ProjectID != projectID || c.OrganizationID != actor.OrganizationID || c.Deleted {
		return c, Plugin{}, ErrNotFound
	}
	p, _, err := get[Plugin](ctx, s.st.plugins, idKey(c.PluginID))
	return c, p, err
}

// GetConfig returns one config of the project.
func (s *Service) GetConfig(ctx context.Context, actor Actor, projectID, id uint64) (Config, error) {
	c, p, err := s.configIn(ctx, actor, projectID, id)
	if err != nil {
		return Config{}, err
	}
	return c.Masked(&p), nil
}

// mergeConfig applies a config change: a null removes the key, the mask
// and an attachment as reads show it keep the stored value (a client
// writing back what it read), anything else is set.
func mergeConfig(cur, change map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range change {
		switch {
		case v == nil:
			delete(out, k)
		case v == SecretMask, isShownAttachment(v):
		default:
			out[k] = v
		}
	}
	return out
}

// CreateConfig configures a visible plugin in the project.
func (s *Service) CreateConfig(ctx context.Context, actor Actor, projectID uint64, in ConfigInput) (Config, error) {
	if !in.Plugin.Set {
		return Config{}, invalid("plugin", "This field is required.")
	}
	p, _, err := s.lookup(ctx, actor, in.Plugin.Value, readAny)
	if IsNotFound(err) {
		return Config{}, invalid("plugin", "Invalid pk \"%d\" - object does not exist.", in.Plugin.Value)
	}
	if err != nil {
		return Config{}, err
	}
	if in.Enabled.Value && p.runsNothing() {
		return Config{}, nothingToRun(p)
	}
	if err := checkAttachmentKeys(p, &Config{}, in); err != nil {
		return Config{}, err
	}
	if err := s.storeUploads(ctx, in); err != nil {
		return Config{}, err
	}
	id, err := s.st.nextID(ctx, BucketConfigs)
	if err != nil {
		return Config{}, err
	}
	now := time.Now().UTC()
	c := Config{ID: id, PluginID: p.ID, ProjectID: projectID, OrganizationID: actor.OrganizationID,
		Enabled: in.Enabled.Value, Order: in.Order.Value, Config: mergeConfig(nil, in.Config.Value),
		Name: in.Name.Value, Description: in.Description.Value, CreatedAt: now, UpdatedAt: now}
	c.recordSecrets(&p)
	if err := applyAttachments(&c, in); err != nil {
		return Config{}, err
	}
	rev, err := put(ctx, s.st.configs, idKey(id), c, 0)
	if err != nil {
		return Config{}, err
	}
	masked := c.Masked(&p)
	act := "config_created"
	if c.Enabled {
		act = "enabled"
	}
	s.record(ctx, actor, ScopePluginConfig, idKey(id), projectID, act, p.Name, nil)
	s.announce(ctx, actor, Event{Kind: KindConfigCreated, OrganizationID: actor.OrganizationID, PluginID: p.ID, PluginConfigID: id, ProjectID: projectID, Revision: rev, Config: &masked})
	return masked, nil
}

// PatchConfig changes a config of the project (read-modify-write on the
// latest revision; config keys merge, so concurrent changes of different
// keys both survive).
func (s *Service) PatchConfig(ctx context.Context, actor Actor, projectID, id uint64, in ConfigInput) (Config, error) {
	cur, p, err := s.configIn(ctx, actor, projectID, id)
	if err != nil {
		return Config{}, err
	}
	if in.Plugin.Set {
		return Config{}, invalid("plugin", "The plugin of a config cannot be changed.")
	}
	if err := checkAttachmentKeys(p, &cur, in); err != nil {
		return Config{}, err
	}
	if err := s.storeUploads(ctx, in); err != nil {
		return Config{}, err
	}
	before, after, rev, err := modify(ctx, s.st.configs, idKey(id), func(c *Config) error {
		if c.Deleted {
			return ErrNotFound
		}
		if err := applyAttachments(c, in); err != nil {
			return err
		}
		if in.Enabled.Set {
			if in.Enabled.Value && !c.Enabled && p.runsNothing() {
				return nothingToRun(p)
			}
			c.Enabled = in.Enabled.Value
		}
		if in.Order.Set {
			c.Order = in.Order.Value
		}
		if in.Config.Set {
			c.Config = mergeConfig(c.Config, in.Config.Value)
		}
		c.recordSecrets(&p)
		if in.Name.Set {
			c.Name = in.Name.Value
		}
		if in.Description.Set {
			c.Description = in.Description.Value
		}
		c.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		return Config{}, err
	}
	// Masked by the plugin as it is now (it may have changed meanwhile),
	// and by the secret keys recorded with the config before and after.
	now := s.pluginOf(ctx, after.PluginID)
	before.SecretKeys = after.SecretKeys
	mb, ma := before.Masked(now), after.Masked(now)
	if before.Enabled != after.Enabled {
		act := map[bool]string{true: "enabled", false: "disabled"}[after.Enabled]
		s.record(ctx, actor, ScopePluginConfig, idKey(id), projectID, act, p.Name, nil)
	}
	var changes []activity.Change
	// Compared in clear (a changed secret is a change), shown masked.
	if jsonText(before.Config) != jsonText(after.Config) {
		changes = append(changes, activity.Change{Type: ScopePluginConfig, Action: "changed", Field: "config", Before: mb.Config, After: ma.Config})
	}
	changes = append(changes, attachmentChanges(before.Attachments, after.Attachments)...)
	if before.Order != after.Order {
		changes = append(changes, activity.Change{Type: ScopePluginConfig, Action: "changed", Field: "order", Before: before.Order, After: after.Order})
	}
	if len(changes) > 0 {
		s.record(ctx, actor, ScopePluginConfig, idKey(id), projectID, "config_updated", p.Name, changes)
	}
	s.announce(ctx, actor, Event{Kind: KindConfigUpdated, OrganizationID: actor.OrganizationID, PluginID: after.PluginID, PluginConfigID: id, ProjectID: projectID, Revision: rev, Config: &ma})
	return ma, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// DeleteConfig marks a config deleted (and disabled); it no longer shows.
func (s *Service) DeleteConfig(ctx context.Context, actor Actor, projectID, id uint64) error {
	_, p, err := s.configIn(ctx, actor, projectID, id)
	if err != nil {
		return err
	}
	_, after, rev, err := modify(ctx, s.st.configs, idKey(id), func(c *Config) error {
		if c.Deleted {
			return ErrNotFound
		}
		c.Deleted, c.Enabled, c.UpdatedAt = true, false, time.Now().UTC()
		return nil
	})
	if err != nil {
		return err
	}
	masked := after.Masked(s.pluginOf(ctx, after.PluginID))
	s.record(ctx, actor, ScopePluginConfig, idKey(id), projectID, "deleted", p.Name, nil)
	s.announce(ctx, actor, Event{Kind: KindConfigDeleted, OrganizationID: actor.OrganizationID, PluginID: after.PluginID, PluginConfigID: id, ProjectID: projectID, Revision: rev, Config: &masked})
	return nil
}

// ExportsUnsubscribeConfigs returns the enabled configs in the
// organization's projects whose plugins are neither transformations nor
// site apps (the exports a user may unsubscribe from), by id.
func (s *Service) ExportsUnsubscribeConfigs(ctx context.Context, actor Actor) ([]Config, error) {
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return nil, err
	}
	plugins, err := s.pluginsByID(ctx)
	if err != nil {
		return nil, err
	}
	out := []Config{}
	for _, c := range all {
		p, ok := plugins[c.PluginID]
		if ok && c.OrganizationID == actor.OrganizationID && c.Enabled && !c.Deleted && !p.IsTransformation() && !p.SiteApp {
			out = append(out, c.Masked(&p))
		}
	}
	slices.SortFunc(out, func(a, b Config) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// nothingToRun is the refusal to enable a config of a plugin whose code
// exports nothing that runs: before, such a config was enabled and never
// called, with no error anywhere.
func nothingToRun(p Plugin) error {
	return invalid("enabled", "Plugin %q exports no processEvent or processEventBatch (nor any other method or task that runs), so it cannot be enabled as a transformation. Upload code that exports one (update_source), then enable it.", p.Name)
}
