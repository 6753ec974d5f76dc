package repository_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/plugin/archive"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

// within fails the test when fn takes longer than d (a FIFO opened for
// reading blocks until a writer comes: forever).
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %s", d)
	}
}

// allocated returns how many bytes fn allocated (the whole process's
// cumulative allocations, so other goroutines only make it larger).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparse makes a file of size bytes that takes no disk space.
func sparse(t *testing.T, name string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// A FIFO or a huge file in a mirror folder is refused promptly and
// without being read: FIFOs are opened without blocking and only regular
// files are read; an unpacked tag folder is packed by streaming its files
// after checking their sizes.
func TestDirSourceRefusesFIFOsAndHugeFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "github/o/a/v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "github/o/a/tags.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "github/o/a/v1/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "github/o/a/v1/plugin.json"), []byte(`{"name":"a"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse(t, filepath.Join(dir, "github/o/b/v1/big.bin"), 200<<20)
	if err := os.WriteFile(filepath.Join(dir, "github/o/b/v1/plugin.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse(t, filepath.Join(dir, "github/o/c/v1.tar.gz"), 200<<20)
	src, err := repository.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := repository.ParseURL("https://github.com/o/a")
	within(t, 5*time.Second, func() {
		if _, err := repository.Latest(ctx, src, a); !errors.Is(err, repository.ErrNotRegular) {
			t.Errorf("FIFO tags.json: %v", err)
		}
		// The FIFO inside an unpacked folder is left out of the archive.
		data, err := repository.Archive(ctx, src, a, "v1")
		if err != nil {
			t.Fatalf("packed folder: %v", err)
		}
		files, err := archive.Extract(data, archive.Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxFiles: 10})
		if _, fifo := files["fifo"]; err != nil || len(files) != 1 || fifo {
			t.Errorf("packed folder: %v %v", files, err)
		}
	})
	for _, name := range []string{"b", "c"} {
		ref, _ := repository.ParseURL("https://github.com/o/" + name)
		var err error
		n := allocated(func() { _, err = repository.Archive(ctx, src, ref, "v1") })
		var tooLarge *repository.TooLargeError
		if !errors.As(err, &tooLarge) {
			t.Fatalf("%s: 200 MiB accepted: %v", name, err)
		}
		if n > 8<<20 {
			t.Fatalf("%s: refusing a 200 MiB file allocated %d MiB", name, n>>20)
		}
	}
}
