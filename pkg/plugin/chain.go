package plugin

import (
	"cmp"
	"context"
	"slices"
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
		l := Link{ConfigID: c.ID, PluginID: p.ID, Order: c.Order, Config: c.Config}
		if l.Filename = entryFile(b); l.Filename != "" {
			l.Source = b[l.Filename].Source
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Link) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ConfigID, b.ConfigID)) })
	return out, nil
}
