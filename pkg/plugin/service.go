package plugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// Organizations is what the service needs of the control plane.
type Organizations interface {
	GetOrganization(ctx context.Context, id string) (controlplane.Organization, error)
}

// Settings are the binaries' plugin settings (cmd/ binds them to flags
// with environment defaults).
type Settings struct {
	Repository          string // PLUGIN_REPOSITORY: "" (builtin), a base URL, or a folder
	LocalDir            string // PLUGIN_LOCAL_DIR: base folder of file: plugins; "" disables them
	GlobalOrganizations string // PLUGIN_GLOBAL_ORGANIZATIONS: comma-separated organization ids
}

// Open builds the service from the settings; activity goes to the
// activity_log table on conn.
func (c Settings) Open(ctx context.Context, js jetstream.JetStream, orgs Organizations, conn driver.Conn, chains ChainPublisher, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	src, err := repository.Open(c.Repository)
	if err != nil {
		return nil, err
	}
	var global []string
	for _, id := range strings.Split(c.GlobalOrganizations, ",") {
		if id = strings.TrimSpace(id); id != "" {
			global = append(global, id)
		}
	}
	return Open(ctx, js, Options{Source: src, LocalDir: c.LocalDir, GlobalOrganizations: global, Activity: activity.New(conn), Chains: chains}, orgs, logger, reg)
}

// Options configure the service.
type Options struct {
	Source              repository.Source // nil: the builtin index
	LocalDir            string            // "" disables local (file:) plugins
	GlobalOrganizations []string          // may set is_global
	Activity            *activity.Log     // nil: no activity is recorded
	// Chains, when set, gets a project's transformation chain after every
	// change that may change it (chain.go).
	Chains ChainPublisher
}

// Service is the plugin domain over JetStream. Safe for concurrent use.
type Service struct {
	js              jetstream.JetStream
	st              *store
	src             repository.Source
	localDir        string
	global          map[string]bool
	orgs            Organizations
	activity        *activity.Log
	log             *slog.Logger
	orgNames        sync.Map // organization id -> name (names never change)
	published       *prometheus.CounterVec
	publishFailures prometheus.Counter
	chains          ChainPublisher
	chainLock       chainLocks
	chainFailures   prometheus.Counter
}

// Open creates or binds the buckets, the object store and the event
// stream, and sweeps unused source files in the background.
func Open(ctx context.Context, js jetstream.JetStream, cfg Options, orgs Organizations, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	s, err := open(ctx, js, cfg, orgs, logger, reg)
	if err != nil {
		return nil, err
	}
	go func() { // chains a stopped process (or an older version) left unpublished
		pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.PublishAllChains(pctx); err != nil {
			s.chainFailures.Inc()
			s.log.Error("transformation chains not all published at start", "err", err)
		}
	}()
	go func() { // remove source files and attachments a stopped process left behind
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if n, err := s.SweepSources(sctx, sourceGrace); err != nil || n > 0 {
			s.log.Info("swept unused plugin source files", "deleted", n, "err", err)
		}
		if n, err := s.SweepAttachments(sctx, attachmentGrace); err != nil || n > 0 {
			s.log.Info("swept unused plugin config attachments", "deleted", n, "err", err)
		}
	}()
	s.log.Info("plugins ready", "repository", s.src.String(), "local_dir", cfg.LocalDir, "global_organizations", len(s.global))
	return s, nil
}

// open builds the service with no background work (tests may still
// replace its store's buckets).
func open(ctx context.Context, js jetstream.JetStream, cfg Options, orgs Organizations, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(ctx, js)
	if err != nil {
		return nil, err
	}
	if err := ensureStream(ctx, js); err != nil {
		return nil, err
	}
	if cfg.Source == nil {
		cfg.Source = repository.Builtin()
	}
	s := &Service{js: js, st: st, src: cfg.Source, localDir: cfg.LocalDir, global: map[string]bool{},
		orgs: orgs, activity: cfg.Activity, chains: cfg.Chains, log: logger.With("component", "plugin")}
	for _, id := range cfg.GlobalOrganizations {
		s.global[id] = true
	}
	s.published = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "plugin", Name: "events_published_total", Help: "Plugin change events published, by kind."}, []string{"kind"})
	s.publishFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "plugin", Name: "event_publish_failures_total", Help: "Plugin changes stored whose event could not be published."})
	s.chainFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "plugin", Name: "chain_publish_failures_total", Help: "Plugin changes stored whose project transformation chain could not be published on the log."})
	reg.MustRegister(s.published, s.publishFailures, s.chainFailures)
	return s, nil
}

// Activity is the activity log plugin entries go to (nil when none).
func (s *Service) Activity() *activity.Log { return s.activity }

// CanManageGlobal reports whether an organization may set is_global.
func (s *Service) CanManageGlobal(orgID string) bool { return s.global[orgID] }

// OrganizationName returns an organization's name ("" if unknown).
func (s *Service) OrganizationName(ctx context.Context, id string) string {
	if v, ok := s.orgNames.Load(id); ok {
		return v.(string)
	}
	org, err := s.orgs.GetOrganization(ctx, id)
	if err != nil {
		return ""
	}
	s.orgNames.Store(id, org.Name)
	return org.Name
}

// configured returns the ids of plugins an organization has live
// configs for.
func (s *Service) configured(ctx context.Context, orgID string) (map[uint64]bool, error) {
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, c := range all {
		if c.OrganizationID == orgID && !c.Deleted {
			out[c.PluginID] = true
		}
	}
	return out, nil
}

// visible: own plugins, global plugins, plugins the organization has
// configs for. configured may be nil; it is then read when needed.
func (s *Service) visible(ctx context.Context, orgID string, p Plugin, configured map[uint64]bool) (bool, error) {
	if p.OrganizationID == orgID || p.IsGlobal {
		return true, nil
	}
	if configured == nil {
		var err error
		if configured, err = s.configured(ctx, orgID); err != nil {
			return false, err
		}
	}
	return configured[p.ID], nil
}

// access is what a route needs of a plugin.
type access int

const (
	readAny   access = iota // visible plugin of any kind (plugin configs)
	readTrans               // visible transformation
	writeOwn                // transformation owned by the actor's organization
)

// lookup reads a plugin and checks the route's rule: not visible (or not
// a transformation, where one is needed) is ErrNotFound; visible but owned
// by another organization is a 403 for writes.
func (s *Service) lookup(ctx context.Context, actor Actor, id uint64, need access) (Plugin, uint64, error) {
	p, rev, err := get[Plugin](ctx, s.st.plugins, idKey(id))
	if err != nil {
		return p, 0, err
	}
	if need != readAny && !p.InTransformations() {
		return p, 0, ErrNotFound
	}
	ok, err := s.visible(ctx, actor.OrganizationID, p, nil)
	if err != nil || !ok {
		return p, 0, cmp.Or(err, error(ErrNotFound))
	}
	if need == writeOwn && p.OrganizationID != actor.OrganizationID {
		return p, 0, errManagedElsewhere
	}
	p.normalize()
	return p, rev, nil
}

// List returns the transformations visible to the actor (with source
// plugins still without code, see InTransformations), by id.
func (s *Service) List(ctx context.Context, actor Actor) ([]Plugin, error) {
	all, err := list[Plugin](ctx, s.st.plugins)
	if err != nil {
		return nil, err
	}
	configured, err := s.configured(ctx, actor.OrganizationID)
	if err != nil {
		return nil, err
	}
	out := make([]Plugin, 0, len(all))
	for _, p := range all {
		if ok, _ := s.visible(ctx, actor.OrganizationID, p, configured); ok && p.InTransformations() {
			p.normalize()
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Plugin) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Get returns one visible transformation.
func (s *Service) Get(ctx context.Context, actor Actor, id uint64) (Plugin, error) {
	p, _, err := s.lookup(ctx, actor, id, readTrans)
	return p, err
}

// Patch applies the set fields of in to a transformation the actor's
// organization owns. Fields are applied to the latest revision, so
// concurrent PATCHes of different fields all take effect.
func (s *Service) Patch(ctx context.Context, actor Actor, id uint64, in PluginInput) (Plugin, error) {
	if _, _, err := s.lookup(ctx, actor, id, writeOwn); err != nil {
		return Plugin{}, err
	}
	if in.IsGlobal.Set && !s.CanManageGlobal(actor.OrganizationID) {
		return Plugin{}, errGlobalDenied
	}
	before, after, rev, err := modify(ctx, s.st.plugins, idKey(id), func(p *Plugin) error {
		if in.Type.Set && in.Type.Value != p.Type {
			return invalid("plugin_type", "plugin_type cannot be changed after installation.")
		}
		applyFields(p, in)
		p.UpdatedAt = time.Now().UTC()
		return checkRecord(*p)
	})
	if err != nil {
		return Plugin{}, err
	}
	after.normalize()
	if changes := diff(before, after); len(changes) > 0 {
		s.pluginActivity(ctx, actor, after, "updated", changes)
	}
	s.announce(ctx, actor, Event{Kind: KindUpdated, OrganizationID: after.OrganizationID, PluginID: id, Revision: rev, Plugin: &after})
	return after, nil
}

// applyFields copies the writable fields that are set.
func applyFields(p *Plugin, in PluginInput) {
	if in.Name.Set {
		p.Name = in.Name.Value
	}
	if in.Description.Set {
		p.Description = in.Description.Value
	}
	if in.Icon.Set {
		p.Icon = in.Icon.Value
	}
	if in.ConfigSchema.Set {
		p.setSchema(in.ConfigSchema.Value)
	}
	if in.Tag.Set {
		p.Tag = in.Tag.Value
	}
	if in.IsGlobal.Set {
		p.IsGlobal = in.IsGlobal.Value
	}
	if in.Capabilities.Set {
		p.Capabilities = in.Capabilities.Value
	}
	if in.Metrics.Set {
		p.Metrics = in.Metrics.Value
	}
	if in.PublicJobs.Set {
		p.PublicJobs = in.PublicJobs.Value
	}
}

// Delete uninstalls a transformation the actor's organization owns; its
// source files, URL claim and configs go with it. The record's deletion
// (conditional on the revision checked) is the commit point; the rest is
// cleanup that readers already ignore if it is interrupted.
func (s *Service) Delete(ctx context.Context, actor Actor, id uint64) error {
	for range maxCASRetries {
		p, rev, err := s.lookup(ctx, actor, id, writeOwn)
		if err != nil {
			return err
		}
		if p.IsGlobal {
			return errDeleteGlobal
		}
		err = s.st.plugins.Delete(ctx, idKey(id), jetstream.LastRevision(rev))
		if isConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("plugin: delete %d: %w", id, err)
		}
		// The projects to publish chains for are known only before the
		// cleanup removes the plugin's configs.
		projects := s.projectsOf(ctx, id)
		s.cleanup(ctx, p)
		s.pluginActivity(ctx, actor, p, "uninstalled", nil)
		s.announce(ctx, actor, Event{Kind: KindUninstalled, OrganizationID: p.OrganizationID, PluginID: id, Plugin: &p, projects: projects})
		return nil
	}
	return errConflict
}

func (s *Service) cleanup(ctx context.Context, p Plugin) {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if p.URL != nil {
		errs = append(errs, s.st.releaseURL(ctx, repository.Identity(*p.URL), p.ID))
	}
	s.retire(p.Sources)
	configs, err := list[Config](ctx, s.st.configs)
	errs = append(errs, err)
	for _, c := range configs {
		if c.PluginID == p.ID {
			errs = append(errs, s.st.configs.Delete(ctx, idKey(c.ID)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("plugin uninstalled; cleanup incomplete", "plugin_id", p.ID, "err", err)
	}
}

// Unused returns the ids of the organization's plugins that no enabled
// config uses, by id.
func (s *Service) Unused(ctx context.Context, actor Actor) ([]uint64, error) {
	plugins, err := list[Plugin](ctx, s.st.plugins)
	if err != nil {
		return nil, err
	}
	configs, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return nil, err
	}
	used := map[uint64]bool{}
	for _, c := range configs {
		if c.Enabled && !c.Deleted {
			used[c.PluginID] = true
		}
	}
	out := []uint64{}
	for _, p := range plugins {
		if p.OrganizationID == actor.OrganizationID && !used[p.ID] {
			out = append(out, p.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Repository returns the repository index of the configured source.
func (s *Service) Repository(ctx context.Context) ([]repository.Entry, error) {
	entries, err := repository.Index(ctx, s.src)
	if err != nil {
		return nil, unavailable("The plugin repository could not be read.", err)
	}
	return entries, nil
}
