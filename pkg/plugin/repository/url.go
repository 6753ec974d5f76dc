// Package repository resolves plugin URLs (GitHub, GitLab, npm) to
// archives and tag listings on a configured source (a base URL, a local
// folder, or the index shipped with the binary), and reads the repository
// index. Nothing here talks to GitHub, GitLab or npm: the source is a
// mirror laid out as described in docs/plugins.md.
package repository

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// ErrNotPluginURL means a URL is not a GitHub/GitLab repository or npm
// package URL of a form this package understands.
var ErrNotPluginURL = errors.New("repository: not a GitHub/GitLab repository or npm package URL")

// Hosts of the supported kinds, as they appear in archive paths.
const (
	GitHub = "github"
	GitLab = "gitlab"
	NPM    = "npm"
)

// Ref is a parsed plugin URL.
type Ref struct {
	Kind string   // GitHub, GitLab or NPM
	Path []string // owner/repo, group/…/project, or [@scope/]name (the scope is one element)
	Pin  string   // the ref or version the URL pins, "" when it pins none
}

// maxURLLen bounds what ParseURL looks at.
const maxURLLen = 2048

var (
	segmentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)
	pinRe     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$`)
	npmRe     = regexp.MustCompile(`^[a-z0-9_][a-z0-9_.~-]{0,213}$`)
)

// ParseURL parses a GitHub repository URL (optionally /tree/<ref>,
// /commit/<ref> or /releases/tag/<ref>), a GitLab project URL (optionally
// /-/tree/<ref>), or an npm package URL (optionally /v/<version>). The
// query string (e.g. private_token) is ignored. Every element that ends up
// in an archive path is checked to be a plain path segment.
func ParseURL(raw string) (Ref, error) {
	if len(raw) > maxURLLen {
		return Ref{}, ErrNotPluginURL
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil || u.Opaque != "" {
		return Ref{}, ErrNotPluginURL
	}
	parts := splitPath(u.Path)
	if parts == nil {
		return Ref{}, ErrNotPluginURL
	}
	var ref Ref
	switch strings.ToLower(u.Host) {
	case "github.com", "www.github.com":
		ref, err = parseGitHub(parts)
	case "gitlab.com", "www.gitlab.com":
		ref, err = parseGitLab(parts)
	case "npmjs.com", "www.npmjs.com":
		ref, err = parseNPM(parts)
	default:
		return Ref{}, ErrNotPluginURL
	}
	if err != nil {
		return Ref{}, err
	}
	if ref.Pin != "" && !ValidTag(ref.Pin) {
		return Ref{}, ErrNotPluginURL
	}
	return ref, nil
}

// splitPath splits a URL path into segments, ignoring one trailing slash;
// nil for an empty path or an empty segment in the middle.
func splitPath(p string) []string {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for _, s := range parts {
		if s == "" {
			return nil
		}
	}
	return parts
}

func plainSegments(ss ...string) bool {
	for _, s := range ss {
		if !segmentRe.MatchString(s) || strings.Contains(s, "..") {
			return false
		}
	}
	return true
}

func parseGitHub(p []string) (Ref, error) {
	if len(p) < 2 {
		return Ref{}, ErrNotPluginURL
	}
	owner, repo := p[0], strings.TrimSuffix(p[1], ".git")
	if !plainSegments(owner, repo) {
		return Ref{}, ErrNotPluginURL
	}
	ref := Ref{Kind: GitHub, Path: []string{owner, repo}}
	switch rest := p[2:]; {
	case len(rest) == 0:
	case len(rest) == 2 && (rest[0] == "tree" || rest[0] == "commit"):
		ref.Pin = rest[1]
	case len(rest) == 3 && rest[0] == "releases" && rest[1] == "tag":
		ref.Pin = rest[2]
	default:
		return Ref{}, ErrNotPluginURL
	}
	return ref, nil
}

func parseGitLab(p []string) (Ref, error) {
	project := p
	var pin string
	for i, s := range p {
		if s == "-" {
			if len(p) != i+3 || p[i+1] != "tree" {
				return Ref{}, ErrNotPluginURL
			}
			project, pin = p[:i], p[i+2]
			break
		}
	}
	if len(project) < 2 || len(project) > 8 {
		return Ref{}, ErrNotPluginURL
	}
	project = append([]string(nil), project...)
	project[len(project)-1] = strings.TrimSuffix(project[len(project)-1], ".git")
	if !plainSegments(project...) {
		return Ref{}, ErrNotPluginURL
	}
	return Ref{Kind: GitLab, Path: project, Pin: pin}, nil
}

func parseNPM(p []string) (Ref, error) {
	if len(p) < 2 || p[0] != "package" {
		return Ref{}, ErrNotPluginURL
	}
	p = p[1:]
	name := p[0]
	if strings.HasPrefix(name, "@") {
		if len(p) < 2 || !npmRe.MatchString(name[1:]) {
			return Ref{}, ErrNotPluginURL
		}
		name, p = name+"/"+p[1], p[1:]
		if !npmRe.MatchString(p[0]) {
			return Ref{}, ErrNotPluginURL
		}
	} else if !npmRe.MatchString(name) {
		return Ref{}, ErrNotPluginURL
	}
	if strings.Contains(name, "..") {
		return Ref{}, ErrNotPluginURL
	}
	ref := Ref{Kind: NPM, Path: []string{name}}
	switch rest := p[1:]; {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "v":
		ref.Pin = rest[1]
	default:
		return Ref{}, ErrNotPluginURL
	}
	return ref, nil
}

// ValidTag reports whether s can be a ref or version in an archive path.
func ValidTag(s string) bool { return pinRe.MatchString(s) && !strings.Contains(s, "..") }

// Dir is the folder of this plugin on a source: "github/<owner>/<repo>",
// "gitlab/<group>/…/<project>" or "npm/[@scope/]<name>".
func (r Ref) Dir() string { return r.Kind + "/" + strings.Join(r.Path, "/") }

// ArchiveName is the archive of tag, without extension: "<Dir>/<tag>".
func (r Ref) ArchiveName(tag string) string { return r.Dir() + "/" + tag }

// TagsName is the tag listing: "<Dir>/tags.json".
func (r Ref) TagsName() string { return r.Dir() + "/tags.json" }

// DefaultName is the plugin's name when its plugin.json has none: the
// repository or package name.
func (r Ref) DefaultName() string {
	last := r.Path[len(r.Path)-1]
	if i := strings.LastIndexByte(last, '/'); i >= 0 {
		last = last[i+1:]
	}
	return last
}

// DisplayURL is raw without any private_token query parameter (the other
// parameters are kept).
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return raw
	}
	q := u.Query()
	if !q.Has("private_token") {
		return raw
	}
	q.Del("private_token")
	u.RawQuery = q.Encode()
	return u.String()
}

// Identity is what two URLs of the same installation share: the URL
// without its query string and fragment, without a trailing slash,
// compared case-insensitively on the host.
func Identity(raw string) string {
	s := strings.TrimSpace(raw)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, "/")
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		u.Host = strings.ToLower(u.Host)
		u.Scheme = strings.ToLower(u.Scheme)
		return u.String()
	}
	return s
}
