// Package archivetest builds tar.gz and zip archives for tests, including
// malicious ones (links, absolute paths, "..", lying sizes).
package archivetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
)

// Entry is one archive member.
type Entry struct {
	Name    string
	Body    string
	Symlink string // link target: a symbolic link entry
	Hardlnk string // link target: a hard link entry (tar only)
	Dir     bool
}

// Files makes regular-file entries from name/body pairs.
func Files(pairs ...string) []Entry {
	out := make([]Entry, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Entry{Name: pairs[i], Body: pairs[i+1]})
	}
	return out
}

// TarGz builds a gzip-compressed tar archive.
func TarGz(entries ...Entry) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: tar.TypeReg}
		switch {
		case e.Symlink != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.Symlink, 0
		case e.Hardlnk != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.Hardlnk, 0
		case e.Dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				panic(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	if err := gz.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Zip builds a zip archive.
func Zip(entries ...Entry) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate}
		body := e.Body
		switch {
		case e.Symlink != "":
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.Symlink
		case e.Dir:
			h.SetMode(fs.ModeDir | 0o755)
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			panic(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
