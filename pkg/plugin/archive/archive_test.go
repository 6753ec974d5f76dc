package archive_test

import (
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/plugin/archive"
	"github.com/personhub/personhub/pkg/plugin/archive/archivetest"
)

var lim = archive.Limits{MaxFileBytes: 100, MaxTotalBytes: 250, MaxFiles: 5}

type builder struct {
	name  string
	build func(...archivetest.Entry) []byte
}

var formats = []builder{{"tar.gz", archivetest.TarGz}, {"zip", archivetest.Zip}}

func TestExtract(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			data := f.build(archivetest.Entry{Name: "repo-v1/", Dir: true},
				archivetest.Entry{Name: "repo-v1/plugin.json", Body: `{"name":"x"}`},
				archivetest.Entry{Name: "repo-v1/./src/index.ts", Body: "export const a = 1"})
			files, err := archive.Extract(data, lim)
			if err != nil {
				t.Fatal(err)
			}
			if string(files["repo-v1/plugin.json"]) != `{"name":"x"}` || string(files["repo-v1/src/index.ts"]) != "export const a = 1" || len(files) != 2 {
				t.Fatalf("files: %v", files)
			}
			root, ok := files.Root()
			if !ok || root != "repo-v1/" {
				t.Fatalf("root %q %v", root, ok)
			}
			under := files.Under(root)
			if _, ok := under["plugin.json"]; !ok || len(under) != 2 {
				t.Fatalf("under: %v", under)
			}
		})
	}
}

func TestExtractRefuses(t *testing.T) {
	big := strings.Repeat("x", 101)
	cases := []struct {
		name    string
		entries []archivetest.Entry
		want    string
		tarOnly bool
	}{
		{"absolute path", archivetest.Files("/etc/passwd", "x"), "outside", false},
		{"dot dot", archivetest.Files("a/../../x", "x"), "outside", false},
		{"dot dot at start", archivetest.Files("../x", "x"), "outside", false},
		{"dot dot folder", []archivetest.Entry{{Name: "../d/", Dir: true}}, "outside", false},
		{"windows drive", archivetest.Files("C:/x", "x"), "outside", false},
		{"backslash", archivetest.Files(`a\..\..\x`, "x"), "outside", false},
		{"symlink", []archivetest.Entry{{Name: "link", Symlink: "/etc/passwd"}}, "links", false},
		{"relative symlink", []archivetest.Entry{{Name: "link", Symlink: "plugin.json"}}, "links", false},
		{"hard link", []archivetest.Entry{{Name: "link", Hardlnk: "plugin.json"}}, "links", true},
		{"oversize file", archivetest.Files("big", big), "larger than 100", false},
		{"total too large", archivetest.Files("a", big[:90], "b", big[:90], "c", big[:90]), "in all", false},
		{"too many files", archivetest.Files("a", "", "b", "", "c", "", "d", "", "e", "", "f", ""), "more than 5", false},
		{"duplicate", archivetest.Files("a", "1", "./a", "2"), "twice", false},
	}
	for _, f := range formats {
		for _, c := range cases {
			if c.tarOnly && f.name != "tar.gz" {
				continue
			}
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				_, err := archive.Extract(f.build(c.entries...), lim)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err %v, want %q", err, c.want)
				}
				if _, ok := err.(*archive.Error); !ok {
					t.Fatalf("err %T, want *archive.Error", err)
				}
			})
		}
	}
	if _, err := archive.Extract([]byte("plain text"), lim); err == nil {
		t.Fatal("plain text accepted")
	}
	if _, err := archive.Extract([]byte{0x1f, 0x8b, 0, 0}, lim); err == nil {
		t.Fatal("broken gzip accepted")
	}
}

func TestRoot(t *testing.T) {
	cases := []struct {
		files archive.Files
		root  string
		ok    bool
	}{
		{archive.Files{"plugin.json": nil, "x/plugin.json": nil}, "", true},
		{archive.Files{"package/plugin.json": nil}, "package/", true},
		{archive.Files{"b/plugin.json": nil, "a/plugin.json": nil}, "a/", true},
		{archive.Files{"a/b/plugin.json": nil}, "", false},
		{archive.Files{"index.ts": nil}, "", false},
	}
	for _, c := range cases {
		root, ok := c.files.Root()
		if root != c.root || ok != c.ok {
			t.Errorf("%v: %q %v, want %q %v", c.files, root, ok, c.root, c.ok)
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(archivetest.TarGz(archivetest.Files("p/plugin.json", "{}", "p/index.ts", "export {}")...))
	f.Add(archivetest.Zip(archivetest.Files("plugin.json", "{}")...))
	f.Add(archivetest.TarGz(archivetest.Entry{Name: "l", Symlink: "/x"}))
	f.Add([]byte("PK\x03\x04garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := archive.Extract(data, lim)
		if err != nil {
			return
		}
		var total int
		for name, body := range files {
			clean, ok := archive.CleanName(name)
			if !ok || clean != name || strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
				t.Fatalf("unsafe name %q extracted", name)
			}
			if len(body) > int(lim.MaxFileBytes) {
				t.Fatalf("%s: %d bytes", name, len(body))
			}
			total += len(body)
		}
		if total > int(lim.MaxTotalBytes) || len(files) > lim.MaxFiles {
			t.Fatalf("limits exceeded: %d bytes, %d files", total, len(files))
		}
	})
}
