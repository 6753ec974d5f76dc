package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// Change events: stream and subjects.
const (
	StreamEvents  = "PLUGIN_EVENTS"
	SubjectPrefix = "plugins" // subjects plugins.<organization_id>.<kind>
)

// Event kinds.
const (
	KindInstalled      = "installed"
	KindUpdated        = "updated"
	KindUninstalled    = "uninstalled"
	KindSourceChanged  = "source_changed"
	KindUpgraded       = "upgraded"
	KindLatestTag      = "latest_tag_checked"
	KindConfigCreated  = "config_created"
	KindConfigUpdated  = "config_updated"
	KindConfigDeleted  = "config_deleted"
	eventPublishTries  = 5
	eventStreamMaxAge  = 30 * 24 * time.Hour
	eventDuplicateSpan = 10 * time.Minute
)

// Event is the envelope published on every change (docs/plugins.md).
type Event struct {
	ID             string    `json:"id"` // also the Nats-Msg-Id
	Kind           string    `json:"kind"`
	OrganizationID string    `json:"organization_id"`
	PluginID       uint64    `json:"plugin_id"`
	PluginConfigID uint64    `json:"plugin_config_id,omitempty"`
	ProjectID      uint64    `json:"project_id,omitempty"`
	Revision       uint64    `json:"revision"` // KV revision written (0 for deletions)
	OccurredAt     time.Time `json:"occurred_at"`
	KeyID          string    `json:"key_id,omitempty"`
	Plugin         *Plugin   `json:"plugin,omitempty"`        // url without private_token
	Config         *Config   `json:"plugin_config,omitempty"` // secret values masked
	Files          []string  `json:"files,omitempty"`         // source files changed
	// projects whose chains to publish when not the config's project nor
	// those configuring the plugin now (an uninstall: its configs are gone).
	projects []uint64
}

// Subject is where an event of kind about an organization's plugin goes.
func Subject(orgID, kind string) string { return SubjectPrefix + "." + orgID + "." + kind }

func ensureStream(ctx context.Context, js jetstream.JetStream) error {
	cfg := jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "personhub plugin and plugin config changes",
		Subjects:    []string{SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		MaxAge:      eventStreamMaxAge,
		Duplicates:  eventDuplicateSpan,
	}
	_, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		_, err = js.Stream(ctx, StreamEvents)
	}
	if err != nil {
		return fmt.Errorf("plugin: stream %s: %w", StreamEvents, err)
	}
	return nil
}

// announce publishes an event after the store change it describes
// succeeded. Publishing is retried with the same message id, so JetStream
// stores it once; if every try fails the change stands (the KV buckets are
// the record) and the failure is logged and counted.
func (s *Service) announce(ctx context.Context, actor Actor, ev Event) {
	s.publishChains(ctx, ev)
	ev.ID = uuid.NewString()
	ev.OccurredAt = time.Now().UTC()
	ev.KeyID = actor.KeyID
	if ev.Plugin != nil {
		p := *ev.Plugin
		if p.URL != nil {
			u := repository.DisplayURL(*p.URL)
			p.URL = &u
		}
		ev.Plugin = &p
	}
	data, err := json.Marshal(ev)
	if err != nil {
		s.log.Error("encode plugin event", "err", err)
		return
	}
	msg := nats.NewMsg(Subject(ev.OrganizationID, ev.Kind))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	// The request may be cancelled once the store change is made; the
	// announcement still goes out.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		_, err = s.js.PublishMsg(pctx, msg)
		if err == nil {
			s.published.WithLabelValues(ev.Kind).Inc()
			return
		}
		if try == eventPublishTries || pctx.Err() != nil {
			break
		}
		time.Sleep(backoff)
		backoff *= 2
	}
	s.publishFailures.Inc()
	s.log.Error("plugin event not published; the change is stored", "kind", ev.Kind, "plugin_id", ev.PluginID, "event_id", ev.ID, "err", err)
}

// record writes activity entries; a failure is logged (the change stands).
func (s *Service) record(ctx context.Context, actor Actor, scope, itemID string, projectID uint64, act, name string, changes []activity.Change) {
	if s.activity == nil {
		return
	}
	if changes == nil {
		changes = []activity.Change{}
	}
	e := activity.Entry{
		ID: uuid.New(), OrganizationID: actor.OrganizationID, ProjectID: projectID, Scope: scope, ItemID: itemID,
		Activity: act, Detail: activity.Detail{Changes: changes, Name: &name}, UserKeyID: actor.KeyID,
		UserLabel: actor.KeyLabel, CreatedAt: time.Now().UTC(),
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.activity.Write(wctx, e); err != nil {
		s.log.Error("plugin activity not written; the change is stored", "activity", act, "item_id", itemID, "err", err)
	}
}

// Activity scopes.
const (
	ScopePlugin       = "Plugin"
	ScopePluginConfig = "PluginConfig"
)

func (s *Service) pluginActivity(ctx context.Context, actor Actor, p Plugin, act string, changes []activity.Change) {
	s.record(ctx, actor, ScopePlugin, idKey(p.ID), 0, act, p.Name, changes)
}

// diff lists the changed fields of a plugin as activity changes.
func diff(before, after Plugin) []activity.Change {
	var out []activity.Change
	add := func(field string, b, a any) {
		bj, _ := json.Marshal(b)
		aj, _ := json.Marshal(a)
		if string(bj) != string(aj) {
			out = append(out, activity.Change{Type: ScopePlugin, Action: "changed", Field: field, Before: b, After: a})
		}
	}
	add("name", before.Name, after.Name)
	add("description", before.Description, after.Description)
	add("icon", before.Icon, after.Icon)
	add("config_schema", before.ConfigSchema, after.ConfigSchema)
	add("tag", before.Tag, after.Tag)
	add("latest_tag", before.LatestTag, after.LatestTag)
	add("is_global", before.IsGlobal, after.IsGlobal)
	add("capabilities", before.Capabilities, after.Capabilities)
	add("metrics", before.Metrics, after.Metrics)
	add("public_jobs", before.PublicJobs, after.PublicJobs)
	return out
}
