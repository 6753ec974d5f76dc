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
	// Sources names the Object Store object holding the source files
	// ("" when there are none). A new set of files is a new object; the
	// record's revision is the commit point.
	Sources   string    `json:"sources,omitempty"`
	SiteApp   bool      `json:"site_app"` // has a site.ts
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// IsTransformation reports whether the plugin's methods include
// processEvent.
func (p Plugin) IsTransformation() bool {
	return slices.Contains(p.Capabilities.Methods, "processEvent")
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
	Deleted        bool           `json:"deleted"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
}

// SecretMask replaces a secret config value wherever configs are read.
// Writing the mask back keeps the stored value.
const SecretMask = "**** secret value: write-only, hidden on read ****"

// SecretKeys returns the config keys the schema marks secret: elements of
// the list form with "secret": true, or entries of the legacy dict form
// ({"key": {"secret": true, ...}}).
func SecretKeys(schema json.RawMessage) map[string]bool {
	out := map[string]bool{}
	var list []struct {
		Key    string `json:"key"`
		Secret bool   `json:"secret"`
	}
	if json.Unmarshal(schema, &list) == nil {
		for _, f := range list {
			if f.Secret && f.Key != "" {
				out[f.Key] = true
			}
		}
		return out
	}
	var dict map[string]struct {
		Secret bool `json:"secret"`
	}
	if json.Unmarshal(schema, &dict) == nil {
		for k, f := range dict {
			if f.Secret {
				out[k] = true
			}
		}
	}
	return out
}

// Masked returns a copy of c whose secret values (per the plugin's
// schema) are replaced by SecretMask. Empty values stay as they are, so a
// reader can tell a secret is unset.
func (c Config) Masked(schema json.RawMessage) Config {
	secret := SecretKeys(schema)
	c.Config = maps.Clone(c.Config)
	if c.Config == nil {
		c.Config = map[string]any{}
	}
	for k, v := range c.Config {
		if secret[k] && v != nil && v != "" {
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
