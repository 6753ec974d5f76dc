package plugin

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/plugin/archive"
	"github.com/personhub/personhub/pkg/plugin/code"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// MaxSourceFiles bounds the number of source files of a plugin.
const MaxSourceFiles = 32

var fileNameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)

// ValidFileName reports whether name can be a source file name: a clean
// relative path of letters, digits, '.', '_', '-' and '/', at most 200
// characters.
func ValidFileName(name string) bool {
	clean, ok := archive.CleanName(name)
	return ok && clean == name && len(name) <= 200 && fileNameRe.MatchString(name)
}

// Source returns a visible transformation's source files.
func (s *Service) Source(ctx context.Context, actor Actor, id uint64) (Bundle, error) {
	for range maxCASRetries {
		p, _, err := s.lookup(ctx, actor, id, readTrans)
		if err != nil {
			return nil, err
		}
		b, err := s.st.getBundle(ctx, p.Sources)
		if IsNotFound(err) {
			continue // replaced between the two reads
		}
		return b, err
	}
	return nil, errConflict
}

// entryFile is the file whose exports give the capabilities: plugin.json's
// main, else index.ts, else index.js ("" when none is there).
func entryFile(b Bundle) string {
	if f, ok := b[fileManifest]; ok {
		if m, err := ParseManifest([]byte(f.Source)); err == nil && m.Main != "" {
			return m.Main
		}
	}
	for _, name := range []string{"index.ts", "index.js"} {
		if _, ok := b[name]; ok {
			return name
		}
	}
	return ""
}

// UpdateSource applies {filename: source or nil} to a transformation's
// files and returns the resulting set. plugin.json sets the name and
// config_schema; frontend.tsx and site.ts are transpiled (status
// TRANSPILED or ERROR); a changed entry file sets capabilities.methods and
// scheduled_tasks from its exports (if it does not parse it is marked
// ERROR and the capabilities stay). The new set is a new object and the
// record's conditional update is the commit point, so concurrent updates
// of different files both survive.
func (s *Service) UpdateSource(ctx context.Context, actor Actor, id uint64, changes map[string]*string) (Bundle, error) {
	prepared := make(map[string]*File, len(changes))
	var manifest *Manifest
	for name, src := range changes {
		if !ValidFileName(name) {
			return nil, invalid(name, "A file name is a relative path of letters, digits, '.', '_', '-' and '/' (at most 200 characters).")
		}
		if src == nil {
			prepared[name] = nil
			continue
		}
		if len(*src) > MaxSourceFileBytes {
			return nil, invalid(name, "A source file is at most %d KiB.", MaxSourceFileBytes>>10)
		}
		f := File{Source: *src}
		switch name {
		case fileFrontend, fileSite:
			f = transpiled(name, *src)
		case fileManifest:
			m, err := ParseManifest([]byte(*src))
			if err != nil {
				return nil, invalidManifest(err.(*ManifestError), fileManifest)
			}
			manifest = &m
		}
		prepared[name] = &f
	}
	if _, _, err := s.lookup(ctx, actor, id, writeOwn); err != nil {
		return nil, err
	}
	for range maxCASRetries {
		p, rev, err := get[Plugin](ctx, s.st.plugins, idKey(id))
		if err != nil {
			return nil, err
		}
		cur, err := s.st.getBundle(ctx, p.Sources)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		next := maps.Clone(cur)
		for name, f := range prepared {
			if f == nil {
				delete(next, name)
			} else {
				next[name] = *f
			}
		}
		if len(next) > MaxSourceFiles {
			return nil, invalid("", "A plugin has at most %d source files.", MaxSourceFiles)
		}
		before := p
		if manifest != nil {
			if manifest.Name != "" {
				p.Name = manifest.Name
			}
			if manifest.Config != nil {
				p.setSchema(manifest.Config)
			}
		}
		entry := entryFile(next)
		_, entryChanged := changes[entry]
		_, oldEntryGone := changes[entryFile(cur)]
		switch f, ok := next[entry]; {
		case entry == "" || !ok:
			if oldEntryGone {
				p.Capabilities = code.Capabilities{Methods: []string{}, ScheduledTasks: []string{}, Jobs: p.Capabilities.Jobs}
			}
		case entryChanged || manifest != nil:
			exports, err := code.Exports(entry, f.Source)
			if err != nil {
				f.Status, f.Error = StatusError, err.Error()
			} else {
				if err := checkImports(entry, entry, f.Source); err != nil {
					return nil, err
				}
				caps := code.CapabilitiesOf(exports)
				caps.Jobs = p.Capabilities.Jobs
				p.Capabilities = caps
				f.Status, f.Error = "", ""
			}
			next[entry] = f
		}
		_, p.SiteApp = next[fileSite]
		p.UpdatedAt = time.Now().UTC()
		if err := checkRecord(p); err != nil {
			return nil, err
		}
		obj, err := s.st.putBundle(ctx, id, next)
		if err != nil {
			return nil, err
		}
		p.Sources = obj
		newRev, err := put(ctx, s.st.plugins, idKey(id), p, rev)
		if isConflict(err) {
			_ = s.st.deleteBundle(ctx, obj)
			continue
		}
		if err != nil {
			_ = s.st.deleteBundle(ctx, obj)
			return nil, err
		}
		s.retire(before.Sources)
		p.normalize()
		names := slices.Sorted(maps.Keys(changes))
		chg := diff(before, p)
		for _, n := range names {
			chg = append(chg, activity.Change{Type: ScopePlugin, Action: "changed", Field: "source:" + n})
		}
		s.pluginActivity(ctx, actor, p, "source_changed", chg)
		s.announce(ctx, actor, Event{Kind: KindSourceChanged, OrganizationID: p.OrganizationID, PluginID: id, Revision: newRev, Plugin: &p, Files: names})
		return next, nil
	}
	return nil, errConflict
}

// hasURL reports whether a plugin is installed from a URL the source can
// serve (custom or repository).
func hasURL(p Plugin) bool {
	return (p.Type == TypeCustom || p.Type == TypeRepository) && p.URL != nil && *p.URL != ""
}

// CheckForUpdates resolves the newest tag of a transformation's URL and
// stores it as latest_tag.
func (s *Service) CheckForUpdates(ctx context.Context, actor Actor, id uint64) (Plugin, error) {
	p, _, err := s.lookup(ctx, actor, id, writeOwn)
	if err != nil {
		return Plugin{}, err
	}
	if !hasURL(p) {
		return Plugin{}, invalid("plugin_type", "Only plugins installed from a URL (custom or repository) can be checked for updates.")
	}
	ref, err := repository.ParseURL(*p.URL)
	if err != nil {
		return Plugin{}, errNotPluginURL
	}
	tag, err := s.latest(ctx, ref, *p.URL)
	if err != nil {
		return Plugin{}, err
	}
	before, after, rev, err := modify(ctx, s.st.plugins, idKey(id), func(p *Plugin) error {
		p.LatestTag = &tag
		return nil
	})
	if err != nil {
		return Plugin{}, err
	}
	after.normalize()
	if diff(before, after) != nil {
		s.announce(ctx, actor, Event{Kind: KindLatestTag, OrganizationID: after.OrganizationID, PluginID: id, Revision: rev, Plugin: &after})
	}
	return after, nil
}

// Upgrade re-installs a transformation from its URL at the newest tag:
// tag, latest_tag, name, description, icon, config_schema, public_jobs,
// capabilities and the source files change in one conditional write.
// Source and local plugins are returned unchanged.
func (s *Service) Upgrade(ctx context.Context, actor Actor, id uint64) (Plugin, error) {
	p, _, err := s.lookup(ctx, actor, id, writeOwn)
	if err != nil || !hasURL(p) {
		return p, err
	}
	ref, err := repository.ParseURL(*p.URL)
	if err != nil {
		return Plugin{}, errNotPluginURL
	}
	tag, err := s.latest(ctx, ref, *p.URL)
	if err != nil {
		return Plugin{}, err
	}
	ins, tag, err := s.fromRemote(ctx, TypeCustom, *p.URL, tag)
	if err != nil {
		return Plugin{}, err
	}
	obj, err := s.st.putBundle(ctx, id, ins.bundle)
	if err != nil {
		return Plugin{}, err
	}
	before, after, rev, err := modify(ctx, s.st.plugins, idKey(id), func(p *Plugin) error {
		jobs := p.Capabilities.Jobs
		ins.apply(p, PluginInput{Name: Field[string]{Set: true}})
		p.Capabilities.Jobs = jobs
		p.Tag, p.LatestTag = &tag, &tag
		p.Sources = obj
		p.UpdatedAt = time.Now().UTC()
		return checkRecord(*p)
	})
	if err != nil {
		_ = s.st.deleteBundle(context.WithoutCancel(ctx), obj)
		return Plugin{}, err
	}
	s.retire(before.Sources)
	after.normalize()
	s.pluginActivity(ctx, actor, after, "upgraded", diff(before, after))
	s.announce(ctx, actor, Event{Kind: KindUpgraded, OrganizationID: after.OrganizationID, PluginID: id, Revision: rev, Plugin: &after})
	return after, nil
}

// checkImports refuses, as invalid attr, an entry file that imports a
// module the transformation runtime does not provide: the error names it
// when the plugin is installed, not at its first event. Code that does
// not parse is left to the exports' check.
func checkImports(attr, filename, src string) error {
	imports, err := code.Imports(filename, src)
	if err != nil {
		return nil
	}
	if missing := code.Unprovided(imports); len(missing) > 0 {
		return invalid(attr, "%s imports %s, which a transformation cannot load: the runtime provides %s; bundle any other dependency into the file (esbuild --bundle).",
			filename, strings.Join(quoted(missing), ", "), strings.Join(quoted(code.RuntimeModules), ", "))
	}
	return nil
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}
