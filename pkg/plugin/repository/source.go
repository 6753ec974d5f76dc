package repository

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ErrNotExist means the source holds nothing under a name.
var ErrNotExist = errors.New("repository: not on the source")

// TooLargeError means a file on the source is larger than the caller's
// limit.
type TooLargeError struct {
	Name  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("repository: %s is larger than %d bytes", e.Name, e.Limit)
}

// Source is where the index, tag listings and archives come from. Names
// are slash-separated paths relative to the source's root.
type Source interface {
	// Fetch returns the content of name, at most limit bytes (a
	// *TooLargeError beyond), or ErrNotExist.
	Fetch(ctx context.Context, name string, limit int64) ([]byte, error)
	// String describes the source for logs.
	String() string
}

//go:embed builtin
var builtinFS embed.FS

// Open returns the source a setting names: "" or "builtin" for the index
// and archives shipped in the binary, an http(s) URL for a mirror served
// over HTTP, anything else for a local folder.
func Open(spec string) (Source, error) {
	switch {
	case spec == "" || spec == "builtin":
		return Builtin(), nil
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		return NewHTTP(spec, nil)
	default:
		return NewDir(spec)
	}
}

// Builtin is the source shipped in the binary (pkg/plugin/repository/builtin).
func Builtin() Source {
	sub, _ := fs.Sub(builtinFS, "builtin")
	return &fsSource{fsys: sub, desc: "builtin"}
}

// NewDir is a source on a local folder. The folder is opened as an
// os.Root, so no name (and no symbolic link inside it) reaches outside.
func NewDir(dir string) (Source, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("repository: open folder %s: %w", dir, err)
	}
	return &fsSource{fsys: DirFS(root), desc: "folder " + dir}, nil
}

// NewFS is a source on any file system (tests, embedding).
func NewFS(fsys fs.FS, desc string) Source { return &fsSource{fsys: fsys, desc: desc} }

// fsSource serves files from a file system. An archive "<x>.tar.gz" that
// is absent but whose folder "<x>" exists is packed from that folder, so a
// mirror can keep plugins unpacked.
type fsSource struct {
	fsys fs.FS
	desc string
}

func (s *fsSource) String() string { return s.desc }

func (s *fsSource) Fetch(ctx context.Context, name string, limit int64) ([]byte, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, ErrNotExist
	}
	data, err := ReadFile(s.fsys, name, limit)
	if errors.Is(err, ErrNotExist) {
		if dir, ok := strings.CutSuffix(name, ".tar.gz"); ok {
			if st, serr := fs.Stat(s.fsys, dir); serr == nil && st.IsDir() {
				return packDir(s.fsys, dir, name, limit)
			}
		}
	}
	return data, err
}

// packDir packs the regular files under dir into a tar.gz whose entries
// are relative to dir. Files are streamed into the archive and their sizes
// counted before they are read, so a huge file in the folder is refused
// (a *TooLargeError: more than limit bytes in all) without being read;
// symbolic links, FIFOs and devices are left out.
func packDir(fsys fs.FS, dir, name string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	var total int64
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, st, err := openRegular(fsys, p)
		if errors.Is(err, ErrNotExist) || errors.Is(err, ErrNotRegular) {
			return nil // replaced since it was listed
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if total += st.Size(); total > limit {
			return &TooLargeError{Name: name, Limit: limit}
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		// A file that grew since its Stat is cut at its size; one that
		// shrank makes the tar writer fail.
		_, err = io.Copy(tw, io.LimitReader(f, st.Size()))
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// httpSource fetches from a base URL. Redirects are followed only below
// the same base, so a mirror cannot send the server elsewhere.
type httpSource struct {
	base   *url.URL
	client *http.Client
}

// NewHTTP is a source on a base URL. A nil client gets a 30 s timeout.
func NewHTTP(base string, client *http.Client) (Source, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("repository: base URL %q must be http(s)://host[/path]", base)
	}
	s := &httpSource{base: u}
	c := http.Client{Timeout: 30 * time.Second}
	if client != nil {
		c = *client
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || !s.below(req.URL) {
			return fmt.Errorf("repository: redirect to %s is outside %s", req.URL.Redacted(), s.base.Redacted())
		}
		return nil
	}
	s.client = &c
	return s, nil
}

func (s *httpSource) below(u *url.URL) bool {
	return u.Scheme == s.base.Scheme && u.Host == s.base.Host && strings.HasPrefix(u.Path, s.base.Path+"/")
}

func (s *httpSource) String() string { return s.base.Redacted() }

func (s *httpSource) Fetch(ctx context.Context, name string, limit int64) ([]byte, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, ErrNotExist
	}
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base.String()+"/"+strings.Join(segs, "/"), nil)
	if err != nil {
		return nil, err
	}
	res, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("repository: fetch %s: %w", name, err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		return nil, ErrNotExist
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("repository: fetch %s: status %d", name, res.StatusCode)
	case res.ContentLength > limit:
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return readLimited(res.Body, name, limit)
}
