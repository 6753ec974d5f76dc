package repository_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin/archive"
	"github.com/personhub/personhub/pkg/plugin/repository"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		url, dir, pin string
	}{
		{"https://github.com/acme/plugin", "github/acme/plugin", ""},
		{"https://github.com/acme/plugin/", "github/acme/plugin", ""},
		{"https://www.github.com/acme/plugin.git", "github/acme/plugin", ""},
		{"https://github.com/acme/plugin?private_token=x", "github/acme/plugin", ""},
		{"https://github.com/acme/plugin/tree/v1.2.0", "github/acme/plugin", "v1.2.0"},
		{"https://github.com/acme/plugin/commit/0a1b2c3d", "github/acme/plugin", "0a1b2c3d"},
		{"https://github.com/acme/plugin/releases/tag/v2", "github/acme/plugin", "v2"},
		{"https://gitlab.com/group/sub/project", "gitlab/group/sub/project", ""},
		{"https://gitlab.com/group/project/-/tree/main", "gitlab/group/project", "main"},
		{"https://www.npmjs.com/package/posthog-plugin-x", "npm/posthog-plugin-x", ""},
		{"https://www.npmjs.com/package/@acme/plugin-x/v/1.0.3", "npm/@acme/plugin-x", "1.0.3"},
	}
	for _, c := range cases {
		ref, err := repository.ParseURL(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if ref.Dir() != c.dir || ref.Pin != c.pin {
			t.Errorf("%s: dir %q pin %q, want %q %q", c.url, ref.Dir(), ref.Pin, c.dir, c.pin)
		}
	}
	for _, bad := range []string{
		"", "file:/etc", "ftp://github.com/a/b", "https://example.com/a/b", "https://github.com/a",
		"https://github.com/../b", "https://github.com/a/..", "https://github.com/a/b/blob/main/x",
		"https://github.com/a/b/tree/..", "https://github.com/a/b/tree/a..b", "https://github.com/a/b/tree/-x",
		"https://user:pw@github.com/a/b", "https://gitlab.com/a", "https://gitlab.com/a/b/-/blob/x",
		"https://www.npmjs.com/package/", "https://www.npmjs.com/package/@scope", "https://www.npmjs.com/package/A",
		"https://www.npmjs.com/package/x/v", "https://github.com/a//b", "https://github.com/a/b%2F..",
		"https://github.com/" + strings.Repeat("a", 3000) + "/b",
	} {
		if ref, err := repository.ParseURL(bad); !errors.Is(err, repository.ErrNotPluginURL) {
			t.Errorf("%q accepted: %+v", bad, ref)
		}
	}
}

func TestDisplayAndIdentity(t *testing.T) {
	if got := repository.DisplayURL("https://gitlab.com/a/b?private_token=s3cret&x=1"); got != "https://gitlab.com/a/b?x=1" {
		t.Fatalf("display %q", got)
	}
	if got := repository.DisplayURL("https://gitlab.com/a/b?private_token=s3cret"); strings.Contains(got, "s3cret") || strings.Contains(got, "?") {
		t.Fatalf("display %q", got)
	}
	a := repository.Identity("https://GitHub.com/a/b/?private_token=1")
	b := repository.Identity("https://github.com/a/b")
	if a != b {
		t.Fatalf("identity %q != %q", a, b)
	}
}

func TestBuiltin(t *testing.T) {
	ctx := context.Background()
	src := repository.Builtin()
	entries, err := repository.Index(ctx, src)
	if err != nil || len(entries) < 3 {
		t.Fatalf("index %v %v", entries, err)
	}
	for _, e := range entries {
		ref, err := repository.ParseURL(e.URL)
		if err != nil {
			t.Fatalf("%s: %v", e.URL, err)
		}
		tag, err := repository.Latest(ctx, src, ref)
		if err != nil {
			t.Fatalf("%s: %v", e.URL, err)
		}
		data, err := repository.Archive(ctx, src, ref, tag)
		if err != nil {
			t.Fatalf("%s: %v", e.URL, err)
		}
		files, err := archive.Extract(data, archive.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := files["plugin.json"]; !ok {
			t.Fatalf("%s: %v", e.URL, files)
		}
	}
}

func TestDirAndHTTPSources(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("index.json", `[{"name":"A","url":"https://github.com/o/a"},{"name":"","url":"x"}]`)
	write("github/o/a/tags.json", `["../bad","v2","v1"]`)
	write("github/o/a/v2.zip", "PK\x03\x04zip")
	write("github/o/a/v1.tar.gz", "gz")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "github/o/a/v3.tar.gz")); err != nil {
		t.Fatal(err)
	}
	ref, _ := repository.ParseURL("https://github.com/o/a")
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	dirSrc, err := repository.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	httpSrc, err := repository.NewHTTP(srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []repository.Source{dirSrc, httpSrc} {
		entries, err := repository.Index(ctx, src)
		if err != nil || len(entries) != 1 || entries[0].Name != "A" {
			t.Fatalf("%s: index %v %v", src, entries, err)
		}
		if tag, err := repository.Latest(ctx, src, ref); err != nil || tag != "v2" {
			t.Fatalf("%s: latest %q %v", src, tag, err)
		}
		if data, err := repository.Archive(ctx, src, ref, "v2"); err != nil || string(data) != "PK\x03\x04zip" {
			t.Fatalf("%s: zip fallback %q %v", src, data, err)
		}
		if data, err := repository.Archive(ctx, src, ref, "v1"); err != nil || string(data) != "gz" {
			t.Fatalf("%s: tar.gz %q %v", src, data, err)
		}
		if _, err := repository.Archive(ctx, src, ref, "v9"); !errors.Is(err, repository.ErrNotExist) {
			t.Fatalf("%s: missing: %v", src, err)
		}
		if _, err := src.Fetch(ctx, "../etc/passwd", 100); !errors.Is(err, repository.ErrNotExist) {
			t.Fatalf("%s: traversal: %v", src, err)
		}
		var tooLarge *repository.TooLargeError
		if _, err := src.Fetch(ctx, "index.json", 10); !errors.As(err, &tooLarge) {
			t.Fatalf("%s: limit: %v", src, err)
		}
	}
	// A symbolic link out of the folder is not followed.
	if _, err := dirSrc.Fetch(ctx, "github/o/a/v3.tar.gz", 1<<20); err == nil {
		t.Fatal("symlink out of the folder followed")
	}
	// Redirects may not leave the base.
	other := httptest.NewServer(http.RedirectHandler("http://127.0.0.1:1/x", http.StatusFound))
	t.Cleanup(other.Close)
	redirSrc, _ := repository.NewHTTP(other.URL, nil)
	if _, err := redirSrc.Fetch(ctx, "index.json", 100); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("redirect: %v", err)
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"https://github.com/a/b/tree/v1", "https://gitlab.com/a/b/-/tree/x", "https://www.npmjs.com/package/@a/b/v/1.0.0", "https://github.com/a/b?private_token=1", "file:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ref, err := repository.ParseURL(raw)
		if err != nil {
			return
		}
		for _, name := range []string{ref.Dir(), ref.TagsName(), ref.ArchiveName("v1")} {
			if clean, ok := archive.CleanName(name); !ok || clean != name {
				t.Fatalf("%q gives unsafe path %q", raw, name)
			}
		}
		if ref.Pin != "" && !repository.ValidTag(ref.Pin) {
			t.Fatalf("%q: pin %q", raw, ref.Pin)
		}
		if ref.DefaultName() == "" {
			t.Fatalf("%q: no default name", raw)
		}
		_ = repository.DisplayURL(raw)
		_ = repository.Identity(raw)
	})
}
