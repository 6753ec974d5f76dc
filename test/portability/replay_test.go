//go:build chdb

package portability

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, closeInProcess) }

// ReplayEnv names the folder of the recording to replay (the
// PERSONHUB_SQL_RECORD of the `go test ./...` before).
const ReplayEnv = "PERSONHUB_SQL_REPLAY"

// perForm bounds the statements replayed of one form (of one kind), so
// the replay's time follows the number of forms, not of the tests'
// iterations.
const perForm = 100

// replay is the outcome of a replay.
type replay struct {
	forms       map[string]bool
	statements  int
	reads       int
	systemReads int
	writes      int
	columns     int // batch INSERTs' column lists
	partReads   int // reads that name parts (_part), run on both
	countOnly   int // tables compared by their number of rows
	anyRows     int // reads of any n rows (LIMIT n without ORDER BY) that found n
	skipped     map[string]int
	capped      int
	databases   int
	skippedDBs  map[string]int
	failures    []string
	differences []string
	loading     time.Duration // creating and filling the databases
	reading     time.Duration
	writing     time.Duration // the writes, their mutations and the tables after them
}

func (r *replay) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// TestReplayOnBothVersions loads every database the integration tests
// left into ClickHouse 18.16 and current ClickHouse and replays its
// statements on both: a read must answer the same on both (as a multiset
// of rows), a write must succeed on both and leave equal tables.
func TestReplayOnBothVersions(t *testing.T) {
	folder := os.Getenv(ReplayEnv)
	if folder == "" {
		t.Skipf("$%s is unset: `make test` records the integration tests' statements and replays them here", ReplayEnv)
	}
	dbs, err := readRecording(folder)
	if err != nil {
		t.Fatal(err)
	}
	migration, err := migrationStatements()
	if err != nil {
		t.Fatal(err)
	}
	old, cur := newServer(t), newInProcess(t)
	r := &replay{forms: map[string]bool{}, skipped: map[string]int{}, skippedDBs: map[string]int{}}
	seen := map[string]int{} // statements replayed by form
	start := time.Now()
	only := regexp.MustCompile(os.Getenv(ReplayEnv + "_DATABASES")) // to replay a few while looking into them
	for _, d := range dbs {
		if !only.MatchString(d.name) {
			continue
		}
		if why := unreplayable(d); why != "" {
			r.skippedDBs[why]++
			continue
		}
		if len(d.statements) == 0 {
			r.skippedDBs["no statements recorded"]++
			continue
		}
		r.replayDatabase(t, d, old, cur, migration, seen)
	}
	t.Logf("replayed on %s and %s in %s: %d databases, %d statement forms, %d statements (%d reads compared, %d reads of the server's own and %d reads of named parts run on both, %d batch INSERTs' columns, %d writes); %d more of forms already replayed %d times",
		old.name(), cur.name(), time.Since(start).Round(time.Second), r.databases, len(r.forms), r.statements, r.reads, r.systemReads, r.partReads, r.columns, r.writes, r.capped, perForm)
	if r.anyRows > 0 {
		t.Logf("%d reads of any n rows (LIMIT n, no ORDER BY) that found n compared by their number of rows", r.anyRows)
	}
	if r.countOnly > 0 {
		t.Logf("%d tables after writes that made random rows or read the clock compared by their number of rows", r.countOnly)
	}
	t.Logf("time: %s loading the databases, %s reading, %s writing and comparing the tables after the writes",
		r.loading.Round(time.Second), r.reading.Round(time.Second), r.writing.Round(time.Second))
	for why, n := range r.skipped {
		t.Logf("not replayed: %d statements: %s", n, why)
	}
	for why, n := range r.skippedDBs {
		t.Logf("databases not replayed: %d: %s", n, why)
	}
	if len(dbs) == 0 || len(r.forms) < 100 {
		t.Errorf("only %d forms in %d databases recorded under %s: the recording is missing or broken", len(r.forms), len(dbs), folder)
	}
	report(t, folder, "failed", r.failures)
	report(t, folder, "answered differently", r.differences)
}

// report fails the test with the first of list, and writes all of it to
// <folder>/portability-<what>.txt.
func report(t *testing.T, folder, what string, list []string) {
	if len(list) == 0 {
		return
	}
	path := filepath.Join(folder, "portability-"+strings.ReplaceAll(what, " ", "-")+".txt")
	if err := os.WriteFile(path, []byte(strings.Join(list, "\n\n")+"\n"), 0o644); err != nil {
		t.Log(err)
	}
	t.Errorf("%d statements %s (all of them in %s)", len(list), what, path)
	for i, s := range list {
		if i == 25 {
			t.Errorf("... and %d more", len(list)-i)
			break
		}
		t.Error(s)
	}
}

// unreplayable says why a database cannot be loaded into an engine alone
// ("" when it can).
func unreplayable(d *database) string {
	for _, t := range d.tables {
		if t.engine == "Distributed" || strings.HasPrefix(t.engine, "Replicated") {
			return "tables of a cluster (" + t.engine + ")"
		}
	}
	return ""
}

// plan picks the statements of d to replay: not the migrations', a read
// once for each text (and external tables), and at most perForm of a
// form over the whole replay.
func (r *replay) plan(d *database, migration map[string]bool, seen map[string]int) (reads, proofs, writes []statement) {
	done := map[string]bool{}
	for _, st := range d.statements {
		k, q, why := classify(st.query, migration)
		if k == skip {
			r.skipped[why]++
			continue
		}
		if strings.Contains(q, "schema_migrations") {
			r.skipped["the migrations' own bookkeeping"]++
			continue
		}
		key := q + "\x00" + externalKey(st)
		if done[key] && k != write {
			continue
		}
		done[key] = true
		f := fmt.Sprintf("%d %s", k, form(q))
		if seen[f] >= perForm {
			r.capped++
			continue
		}
		seen[f]++
		r.forms[f] = true
		st.query = q
		switch k {
		case write:
			writes = append(writes, st)
		case columns:
			proofs = append(proofs, st)
		default:
			reads = append(reads, st)
		}
	}
	return reads, proofs, writes
}

// formFieldTooLong is 18.16's answer to a form field (the statement, sent
// with external tables) longer than its HTTP interface takes.
const formFieldTooLong = "HTML Form Exception: Field value too long"

func (r *replay) replayDatabase(t *testing.T, d *database, old *server, cur *inProcess, migration map[string]bool, seen map[string]int) {
	reads, proofs, writes := r.plan(d, migration, seen)
	if len(reads)+len(proofs)+len(writes) == 0 {
		r.skippedDBs["every statement's form replayed enough before"]++
		return
	}
	r.databases++
	engines := []engine{old, cur}
	t0 := time.Now()
	defer func() { r.writing += time.Since(t0) }() // t0 is set again before the writes
	for _, e := range engines {
		if err := loadDatabase(e, d); err != nil {
			r.fail("%s: loading %s: %v", e.name(), d.name, err)
			return
		}
	}
	defer func() {
		for _, e := range engines {
			if _, err := e.run(statement{query: "DROP DATABASE IF EXISTS " + ident(d.name)}); err != nil {
				t.Logf("%s: drop %s: %v", e.name(), d.name, err)
			}
		}
	}()
	r.loading += time.Since(t0)
	t1 := time.Now()
	for _, st := range reads {
		q := st.query
		r.statements++
		a, errOld, b, errCur := both(old, cur, st)
		switch {
		case errOld != nil && errCur != nil && chstore.ErrorCode(errOld) == unknownDatabase:
			r.skipped["names a database of another test, which the replay does not load"]++
		case errOld != nil && errCur == nil && len(st.external) > 0 && strings.Contains(errOld.Error(), formFieldTooLong):
			// The test ran it on 18.16 through the native protocol.
			r.skipped["on 18.16: too long for its HTTP form with external tables (ran natively in its test); current ClickHouse ran it"]++
		case errOld != nil && errCur != nil:
			r.fail("%s: fails on both: %v\n\t%s", d.name, errOld, oneLine(q))
		case errOld != nil:
			r.fail("%s: fails on %s only: %v\n\t%s", d.name, old.name(), errOld, oneLine(q))
		case errCur != nil:
			r.fail("%s: fails on %s: %v\n\t%s", d.name, cur.name(), errCur, oneLine(q))
		case versionRead.MatchString(q):
			r.systemReads++ // what the server says of itself differs by version
		case partRead.MatchString(q):
			r.partReads++ // the loaded tables' parts are not the recorded ones
		default:
			r.reads++
			if n, ok := unorderedLimit(q); ok && (rowCount(a) >= n || rowCount(b) >= n) {
				// Any n rows: the statement asks how many match, up to n.
				r.anyRows++
				if x, y := rowCount(a), rowCount(b); x != y {
					r.differences = append(r.differences, fmt.Sprintf("%s:\n\t%s\n\t%s, then %s: %d rows, then %d", d.name, oneLine(q), old.name(), cur.name(), x, y))
				}
				continue
			}
			if !sameRows(a, b) {
				r.differences = append(r.differences, fmt.Sprintf("%s:\n\t%s\n\t%s, then %s: %s", d.name, oneLine(q), old.name(), cur.name(), rowDiff(a, b)))
			}
		}
	}
	for _, st := range proofs {
		r.statements++
		r.columns++
		_, errOld, _, errCur := both(old, cur, st)
		if errOld != nil || errCur != nil {
			r.fail("%s: a batch INSERT's columns: %s: %v; %s: %v\n\t%s", d.name, old.name(), errOld, cur.name(), errCur, oneLine(st.query))
		}
	}
	r.reading += time.Since(t1)
	t0 = time.Now()
	if len(writes) == 0 {
		return
	}
	for _, st := range writes {
		r.statements++
		r.writes++
		_, errOld, _, errCur := both(old, cur, st)
		if (errOld == nil) != (errCur == nil) {
			r.fail("%s: write: %s: %v; %s: %v\n\t%s", d.name, old.name(), errOld, cur.name(), errCur, oneLine(st.query))
		}
	}
	for _, e := range engines {
		if err := waitMutations(e, d.name); err != nil {
			r.fail("%s: %s: %v", e.name(), d.name, err)
			return
		}
	}
	random := false
	for _, st := range writes {
		random = random || nondeterministic.MatchString(st.query)
	}
	for _, tb := range d.tables {
		if tb.view() {
			continue
		}
		q := "SELECT * FROM " + ident(d.name) + "." + ident(tb.name)
		if collapsing.MatchString(tb.engine) {
			q += " FINAL"
		}

		a, errOld, b, errCur := both(old, cur, statement{query: q})
		switch {
		case errOld != nil || errCur != nil:
			r.fail("%s: reading %s after the writes: %v; %v", d.name, tb.name, errOld, errCur)
		case random:
			// Counted here: 18.16 answers 0 for count() over a FINAL
			// read of a SummingMergeTree.
			r.countOnly++
			if x, y := strings.Count(a, "\n"), strings.Count(b, "\n"); x != y {
				r.differences = append(r.differences, fmt.Sprintf("%s: table %s after the writes: %d rows, then %d", d.name, tb.name, x, y))
			}
		case !sameRows(a, b):
			r.differences = append(r.differences, fmt.Sprintf("%s: table %s after the writes:\n\t%s, then %s: %s", d.name, tb.name, old.name(), cur.name(), rowDiff(a, b)))
		}
	}
}

// both runs a statement on the two engines at once.
func both(old, cur engine, st statement) (string, error, string, error) {
	var a string
	var errOld error
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, errOld = old.run(st)
	}()
	b, errCur := cur.run(st)
	<-done
	return a, errOld, b, errCur
}

// versionRead matches the reads whose answers are the server's own: its
// system tables and version(), and windowFunnel, which the product does
// not use because 18.16 answers it differently (docs/analysis.md); a
// test of pkg/insight shows how.
var versionRead = regexp.MustCompile(`(?i)\bsystem\.[a-z_]+|\bversion\(\)|\bwindowFunnel\(`)

// nondeterministic matches a write whose rows differ each time it runs
// (a test making its data with generateUUIDv4 or now()): the tables
// after it are compared by their number of rows.
var nondeterministic = regexp.MustCompile(`(?i)\b(generateUUIDv4|rand[A-Za-z0-9]*|randomString|now|today|yesterday)\s*\(`)

// unknownDatabase is ClickHouse's UNKNOWN_DATABASE.
const unknownDatabase = 81

// partRead matches a statement that names parts of a table: the saved
// rows load as parts of their own, so it reads other rows than it did.
var partRead = regexp.MustCompile(`\b_part\b`)

// collapsing matches the engines whose rows of one key merge, at a time
// the server chooses: their tables are compared as FINAL reads them.
var collapsing = regexp.MustCompile(`Replacing|Summing|Collapsing|Aggregating`)

// loadDatabase creates d's tables in an engine and loads their rows;
// views are made after the rows are in, so that they add nothing.
func loadDatabase(e engine, d *database) error {
	if _, err := e.run(statement{query: "CREATE DATABASE IF NOT EXISTS " + ident(d.name)}); err != nil {
		return err
	}
	for _, views := range []bool{false, true} {
		for _, t := range d.tables {
			if t.view() != views {
				continue
			}
			if _, err := e.run(statement{db: d.name, query: t.create}); err != nil {
				return fmt.Errorf("create %s: %w", t.name, err)
			}
			if t.hasRows {
				if err := e.load(d.name, t.name, t.cols, t.rows); err != nil {
					return fmt.Errorf("rows of %s: %w", t.name, err)
				}
			}
		}
	}
	return nil
}

// waitMutations waits until the ALTER ... DELETE/UPDATE of db are done.
func waitMutations(e engine, db string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := e.run(statement{query: "SELECT count() FROM system.mutations WHERE database = " + quote(db) + " AND is_done = 0"})
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mutations of %s still running after 2 minutes", db)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// zeroTime is how 18.16 writes the zero Date and DateTime as text;
// current ClickHouse writes the same value as 1970-01-01 (the driver reads
// the same number from both).
var zeroTime = strings.NewReplacer("0000-00-00 00:00:00", "1970-01-01 00:00:00", "0000-00-00", "1970-01-01")

// rowDiff shows the rows of one answer that the other lacks (a few of
// each side).
func rowDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(zeroTime.Replace(s), "\n") {
			m[l]++
		}
		return m
	}
	x, y := count(a), count(b)
	var onlyA, onlyB []string
	for l, n := range x {
		if n > y[l] {
			onlyA = append(onlyA, fmt.Sprintf("%dx %s", n-y[l], l))
		}
	}
	for l, n := range y {
		if n > x[l] {
			onlyB = append(onlyB, fmt.Sprintf("%dx %s", n-x[l], l))
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	clip := func(v []string) string {
		if len(v) > 5 {
			v = append(v[:5], fmt.Sprintf("... %d more", len(v)-5))
		}
		return excerpt(strings.Join(v, "\n\t\t"))
	}
	return fmt.Sprintf("rows only the first has:\n\t\t%s\n\trows only the second has:\n\t\t%s", clip(onlyA), clip(onlyB))
}

// rowCount is the number of rows of a TabSeparated answer.
func rowCount(s string) int { return strings.Count(s, "\n") }

// limitAtEnd matches a statement's closing LIMIT n (or LIMIT m, n).
var limitAtEnd = regexp.MustCompile(`(?i)\bLIMIT\s+(?:\d+\s*,\s*)?(\d+)\s*;?\s*$`)

// unorderedLimit reports the n of a statement that ends in LIMIT n with
// no ORDER BY of its own (outside parentheses): it asks for any n of the
// rows that match, and which ones each server reads first is its own
// choice, so two right answers may hold different rows. The product's
// probes of this shape (does a filter match more than a page?) use only
// their number of rows.
func unorderedLimit(q string) (int, bool) {
	m := limitAtEnd.FindStringSubmatchIndex(q)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(q[m[2]:m[3]])
	if err != nil {
		return 0, false
	}
	depth, outer := 0, strings.Builder{}
	inString := false
	for i := 0; i < m[0]; i++ {
		c := q[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '\'' {
				inString = false
			}
			continue
		case c == '\'':
			inString = true
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0:
			outer.WriteByte(c)
		}
	}
	return n, !orderBy.MatchString(outer.String())
}

var orderBy = regexp.MustCompile(`(?i)\bORDER\s+BY\b`)

// sameRows compares two TabSeparated answers as multisets of rows.
func sameRows(a, b string) bool {
	if a == b {
		return true
	}
	a, b = zeroTime.Replace(a), zeroTime.Replace(b)
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(x) != len(y) {
		return false
	}
	sort.Strings(x)
	sort.Strings(y)
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func externalKey(st statement) string {
	if len(st.external) == 0 {
		return ""
	}
	h := sha256.New()
	for _, e := range st.external {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", e.Name, e.Structure, e.TSV)
	}
	return string(h.Sum(nil))
}

func oneLine(s string) string { return excerpt(spaces.ReplaceAllString(s, " ")) }

func excerpt(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}
