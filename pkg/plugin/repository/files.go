package repository

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Reading files an operator or a user put in a folder (a mirror, the
// local plugins folder) must neither hang nor take unbounded memory: a
// FIFO opened for reading blocks until a writer comes, and a device or a
// huge file can be read forever. So opens never block (O_NONBLOCK, see
// DirFS), only regular files are read, the size is checked before reading
// and the read stops at limit+1 bytes whatever the file claims.

// ErrNotRegular means a name is a FIFO, device, socket or other
// non-regular file.
var ErrNotRegular = errors.New("repository: not a regular file")

// DirFS is the file system of root whose opens never block: a FIFO or
// device is opened with O_NONBLOCK (and then refused by ReadFile as not
// regular) instead of waiting for a writer. As an os.Root, no name and no
// symbolic link inside it reaches outside.
func DirFS(root *os.Root) fs.FS { return rootFS{root} }

type rootFS struct{ root *os.Root }

func (r rootFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := r.root.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file name of fsys, at most limit bytes:
// ErrNotExist when there is none (or it is a folder), ErrNotRegular for
// anything else that is not a regular file, a *TooLargeError beyond limit
// (known from its size before reading, or found while reading: never more
// than limit+1 bytes are read).
func ReadFile(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, st, err := openRegular(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return readLimited(f, name, limit)
}

// openRegular opens a regular file; the caller closes it.
func openRegular(fsys fs.FS, name string) (fs.File, fs.FileInfo, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNotExist
	}
	if err != nil {
		return nil, nil, fmt.Errorf("repository: %s: %w", name, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("repository: %s: %w", name, err)
	case st.IsDir():
		err = ErrNotExist
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%w: %s", ErrNotRegular, name)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

func readLimited(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("repository: read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return data, nil
}
