package plugin

import (
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/plugin/archive"
	"github.com/personhub/personhub/pkg/plugin/code"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// MaxSourceFileBytes bounds one source file (update_source, archives,
// local folders).
const MaxSourceFileBytes = 1 << 20

// ArchiveLimits bound the extraction of a plugin archive (itself at most
// repository.MaxArchiveBytes): a file in it may be larger than a source
// file (a bundled asset), but the files the plugin keeps may not.
var ArchiveLimits = archive.Limits{MaxFileBytes: 5 << 20, MaxTotalBytes: 50 << 20, MaxFiles: 2000}

// Files kept from an archive or a local folder besides the entry file.
const (
	fileManifest = "plugin.json"
	fileFrontend = "frontend.tsx"
	fileSite     = "site.ts"
	fileLogo     = "logo.png"
	maxLogoBytes = 64 << 10
)

// installed is what a plugin's files say about it.
type installed struct {
	manifest    Manifest
	defaultName string
	bundle      Bundle
	caps        Capabilities
	icon        *string
}

// fromFiles reads plugin.json, the entry file's exports and the
// transpiled files out of a plugin's files (paths relative to the folder
// holding plugin.json).
func fromFiles(files archive.Files, defaultName string) (installed, error) {
	ins := installed{defaultName: defaultName, bundle: Bundle{}}
	for name, data := range files {
		if len(data) > MaxSourceFileBytes && name != fileLogo && keptFile(name) {
			return ins, invalid("url", "%s is larger than %d KiB.", name, MaxSourceFileBytes>>10)
		}
	}
	raw, ok := files[fileManifest]
	if !ok {
		return ins, errNoManifest
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return ins, invalidManifest(err.(*ManifestError), "url")
	}
	ins.manifest = m
	ins.bundle[fileManifest] = File{Source: string(raw)}
	main := m.Main
	if main == "" {
		for _, name := range []string{"index.ts", "index.js"} {
			if _, ok := files[name]; ok {
				main = name
				break
			}
		}
	}
	ins.caps = code.CapabilitiesOf(nil)
	if main != "" {
		src, ok := files[main]
		if !ok {
			return ins, invalid("url", "The plugin's entry file %s is missing.", main)
		}
		if len(src) > MaxSourceFileBytes {
			return ins, invalid("url", "%s is larger than %d KiB.", main, MaxSourceFileBytes>>10)
		}
		exports, err := code.Exports(main, string(src))
		if err != nil {
			return ins, invalid("url", "Could not read the exports of %s: %v", main, err)
		}
		if err := checkImports("url", main, string(src)); err != nil {
			return ins, err
		}
		ins.caps = code.CapabilitiesOf(exports)
		ins.bundle[main] = File{Source: string(src)}
	}
	for _, name := range []string{fileFrontend, fileSite} {
		if src, ok := files[name]; ok {
			ins.bundle[name] = transpiled(name, string(src))
		}
	}
	if logo, ok := files[fileLogo]; ok && len(logo) <= maxLogoBytes {
		icon := "data:image/png;base64," + base64.StdEncoding.EncodeToString(logo)
		ins.icon = &icon
	}
	return ins, nil
}

// keptFile reports whether a plugin keeps a file of its archive: only
// plugin.json, the entry file (index.ts, index.js or plugin.json's main)
// and the transpiled files are kept; this is the cheap pre-check for the
// usual names.
func keptFile(name string) bool {
	switch name {
	case fileManifest, "index.ts", "index.js", fileFrontend, fileSite:
		return true
	}
	return false
}

// transpiled is a frontend.tsx or site.ts file with its status.
func transpiled(name, src string) File {
	out, err := code.Transpile(name, src)
	if err != nil {
		return File{Source: src, Status: StatusError, Error: err.Error()}
	}
	return File{Source: src, Status: StatusTranspiled, Transpiled: out}
}

// sourceErr maps a repository failure to what the user sees.
func sourceErr(err error, missing string) error {
	var tooLarge *repository.TooLargeError
	switch {
	case errors.Is(err, repository.ErrNotExist):
		return invalid("url", "%s", missing)
	case errors.As(err, &tooLarge):
		return invalid("url", "The plugin archive is larger than %d MiB.", repository.MaxArchiveBytes>>20)
	case errors.Is(err, repository.ErrNotRegular):
		return invalid("url", "%s (not a regular file on the plugin repository source)", missing)
	}
	return unavailable("The plugin repository source could not be read.", err)
}

// latest resolves the newest tag of a plugin URL on the source.
func (s *Service) latest(ctx context.Context, ref repository.Ref, url string) (string, error) {
	tag, err := repository.Latest(ctx, s.src, ref)
	if err != nil {
		return "", sourceErr(err, "Could not find the versions of "+repository.DisplayURL(url)+" on the plugin repository source.")
	}
	return tag, nil
}

// fromRemote fetches and reads the archive of a custom or repository
// plugin at tag (the URL's pin, else the newest tag when tag is "").
func (s *Service) fromRemote(ctx context.Context, typ, url, tag string) (installed, string, error) {
	ref, err := repository.ParseURL(url)
	if err != nil {
		return installed{}, "", errNotPluginURL
	}
	if typ == TypeRepository {
		entries, err := s.Repository(ctx)
		if err != nil {
			return installed{}, "", err
		}
		found := false
		for _, e := range entries {
			found = found || repository.Identity(e.URL) == repository.Identity(url)
		}
		if !found {
			return installed{}, "", invalid("url", "This plugin is not in the plugin repository index.")
		}
	}
	if tag == "" {
		tag = ref.Pin
	}
	if tag == "" {
		if tag, err = s.latest(ctx, ref, url); err != nil {
			return installed{}, "", err
		}
	}
	data, err := repository.Archive(ctx, s.src, ref, tag)
	if err != nil {
		return installed{}, "", sourceErr(err, "Could not find the archive of "+repository.DisplayURL(url)+" at "+tag+" on the plugin repository source.")
	}
	files, err := archive.Extract(data, ArchiveLimits)
	if err != nil {
		var ae *archive.Error
		if errors.As(err, &ae) {
			return installed{}, "", invalid("url", "Invalid plugin archive: %s", ae.Detail)
		}
		return installed{}, "", err
	}
	root, ok := files.Root()
	if !ok {
		return installed{}, "", errNoManifest
	}
	ins, err := fromFiles(files.Under(root), ref.DefaultName())
	return ins, tag, err
}

// fromLocal reads a file: plugin from below the local plugins folder.
// The folder is opened as an os.Root, so neither "..", nor an absolute
// path elsewhere, nor a symbolic link can reach outside it.
func (s *Service) fromLocal(url string) (installed, error) {
	if s.localDir == "" {
		return installed{}, invalid("url", "Local plugins are disabled on this server (set PLUGIN_LOCAL_DIR).")
	}
	p, ok := strings.CutPrefix(url, "file:")
	if !ok || p == "" {
		return installed{}, invalid("url", "A local plugin's url must be file:<path>.")
	}
	base, err := filepath.Abs(s.localDir)
	if err != nil {
		return installed{}, err
	}
	rel := filepath.Clean(p)
	if filepath.IsAbs(rel) {
		if rel, err = filepath.Rel(base, rel); err != nil {
			rel = ".."
		}
	}
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return installed{}, invalid("url", "Local plugins must be inside the local plugins folder of this server.")
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return installed{}, unavailable("The local plugins folder cannot be opened.", err)
	}
	defer root.Close()
	fsys, dir := repository.DirFS(root), filepath.ToSlash(rel)
	manifest, err := readLocal(fsys, dir, fileManifest)
	var refused *Error
	if err != nil && !errors.As(err, &refused) {
		return installed{}, &Error{Kind: KindInvalid, Attr: "url", Err: err,
			Detail: "Could not load plugin.json from: " + path.Join(filepath.ToSlash(p), fileManifest)}
	}
	if err != nil {
		return installed{}, err
	}
	files := archive.Files{fileManifest: manifest}
	names := []string{"index.ts", "index.js", fileFrontend, fileSite, fileLogo}
	if m, err := ParseManifest(manifest); err == nil && m.Main != "" {
		names = append(names, m.Main)
	}
	for _, name := range names {
		data, err := readLocal(fsys, dir, name)
		switch {
		case errors.Is(err, repository.ErrNotExist):
			continue
		case err != nil && !errors.As(err, &refused):
			return installed{}, &Error{Kind: KindInvalid, Attr: "url", Detail: "Could not read " + name + " of the plugin.", Err: err}
		case err != nil:
			return installed{}, err
		}
		files[name] = data
	}
	return fromFiles(files, filepath.Base(filepath.Join(base, rel)))
}

// readLocal reads a file of a local plugin (dir/name of fsys, at most
// MaxSourceFileBytes, logo.png at most maxLogoBytes): a 400 naming the
// file when it is no regular file (a FIFO would block the request) or too
// large; else the error of the file system (repository.ErrNotExist when
// absent; a symbolic link leading out of the folder cannot be followed).
func readLocal(fsys fs.FS, dir, name string) ([]byte, error) {
	limit := int64(MaxSourceFileBytes)
	if name == fileLogo {
		limit = maxLogoBytes
	}
	data, err := repository.ReadFile(fsys, path.Join(dir, name), limit)
	var tooLarge *repository.TooLargeError
	switch {
	case errors.Is(err, repository.ErrNotRegular):
		return nil, invalid("url", "%s of the plugin is not a regular file.", name)
	case errors.As(err, &tooLarge) && name == fileLogo:
		return nil, repository.ErrNotExist // too large for an icon: ignored, as in archives
	case errors.As(err, &tooLarge):
		return nil, invalid("url", "%s is larger than %d KiB.", name, limit>>10)
	}
	return data, err
}

// Create installs a plugin: source (files come by update_source), local
// (file: URL), custom or repository (an archive from the source).
func (s *Service) Create(ctx context.Context, actor Actor, in PluginInput) (Plugin, error) {
	if in.IsGlobal.Set && !s.CanManageGlobal(actor.OrganizationID) {
		return Plugin{}, errGlobalDenied
	}
	typ := in.Type.Value
	if !in.Type.Set {
		if !in.URL.Set {
			return Plugin{}, invalid("plugin_type", "This field is required.")
		}
		typ = TypeCustom
	}
	now := time.Now().UTC()
	p := Plugin{OrganizationID: actor.OrganizationID, Type: typ, CreatedAt: now, UpdatedAt: now}
	applyFields(&p, in)
	var ins installed
	var err error
	switch typ {
	case TypeSource:
		if !in.Name.Set {
			return Plugin{}, invalid("name", "This field is required.")
		}
	case TypeLocal:
		if !in.URL.Set {
			return Plugin{}, invalid("url", "This field is required.")
		}
		ins, err = s.fromLocal(in.URL.Value)
	default:
		if !in.URL.Set {
			return Plugin{}, invalid("url", "This field is required.")
		}
		var tag string
		ins, tag, err = s.fromRemote(ctx, typ, in.URL.Value, "")
		p.Tag, p.LatestTag = &tag, &tag
	}
	if err != nil {
		return Plugin{}, err
	}
	if typ != TypeSource {
		url := in.URL.Value
		p.URL = &url
		ins.apply(&p, in)
	}
	return s.insert(ctx, actor, p, ins.bundle)
}

// apply sets the fields plugin.json and the code decide: plugin.json wins
// for name, description, config_schema and public_jobs; capabilities and
// icon come from the files unless the body gave them.
func (ins installed) apply(p *Plugin, in PluginInput) {
	m := ins.manifest
	switch {
	case m.Name != "":
		p.Name = m.Name
	case !in.Name.Set:
		p.Name = ins.defaultName
	}
	if m.Description != nil {
		p.Description = m.Description
	}
	if m.Config != nil {
		p.setSchema(m.Config)
	}
	if m.PublicJobs != nil {
		p.PublicJobs = m.PublicJobs
	}
	if !in.Capabilities.Set {
		p.Capabilities = ins.caps
	}
	if !in.Icon.Set && ins.icon != nil {
		p.Icon = ins.icon
	}
	_, p.SiteApp = ins.bundle[fileSite]
}

// insert stores a new plugin: id, URL claim (for plugins with a URL),
// source files, record; then activity and event. Everything that can
// refuse the plugin is checked before the first write; a write failing
// after that undoes the earlier ones, so a refused create leaves nothing.
func (s *Service) insert(ctx context.Context, actor Actor, p Plugin, bundle Bundle) (Plugin, error) {
	p.normalize()
	if err := checkRecord(p); err != nil {
		return Plugin{}, err
	}
	id, err := s.st.nextID(ctx, BucketPlugins)
	if err != nil {
		return Plugin{}, err
	}
	p.ID = id
	// Nothing slow happens from here to the record's creation, so a claim
	// without a record is an install in progress only briefly.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimGrace/2)
	defer cancel()
	if p.URL != nil {
		ok, err := s.st.claimURL(wctx, repository.Identity(*p.URL), id)
		if err != nil {
			return Plugin{}, err
		}
		if !ok {
			return Plugin{}, invalid("url", "Plugin from URL \"%s\" already installed!", repository.DisplayURL(*p.URL))
		}
	}
	undo := func() {
		if p.URL != nil {
			_ = s.st.releaseURL(wctx, repository.Identity(*p.URL), id)
		}
	}
	if p.Sources, err = s.st.putBundle(wctx, id, bundle); err != nil {
		undo()
		return Plugin{}, err
	}
	rev, err := put(wctx, s.st.plugins, idKey(id), p, 0)
	if err != nil {
		_ = s.st.deleteBundle(wctx, p.Sources)
		undo()
		return Plugin{}, err
	}
	s.pluginActivity(ctx, actor, p, "installed", nil)
	s.announce(ctx, actor, Event{Kind: KindInstalled, OrganizationID: p.OrganizationID, PluginID: id, Revision: rev, Plugin: &p})
	return p, nil
}
