package plugin

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Link is one plugin config of a project's transformation chain with what
// running it needs: the entry file and the config values in clear (the
// plugin needs its secrets; callers must never show or log Config).
type Link struct {
	ConfigID uint64
	PluginID uint64
	Order    int
	Filename string
	Source   string
	Config   map[string]any
	// Attachments are the config's files with their contents, by key.
	Attachments map[string]AttachmentFile
}

// ChainPublisher puts a project's chain on the event log, where the
// ingester picks it up for the events after it (transform.Publisher).
type ChainPublisher interface {
	PublishChain(ctx context.Context, projectID uint64, chain []Link) error
}

// Chain returns the project's transformation chain: its live, enabled
// configs whose plugin is a transformation, by order then id. include, when
// not zero, names a config of the project that joins the chain even when
// disabled (a dry run before enabling); it must be a live config of the
// project (else ErrNotFound).
func (s *Service) Chain(ctx context.Context, actor Actor, projectID, include uint64) ([]Link, error) {
	if include != 0 {
		if _, _, err := s.configIn(ctx, actor, projectID, include); err != nil {
			return nil, err
		}
	}
	all, plugins, err := s.projectConfigs(ctx, actor, projectID)
	if err != nil {
		return nil, err
	}
	return s.chainOf(ctx, all, plugins, include)
}

func (s *Service) chainOf(ctx context.Context, all []Config, plugins map[uint64]Plugin, include uint64) ([]Link, error) {
	out := []Link{}
	for _, c := range all {
		p := plugins[c.PluginID]
		if !(c.Enabled || c.ID == include) || !p.IsTransformation() {
			continue
		}
		b, err := s.st.getBundle(ctx, p.Sources)
		if err != nil && !IsNotFound(err) {
			return nil, err
		}
		atts, err := s.st.attachmentFiles(ctx, c.Attachments)
		if err != nil {
			return nil, err
		}
		l := Link{ConfigID: c.ID, PluginID: p.ID, Order: c.Order, Config: c.Config, Attachments: atts}
		if l.Filename = entryFile(b); l.Filename != "" {
			l.Source = b[l.Filename].Source
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Link) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ConfigID, b.ConfigID)) })
	return out, nil
}

// chainKinds are the changes that may change a chain: which configs are
// enabled, their order and values, and their plugins' code and
// capabilities.
var chainKinds = map[string]bool{KindConfigCreated: true, KindConfigUpdated: true, KindConfigDeleted: true,
	KindUpdated: true, KindSourceChanged: true, KindUpgraded: true, KindUninstalled: true}

// chainLocks serializes the read and publication of a project's chain in
// this process, so that of two concurrent changes the later read is
// published last (docs/plugins.md: several API processes do not
// coordinate).
type chainLocks struct {
	mu sync.Mutex
	m  map[uint64]*sync.Mutex
}

func (l *chainLocks) lock(project uint64) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[uint64]*sync.Mutex{}
	}
	m := l.m[project]
	if m == nil {
		m = &sync.Mutex{}
		l.m[project] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// projectsOf lists the projects with a config (live or not) of plugin id.
func (s *Service) projectsOf(ctx context.Context, id uint64) []uint64 {
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		s.log.Error("transformation chains not published: configs unreadable", "plugin_id", id, "err", err)
		return nil
	}
	var out []uint64
	for _, c := range all {
		if c.PluginID == id && !slices.Contains(out, c.ProjectID) {
			out = append(out, c.ProjectID)
		}
	}
	return out
}

// publishChains publishes the chain of every project a change may affect,
// after the change is stored: the request answers after the command is in
// the log, so events captured after the answer get the new chain. A
// failure is logged and counted (the change stands; the next change of
// the project publishes its whole chain again).
func (s *Service) publishChains(ctx context.Context, ev Event) {
	if s.chains == nil || !chainKinds[ev.Kind] {
		return
	}
	projects := ev.projects
	switch {
	case ev.ProjectID != 0:
		projects = []uint64{ev.ProjectID}
	case projects == nil:
		projects = s.projectsOf(ctx, ev.PluginID)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, project := range projects {
		if err := s.publishChain(pctx, project); err != nil {
			s.chainFailures.Inc()
			s.log.Error("transformation chain not published; the change is stored", "project_id", project, "kind", ev.Kind, "err", err)
		}
	}
}

func (s *Service) publishChain(ctx context.Context, project uint64) error {
	defer s.chainLock.lock(project)()
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return err
	}
	plugins, err := s.pluginsByID(ctx)
	if err != nil {
		return err
	}
	var live []Config
	for _, c := range all {
		if _, ok := plugins[c.PluginID]; ok && c.ProjectID == project && !c.Deleted {
			live = append(live, c)
		}
	}
	chain, err := s.chainOf(ctx, live, plugins, 0)
	if err != nil {
		return err
	}
	return s.chains.PublishChain(ctx, project, chain)
}

// PublishAllChains publishes the chain of every project with a plugin
// config, for chains that configs stored before chains went on the log (or
// a publish that failed) left unpublished. The publisher skips chains
// that did not change, so this costs nothing on the log when all is well.
func (s *Service) PublishAllChains(ctx context.Context) error {
	if s.chains == nil {
		return nil
	}
	all, err := list[Config](ctx, s.st.configs)
	if err != nil {
		return err
	}
	var projects []uint64
	for _, c := range all {
		if !slices.Contains(projects, c.ProjectID) {
			projects = append(projects, c.ProjectID)
		}
	}
	var errs []error
	for _, p := range projects {
		if err := s.publishChain(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
