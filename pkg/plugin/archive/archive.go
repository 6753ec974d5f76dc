// Package archive extracts plugin archives (tar.gz or zip) into memory,
// refusing anything that could write outside the archive or exhaust
// memory: absolute paths, ".." elements, links, devices, oversize files,
// too many files, too many bytes in all.
package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// Limits bound an extraction.
type Limits struct {
	MaxFileBytes  int64 // one file, uncompressed
	MaxTotalBytes int64 // all files, uncompressed
	MaxFiles      int
}

// DefaultLimits: 1 MiB per file, 20 MiB in all, 2,000 files.
var DefaultLimits = Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 20 << 20, MaxFiles: 2000}

// Error is an archive that cannot be used; Detail says why, for the user.
type Error struct{ Detail string }

func (e *Error) Error() string { return "archive: " + e.Detail }

func fail(format string, args ...any) error { return &Error{Detail: fmt.Sprintf(format, args...)} }

// Files maps cleaned, slash-separated, relative paths to contents.
type Files map[string][]byte

// Extract reads a tar.gz or zip archive (told apart by its first bytes).
func Extract(data []byte, lim Limits) (Files, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return extractTarGz(data, lim)
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return extractZip(data, lim)
	}
	return nil, fail("not a tar.gz or zip archive")
}

// CleanName checks an entry name and returns its clean relative form; ok
// is false for names that must be refused. Directory names end in "/".
func CleanName(name string) (clean string, ok bool) {
	if name == "" || len(name) > 1024 || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\\") {
		return "", false
	}
	if strings.HasPrefix(name, "/") || (len(name) >= 2 && name[1] == ':') {
		return "", false
	}
	for _, el := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if el == ".." {
			return "", false
		}
	}
	clean = path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

type collector struct {
	lim   Limits
	files Files
	total int64
}

func (c *collector) add(name string, size int64, r io.Reader) error {
	clean, ok := CleanName(name)
	if !ok {
		return fail("refused entry %q: absolute or outside the archive", name)
	}
	if _, dup := c.files[clean]; dup {
		return fail("entry %q appears twice", clean)
	}
	if len(c.files) >= c.lim.MaxFiles {
		return fail("more than %d files", c.lim.MaxFiles)
	}
	if size > c.lim.MaxFileBytes {
		return fail("%s is larger than %d bytes", clean, c.lim.MaxFileBytes)
	}
	// The header's size may lie: read at most one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(r, c.lim.MaxFileBytes+1))
	if err != nil {
		return fail("reading %s: %v", clean, err)
	}
	if int64(len(data)) > c.lim.MaxFileBytes {
		return fail("%s is larger than %d bytes", clean, c.lim.MaxFileBytes)
	}
	if c.total += int64(len(data)); c.total > c.lim.MaxTotalBytes {
		return fail("the files are larger than %d bytes in all", c.lim.MaxTotalBytes)
	}
	c.files[clean] = data
	return nil
}

func extractTarGz(data []byte, lim Limits) (Files, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fail("bad gzip data: %v", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	c := &collector{lim: lim, files: Files{}}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return c.files, nil
		}
		if err != nil {
			return nil, fail("bad tar data: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			if err := c.add(h.Name, h.Size, tr); err != nil {
				return nil, err
			}
		case tar.TypeDir:
			if _, ok := CleanName(h.Name); !ok {
				return nil, fail("refused entry %q: absolute or outside the archive", h.Name)
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			// pax metadata (GitHub puts the commit id there): nothing to extract.
		case tar.TypeSymlink, tar.TypeLink:
			return nil, fail("refused entry %q: links are not allowed", h.Name)
		default:
			return nil, fail("refused entry %q: not a regular file or folder", h.Name)
		}
	}
}

func extractZip(data []byte, lim Limits) (Files, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fail("bad zip data: %v", err)
	}
	if len(zr.File) > lim.MaxFiles*2 {
		return nil, fail("more than %d files", lim.MaxFiles)
	}
	c := &collector{lim: lim, files: Files{}}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return nil, fail("refused entry %q: links are not allowed", f.Name)
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			if _, ok := CleanName(f.Name); !ok {
				return nil, fail("refused entry %q: absolute or outside the archive", f.Name)
			}
			continue
		case !mode.IsRegular():
			return nil, fail("refused entry %q: not a regular file or folder", f.Name)
		}
		if f.UncompressedSize64 > uint64(lim.MaxFileBytes) {
			return nil, fail("%s is larger than %d bytes", f.Name, lim.MaxFileBytes)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fail("reading %s: %v", f.Name, err)
		}
		err = c.add(f.Name, int64(f.UncompressedSize64), rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return c.files, nil
}

// Root finds the folder holding plugin.json: the archive's root or one
// folder down (GitHub puts everything under "<repo>-<ref>/", npm under
// "package/"). It returns the prefix ("" or "dir/") and whether one was
// found; with several candidates one level down, the first in name order
// wins.
func (f Files) Root() (string, bool) {
	if _, ok := f["plugin.json"]; ok {
		return "", true
	}
	best := ""
	for name := range f {
		dir, file, ok := strings.Cut(name, "/")
		if ok && file == "plugin.json" && (best == "" || dir+"/" < best) {
			best = dir + "/"
		}
	}
	return best, best != ""
}

// Under returns the files below prefix, with the prefix removed.
func (f Files) Under(prefix string) Files {
	out := Files{}
	for name, data := range f {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" {
			out[rest] = data
		}
	}
	return out
}
