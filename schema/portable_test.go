package schema_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// portability lists SQL that does not mean the same on ClickHouse 18.16
// (the tests' server) and current ClickHouse (the users'), with why. The
// tests run on 18.16 only, so a statement of this kind passes them and
// fails users.
var portability = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(?i)\bANY\s+INNER\s+JOIN\b`), "18.16 keeps every left row of ANY INNER JOIN; from 20.1 it keeps one row a key of each side " +
		"(any_join_distinct_right_table_keys = 0): join a right side of one row a key with ALL INNER JOIN"},
	{regexp.MustCompile(`\bJSONExtract`), "18.16 has no JSONExtract*: use visitParamExtract*"},
	{regexp.MustCompile(`\bDateTime64\b`), "18.16 has no DateTime64"},
	{regexp.MustCompile(`(?i)\basync_insert\b`), "18.16 has no async_insert"},
	{regexp.MustCompile(`(?i)\bDELETE\s+FROM\b`), "18.16 has no lightweight DELETE: ALTER TABLE ... DELETE"},
}

// TestSQLIsPortable: no Go or SQL file of the module holds SQL of the
// kinds above (comments included: reword them).
func TestSQLIsPortable(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	skip := map[string]bool{".git": true, "bin": true, ".data": true, "node_modules": true, "results": true, "vendor": true}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if path == self || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".sql")) {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for n, line := range strings.Split(string(body), "\n") {
			for _, p := range portability {
				if p.re.MatchString(line) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d: %s\n\t%s", rel, n+1, p.why, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files under %s: the walk missed the module", files, root)
	}
}
