package schema_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// portability lists SQL that does not mean the same on ClickHouse 18.16
// (the tests' server) and current ClickHouse (the users'), with why. The
// tests run on 18.16 only, so a statement of this kind passes them and
// fails users.
//
// except names the files that may name the construct, with why.
var portability = []struct {
	re     *regexp.Regexp
	why    string
	except map[string]string
}{
	{regexp.MustCompile(`(?i)\bANY\s+INNER\s+JOIN\b`), "18.16 keeps every left row of ANY INNER JOIN; from 20.1 it keeps one row a key of each side " +
		"(any_join_distinct_right_table_keys = 0): join a right side of one row a key with ALL INNER JOIN", nil},
	{regexp.MustCompile(`\bJSONExtract`), "18.16 has no JSONExtract*: use visitParamExtract*", nil},
	{regexp.MustCompile(`\bDateTime64\b`), "18.16 has no DateTime64", nil},
	{regexp.MustCompile(`(?i)\basync_insert\b`), "18.16 has no async_insert", map[string]string{
		"pkg/chstore/store.go": "turns it off only where the server lists the setting (optionalSetting)"}},
	{regexp.MustCompile(`(?i)\bDELETE\s+FROM\b`), "18.16 has no lightweight DELETE: ALTER TABLE ... DELETE", nil},
}

// A side of a JOIN that is a subquery (or another parenthesised
// expression) needs an alias on current ClickHouse: it refuses the
// statement with code 206, "no alias for subquery or table function"
// (joined_subquery_requires_alias = 1), where 18.16 takes it. A setting
// on the statement is no way out: 18.16 refuses settings it does not
// know.
const (
	// glue is a character that may stand between two words of one
	// statement in Go source: a space, or the quotes and + that join
	// string literals.
	glue = "[\\s\"`+]"
	// joinOp is a JOIN with its strictness and kind. ARRAY JOIN is no
	// join of two sides and does not match.
	joinOp = `\b((GLOBAL|ANY|ALL|ASOF|SEMI|ANTI|LEFT|RIGHT|INNER|FULL|OUTER|CROSS)\s+)*JOIN\b`
)

var (
	// joinedOpen is the opening parenthesis of a JOIN's right side. JOIN
	// follows a space or a quote and is apart from the parenthesis, as
	// SQL is written here: Go's strings.Join( does not match.
	joinedOpen = regexp.MustCompile(`(?i)(^|[\s"` + "`" + `])JOIN` + glue + `+\(`)
	// aliased is an alias, at the start of what follows a right side.
	aliased = regexp.MustCompile(`(?i)^` + glue + `*AS\s+\w+`)
	// joinAfter is a JOIN, at the start of what follows a closing
	// parenthesis: that parenthesis ends a left side without alias.
	joinAfter = regexp.MustCompile(`(?i)^` + glue + `*` + joinOp)
)

// unaliasedJoinSides returns the offsets in text of the parentheses
// that open or close a side of a JOIN without an alias: a right side
// opened right after JOIN whose closing parenthesis is not followed by
// AS alias, and a left side whose closing parenthesis is followed by a
// JOIN.
func unaliasedJoinSides(text string) []int {
	var at []int
	for _, m := range joinedOpen.FindAllStringIndex(text, -1) {
		open := m[1] - 1
		if end := closing(text, open); end >= 0 && !aliased.MatchString(text[end+1:]) {
			at = append(at, open)
		}
	}
	for i := range len(text) {
		if text[i] == ')' && joinAfter.MatchString(text[i+1:]) {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	return at
}

// closing returns the offset of the parenthesis closing the one at
// open, -1 when there is none.
func closing(text string, open int) int {
	depth := 0
	for i := open; i < len(text); i++ {
		switch text[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// TestUnaliasedJoinSides: the check finds the sides of a JOIN without
// an alias, in plain SQL and in SQL split over Go string literals, and
// passes aliased sides, ARRAY JOIN and Go's Join functions.
func TestUnaliasedJoinSides(t *testing.T) {
	for _, c := range []struct {
		text  string
		found int
	}{
		{"SELECT x FROM t ANY LEFT JOIN (SELECT a, x FROM u WHERE p = ?) USING a", 1},
		{"SELECT x FROM t ANY LEFT JOIN (SELECT a, x FROM u WHERE p = ?) AS u USING a", 0},
		{"SELECT x FROM (SELECT a FROM t) ALL INNER JOIN (SELECT a, x FROM u) USING a", 2},
		{"SELECT x FROM (SELECT a FROM t) AS l ALL INNER JOIN (SELECT a, x FROM u) AS r USING a", 0},
		{"SELECT x FROM (SELECT a FROM t)\n  ALL INNER JOIN del USING a", 1},
		{"SELECT x FROM (SELECT a FROM t) AS l ALL INNER JOIN del USING a", 0},
		{`"... ALL INNER JOIN (SELECT a FROM u WHERE p = ?" + more + " AND d = 0) USING a"`, 1},
		{`"... ALL INNER JOIN (SELECT a FROM u WHERE p = ?" + more + " AND d = 0) AS u USING a"`, 0},
		{"\"... WHERE p = ? AND \" + c.sql + \") \" +\n\t\"ALL INNER JOIN t USING a\"", 1},
		{"FROM (SELECT a, ts FROM t) ARRAY JOIN ts AS s", 0},
		{"SELECT * FROM t WHERE a IN (SELECT a FROM u) AND b USING (x) ", 0},
		{"SELECT x FROM t JOIN u USING (a, b) WHERE x IN (SELECT x FROM v)", 0},
		{"return errors.Join(errs...)", 0},
		{"p.join = [1, null].join(); x = a.join(',')", 0},
		{`func and(cs ...cond) cond { return join("AND", cs) }`, 0},
	} {
		if got := len(unaliasedJoinSides(c.text)); got != c.found {
			t.Errorf("%d unaliased sides found in %q, want %d", got, c.text, c.found)
		}
	}
}

// TestSQLIsPortable: no Go or SQL file of the module holds SQL of the
// kinds above (comments included: reword them), nor a side of a JOIN
// without an alias (unaliasedJoinSides).
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
		rel, _ := filepath.Rel(root, path)
		for _, at := range unaliasedJoinSides(string(body)) {
			start := strings.LastIndexByte(string(body[:at]), '\n') + 1
			line, _, _ := strings.Cut(string(body[start:]), "\n")
			t.Errorf("%s:%d: a side of a JOIN is a subquery without an alias, which current ClickHouse refuses "+
				"(code 206, joined_subquery_requires_alias): write (SELECT ...) AS name on both sides, and read the columns "+
				"unqualified through USING\n\t%s", rel, strings.Count(string(body[:at]), "\n")+1, strings.TrimSpace(line))
		}
		for n, line := range strings.Split(string(body), "\n") {
			for _, p := range portability {
				if _, ok := p.except[filepath.ToSlash(rel)]; ok {
					continue
				}
				if p.re.MatchString(line) {
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
