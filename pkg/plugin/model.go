// Package plugin holds plugins (pipeline transformations and other
// plugin kinds), their source files and their per-project configs:
// validation, permissions, storage in JetStream KV and Object Store,
// installation from archives, change events and activity. See
// docs/plugins.md.
package plugin

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/personhub/personhub/pkg/plugin/code"
)

// Plugin types.
const (
	TypeLocal      = "local"
	TypeCustom     = "custom"
	TypeRepository = "repository"
	TypeSource     = "source"
)

// Types lists the valid plugin types.
var Types = []string{TypeLocal, TypeCustom, TypeRepository, TypeSource}

// Capabilities are what a plugin can do.
type Capabilities = code.Capabilities

// Plugin is a stored plugin.
type Plugin struct {
	ID             uint64          `json:"id"`
	OrganizationID string          `json:"organization_id"`
	Type           string          `json:"plugin_type"`
	Name           string          `json:"name"`
	Description    *string         `json:"description"`
	URL            *string         `json:"url"` // as given, private_token included; show DisplayURL
	Icon           *string         `json:"icon"`
	ConfigSchema   json.RawMessage `json:"config_schema"`
	Tag            *string         `json:"tag"`
	LatestTag      *string         `json:"latest_tag"`
	IsGlobal       bool            `json:"is_global"`
	Capabilities   Capabilities    `json:"capabilities"`
	Metrics        json.RawMessage `json:"metrics"`
	PublicJobs     json.RawMessage `json:"public_jobs"`
	// SecretKeys are the config keys config_schema has ever marked secret
	// (see setSchema); they stay masked.
	SecretKeys []string `json:"secret_keys,omitempty"`
	// Sources names the Object Store object holding the source files
	// ("" when there are none). A new set of files is a new object; the
	// record's revision is the commit point.
	Sources   string    `json:"sources,omitempty"`
	SiteApp   bool      `json:"site_app"` // has a site.ts
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// IsTransformation reports whether the plugin's methods include
// processEvent or processEventBatch (which the runtime calls an event at
// a time, as PostHog's legacy transformations do).
func (p Plugin) IsTransformation() bool {
	m := p.Capabilities.Methods
	return slices.Contains(m, "processEvent") || slices.Contains(m, "processEventBatch")
}

// runsNothing reports whether an enabled config of the plugin would do
// nothing: no transformation method, no site app, no method or task of
// another kind.
func (p Plugin) runsNothing() bool {
	c := p.Capabilities
	return !p.SiteApp && !slices.ContainsFunc(c.Methods, func(m string) bool {
		return m != "setupPlugin" && m != "teardownPlugin"
	}) && len(c.ScheduledTasks) == 0
}

// InTransformations reports whether the pipeline_transformations routes
// serve the plugin: a transformation, or a source plugin whose code has
// not decided yet (no methods, no scheduled tasks). A source plugin starts
// without code, and the plugin created through POST must be reachable
// through its {id} routes to get code at all (update_source); PostHog
// answers 404 there. Code without a transformation method still makes it
// leave.
func (p Plugin) InTransformations() bool {
	if p.IsTransformation() {
		return true
	}
	c := p.Capabilities
	return p.Type == TypeSource && len(c.Methods) == 0 && len(c.ScheduledTasks) == 0
}

// normalize fills the JSON defaults so responses never hold null lists.
func (p *Plugin) normalize() {
	if len(p.ConfigSchema) == 0 || string(p.ConfigSchema) == "null" {
		p.ConfigSchema = json.RawMessage(`{}`)
	}
	if len(p.Metrics) == 0 || string(p.Metrics) == "null" {
		p.Metrics = json.RawMessage(`{}`)
	}
	if len(p.PublicJobs) == 0 || string(p.PublicJobs) == "null" {
		p.PublicJobs = json.RawMessage(`{}`)
	}
	c := &p.Capabilities
	for _, l := range []*[]string{&c.Methods, &c.ScheduledTasks, &c.Jobs} {
		if *l == nil {
			*l = []string{}
		}
	}
}

// Config is a plugin's configuration in one project.
type Config struct {
	ID             uint64         `json:"id"`
	PluginID       uint64         `json:"plugin"`
	ProjectID      uint64         `json:"team_id"`
	OrganizationID string         `json:"organization_id"`
	Enabled        bool           `json:"enabled"`
	Order          int            `json:"order"`
	Config         map[string]any `json:"config"`
	Name           *string        `json:"name"`
	Description    *string        `json:"description"`
	// SecretKeys are the config keys that were secret when the config was
	// written (see recordSecrets); they stay masked.
	SecretKeys []string `json:"secret_keys,omitempty"`
	// Attachments are the files uploaded for the config's attachment
	// fields, by key (attachments.go); the API shows them among the
	// config's values.
	Attachments map[string]Attachment `json:"attachments,omitempty"`
	Deleted     bool                  `json:"deleted"`
	CreatedAt   time.Time             `json:"created_at"`
	UpdatedAt   time.Time             `json:"updated_at"`
}

// SecretMask replaces a secret config value wherever configs are read.
// Writing the mask back keeps the stored value.
const SecretMask = "**** secret value: write-only, hidden on read ****"

// secrets returns the config keys to mask for the plugin's configs: those
// its schema marks secret and those it ever marked secret (SecretKeys).
// all is true when the plugin is unknown (nil: it could not be read, or
// is gone) or its schema cannot be read: masking fails closed, every value
// is then masked.
func (p *Plugin) secrets() (keys map[string]bool, all bool) {
	if p == nil {
		return map[string]bool{}, true
	}
	keys, err := ParseSchema(p.ConfigSchema)
	if err != nil {
		keys, all = map[string]bool{}, true
	}
	for _, k := range p.SecretKeys {
		keys[k] = true
	}
	return keys, all
}

// setSchema replaces the config_schema and adds to SecretKeys every key
// the old or the new schema marks secret: a key once secret stays masked
// whatever a later schema says (a key holder with plugin:write could
// otherwise drop "secret": true and read the values back).
func (p *Plugin) setSchema(schema json.RawMessage) {
	p.SecretKeys = union(p.SecretKeys, secretsEver(p.ConfigSchema), secretsEver(schema))
	p.ConfigSchema = schema
}

// recordSecrets adds to c.SecretKeys the keys that are secret for plugin p
// now, so that a value stored as secret stays write-only whatever the
// schema says later. When p's schema cannot be read, every key of the
// config counts as secret.
func (c *Config) recordSecrets(p *Plugin) {
	keys, all := p.secrets()
	add := slices.Collect(maps.Keys(keys))
	if all {
		add = append(add, slices.Collect(maps.Keys(c.Config))...)
	}
	c.SecretKeys = union(c.SecretKeys, add)
}

// Masked returns a copy of c whose secret values are replaced by
// SecretMask: the keys recorded secret with the config, and those plugin p
// marks secret (see Plugin.secrets; a nil p masks every value). Empty
// values stay as they are, so a reader can tell a secret is unset.
func (c Config) Masked(p *Plugin) Config {
	keys, all := p.secrets()
	for _, k := range c.SecretKeys {
		keys[k] = true
	}
	c.Config = maps.Clone(c.Config)
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	for k, v := range c.Config {
		if (all || keys[k]) && v != nil && v != "" {
			c.Config[k] = SecretMask
		}
	}
	return c
}

// File is one source file of a plugin.
type File struct {
	Source     string `json:"source"`
	Status     string `json:"status,omitempty"` // StatusTranspiled or StatusError; "" when not transpiled
	Error      string `json:"error,omitempty"`
	Transpiled string `json:"transpiled,omitempty"`
}

// Transpile statuses.
const (
	StatusTranspiled = "TRANSPILED"
	StatusError      = "ERROR"
)

// Bundle is a plugin's source files by name.
type Bundle map[string]File

// Sources returns {filename: source}.
func (b Bundle) Sources() map[string]string {
	out := make(map[string]string, len(b))
	for name, f := range b {
		out[name] = f.Source
	}
	return out
}

// Actor is who asks: the key's organization and the key itself (named in
// activity entries).
type Actor struct {
	OrganizationID string
	KeyID          string
	KeyLabel       string
}
