package docs

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's folder.
const root = "../.."

// TestArchitectureListsEveryPackage: docs/architecture.md's "Packages" table
// names every Go package under pkg/, and none that is gone.
func TestArchitectureListsEveryPackage(t *testing.T) {
	code := map[string]bool{}
	walkGo(t, "pkg", func(path string, _ *ast.File) {
		if !strings.HasSuffix(path, "_test.go") {
			code[filepath.ToSlash(filepath.Dir(path))] = true
		}
	})
	doc := map[string]bool{}
	inCell := regexp.MustCompile("`(pkg/[a-z0-9/]+)`")
	for _, row := range tableRows(t, "docs/architecture.md", "## Packages") {
		for _, m := range inCell.FindAllStringSubmatch(row[0], -1) {
			doc[m[1]] = true
		}
	}
	compare(t, "package", "docs/architecture.md's packages table", code, doc)
}

// TestOperationsListsEveryMetric: the metric names docs/operations.md
// lists are the ones the code registers (every prometheus.*Opts literal,
// with its Namespace).
func TestOperationsListsEveryMetric(t *testing.T) {
	code := map[string]bool{}
	walkGo(t, ".", func(path string, f *ast.File) {
		if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "bench") {
			return
		}
		for _, name := range metricNames(t, path, f) {
			code[name] = true
		}
	})
	if len(code) < 10 {
		t.Fatalf("found only %d metrics in the code: %v", len(code), code)
	}
	text := readFile(t, "docs/operations.md")
	doc := map[string]bool{}
	prefixes := map[string]bool{}
	for name := range code {
		prefixes[name[:strings.IndexByte(name, '_')]] = true
	}
	named := regexp.MustCompile("`([a-z]+_[a-z0-9_]+)(\\{[^}`]*\\})?`")
	for _, m := range named.FindAllStringSubmatch(text, -1) {
		if prefixes[m[1][:strings.IndexByte(m[1], '_')]] && metricLike(m[1]) {
			doc[m[1]] = true
		}
	}
	compare(t, "metric", "docs/operations.md", code, doc)
}

// metricLike reports whether a backquoted name reads as a metric: the
// suffixes the code's metrics carry. It keeps out settings and table names
// that share a prefix with a metric (ingester_..., deleter_...).
func metricLike(name string) bool {
	for _, s := range []string{"_total", "_seconds", "_messages", "_sequence", "_requests", "_ready"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// metricNames returns the full names of the metrics a file declares. A
// literal's Name is a string, or a parameter of the function literal that
// wraps it (newMetrics' counter := func(name, help string)), whose calls in
// the same file give the names.
func metricNames(t *testing.T, path string, f *ast.File) []string {
	var out []string
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		lit, ok := n.(*ast.CompositeLit)
		if !ok || !isPrometheusOpts(lit.Type) {
			return true
		}
		var ns string
		var name ast.Expr
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch kv.Key.(*ast.Ident).Name {
			case "Namespace":
				ns = stringLit(t, path, kv.Value)
			case "Name":
				name = kv.Value
			}
		}
		var names []string
		switch v := name.(type) {
		case *ast.BasicLit:
			names = []string{stringLit(t, path, v)}
		case *ast.Ident:
			names = callArgs(t, path, f, stack, v.Name)
		default:
			t.Errorf("%s: a metric's Name is neither a string nor a parameter", path)
		}
		for _, n := range names {
			if ns != "" {
				n = ns + "_" + n
			}
			out = append(out, n)
		}
		return true
	})
	return out
}

func isPrometheusOpts(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "prometheus" && strings.HasSuffix(sel.Sel.Name, "Opts")
}

// callArgs finds the function literal enclosing the Opts literal (the
// innermost on stack) whose parameter is param, the variable it is
// assigned to, and the string each call of that variable in f passes there.
func callArgs(t *testing.T, path string, f *ast.File, stack []ast.Node, param string) []string {
	for i := len(stack) - 1; i > 0; i-- {
		fn, ok := stack[i].(*ast.FuncLit)
		if !ok {
			continue
		}
		at := -1
		k := 0
		for _, field := range fn.Type.Params.List {
			for _, n := range field.Names {
				if n.Name == param {
					at = k
				}
				k++
			}
		}
		assign, ok := stack[i-1].(*ast.AssignStmt)
		if at < 0 || !ok || len(assign.Lhs) != 1 {
			break
		}
		fnName := assign.Lhs[0].(*ast.Ident).Name
		var out []string
		ast.Inspect(f, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if id, ok := c.Fun.(*ast.Ident); ok && id.Name == fnName && len(c.Args) > at {
					out = append(out, stringLit(t, path, c.Args[at]))
				}
			}
			return true
		})
		return out
	}
	t.Errorf("%s: metric name %s is not a parameter of a function literal assigned to a variable", path, param)
	return nil
}

func stringLit(t *testing.T, path string, e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if ok && lit.Kind == token.STRING {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return s
		}
	}
	t.Errorf("%s: expected a string literal in a metric's options", path)
	return ""
}

// fuzzTargets are the Fuzz functions declared in the repository's test
// files, as "<package folder> <name>".
func fuzzTargets(t *testing.T) map[string]bool {
	out := map[string]bool{}
	walkGo(t, ".", func(path string, f *ast.File) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				out["./"+filepath.ToSlash(filepath.Dir(path))+" "+fn.Name.Name] = true
			}
		}
	})
	return out
}

// TestMakeFuzzRunsEveryTarget: the list `make fuzz` runs (scripts/fuzz.sh
// list, from `go test -list`) is every Fuzz function of the test files.
// It builds the test binaries of the packages that hold fuzz targets, so
// -short skips it.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test binaries")
	}
	cmd := exec.Command("bash", "scripts/fuzz.sh", "list")
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/fuzz.sh list: %v\n%s%s", err, out, stderr.String())
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			listed[line] = true
		}
	}
	compare(t, "fuzz target", "scripts/fuzz.sh list (make fuzz)", fuzzTargets(t), listed)
}

// TestReliabilityListsEveryFuzzTarget: docs/reliability.md's fuzz table has
// a row for every Fuzz function, by name and package, and none that is gone.
func TestReliabilityListsEveryFuzzTarget(t *testing.T) {
	doc := map[string]bool{}
	cell := regexp.MustCompile("^`([^`]+)`$")
	for _, row := range tableRows(t, "docs/reliability.md", "## Fuzz targets") {
		if len(row) < 2 {
			continue
		}
		name, pkg := cell.FindStringSubmatch(row[0]), cell.FindStringSubmatch(row[1])
		if name != nil && pkg != nil {
			doc["./"+pkg[1]+" "+name[1]] = true
		}
	}
	compare(t, "fuzz target", "docs/reliability.md's fuzz table", fuzzTargets(t), doc)
}

// TestGitignoreCoversBinaries: what `go build ./cmd/<name>` and
// `go build ./bench/<name>` write at the root, and what the Makefile
// writes under bin/, is ignored by git.
func TestGitignoreCoversBinaries(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	paths := []string{"bin/stack", "bin/bench"}
	for _, dir := range []string{"cmd", "bench"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && isMain(t, filepath.Join(dir, e.Name())) {
				paths = append(paths, e.Name())
			}
		}
	}
	if len(paths) < 6 {
		t.Fatalf("found only %v", paths)
	}
	for _, p := range paths {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", p)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf(".gitignore does not ignore %q, which a build writes at the root (git check-ignore: %v)", p, err)
		}
	}
}

// isMain reports whether dir (from the root) holds a main package.
func isMain(t *testing.T, dir string) bool {
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return pf.Name.Name == "main"
	}
	return false
}

// walkGo parses every .go file under dir (from the root), skipping
// testdata and dependencies' folders, and calls fn with its path from the
// root.
func walkGo(t *testing.T, dir string, fn func(path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git", ".data", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fn(rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tableRows returns the cells (trimmed) of the body rows of the first
// Markdown table after the heading in the document.
func tableRows(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(readFile(t, doc)))
	var rows [][]string
	in, table := false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
		case !in:
		case strings.HasPrefix(line, "|"):
			table = true
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if strings.HasPrefix(cells[0], "---") {
				rows = rows[:0] // the header row came first
				continue
			}
			rows = append(rows, cells)
		case table:
			return rows
		}
	}
	if !table {
		t.Fatalf("%s: no table after %q", doc, heading)
	}
	return rows
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compare fails for each name in code that doc lacks, and each in doc that
// code lacks.
func compare(t *testing.T, what, doc string, code, listed map[string]bool) {
	t.Helper()
	var missing, gone []string
	for n := range code {
		if !listed[n] {
			missing = append(missing, n)
		}
	}
	for n := range listed {
		if !code[n] {
			gone = append(gone, n)
		}
	}
	slices.Sort(missing)
	slices.Sort(gone)
	for _, n := range missing {
		t.Errorf("%s lacks the %s %s", doc, what, n)
	}
	for _, n := range gone {
		t.Errorf("%s lists the %s %s, which the code no longer has", doc, what, n)
	}
}

// tableOwners maps each ClickHouse table of the persons and events to the
// one package whose statements may name it (docs/architecture.md,
// "Packages"); others read it through the owner's subqueries.
var tableOwners = map[string]string{
	"events":                       "pkg/chstore/eventstore",
	"events_by_distinct_id":        "pkg/chstore/eventstore",
	"events_hourly":                "pkg/chstore/eventstore",
	"events_first_seq":             "pkg/chstore/eventstore",
	"person_distinct_ids":          "pkg/chstore/distinctids",
	"person_distinct_id_overrides": "pkg/chstore/distinctids",
	"person_emails":                "pkg/chstore/search",
	"person_email_grams":           "pkg/chstore/search",
	"persons":                      "pkg/chstore",
	"cohort_people":                "pkg/chstore",
	"person_order":                 "pkg/chstore",
	"person_last_seen":             "pkg/chstore/eventstore",
}

// TestTablesHaveOneOwner: outside the tests, the test harness and the
// bench (whose raw baselines talk to ClickHouse directly), only a table's
// owner names it in a statement (FROM, JOIN, INTO, TABLE).
func TestTablesHaveOneOwner(t *testing.T) {
	named := regexp.MustCompile(`\b(?:FROM|JOIN|INTO|TABLE) +(\w+)`)
	seen := map[string]bool{}
	for _, dir := range []string{"pkg", "cmd"} {
		walkGo(t, dir, func(path string, f *ast.File) {
			if strings.HasSuffix(path, "_test.go") || strings.HasPrefix(filepath.ToSlash(path), "pkg/testenv") {
				return
			}
			pkg := filepath.ToSlash(filepath.Dir(path))
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range named.FindAllStringSubmatch(lit.Value, -1) {
					owner, ok := tableOwners[m[1]]
					if !ok {
						continue
					}
					seen[m[1]] = true
					if pkg != owner {
						t.Errorf("%s names %s (%q), owned by %s", path, m[1], m[0], owner)
					}
				}
				return true
			})
		})
	}
	for table := range tableOwners {
		if !seen[table] {
			t.Errorf("no statement of %s names %s: the owners map is stale", tableOwners[table], table)
		}
	}
}

// TestCheckFreeSpace: `make test`'s first step passes with the space it
// needs free and stops, naming the folder and both amounts, without.
func TestCheckFreeSpace(t *testing.T) {
	dir := t.TempDir()
	run := func(gib string) (string, error) {
		cmd := exec.Command("bash", "scripts/check-free-space.sh", dir, gib, "the tests")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("0"); err != nil {
		t.Fatalf("0 GiB needed: %v\n%s", err, out)
	}
	out, err := run("1000000000")
	if err == nil {
		t.Fatalf("a billion GiB needed: passed\n%s", out)
	}
	for _, want := range []string{"the tests needs about 1000000000 GiB free in " + dir, "GiB. Free some space"} {
		if !strings.Contains(out, want) {
			t.Errorf("the message %q lacks %q", out, want)
		}
	}
}
