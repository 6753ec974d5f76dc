//go:build chdb

package portability

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/personhub/personhub/pkg/chstore"
	chstatement "github.com/personhub/personhub/pkg/chstore/statement"
)

// recorded is one statement as pkg/testenv saved it from query_log.
type recorded struct {
	ID            string   `json:"query_id"`
	Query         string   `json:"query"`
	SettingNames  []string `json:"setting_names"`
	SettingValues []string `json:"setting_values"`
}

// database is a recorded database: its saved tables and its statements in
// the order the server started them.
type database struct {
	name       string
	dir        string
	tables     []table
	statements []statement
}

// table is a saved table: its CREATE statement, engine, the columns an
// INSERT takes and its rows (a Native file; none for views).
type table struct {
	name    string
	engine  string
	cols    []string
	create  string
	rows    string
	hasRows bool
}

func (t table) view() bool { return strings.HasSuffix(t.engine, "View") }

// ignoredSettings are settings of the recording server's profile, not of
// the product's statements.
var ignoredSettings = map[string]bool{"log_queries": true}

// readRecording reads every database a test binary saved under folder,
// with its statements.
func readRecording(folder string) ([]*database, error) {
	servers, err := filepath.Glob(filepath.Join(folder, "server-*"))
	if err != nil {
		return nil, err
	}
	var out []*database
	for _, dir := range servers {
		byDB := map[string][]statement{}
		if err := readQueries(folder, filepath.Join(dir, "queries.jsonl"), byDB); err != nil {
			return nil, err
		}
		entries, err := os.ReadDir(filepath.Join(dir, "data"))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name, err := url.PathUnescape(e.Name())
			if err != nil {
				return nil, err
			}
			d := &database{name: name, dir: filepath.Join(dir, "data", e.Name()), statements: byDB[name]}
			if err := d.readTables(); err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func readQueries(folder, path string, byDB map[string][]statement) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r recorded
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return err
		}
		db, ok := chstatement.DatabaseOfQueryID(r.ID)
		if !ok {
			continue
		}
		st := statement{db: db, query: r.Query, settings: map[string]string{}}
		for i, n := range r.SettingNames {
			if !ignoredSettings[n] && i < len(r.SettingValues) {
				st.settings[n] = r.SettingValues[i]
			}
		}
		if body, err := os.ReadFile(chstatement.ExternalFile(folder, r.ID)); err == nil {
			if err := json.Unmarshal(body, &st.external); err != nil {
				return err
			}
		}
		byDB[db] = append(byDB[db], st)
	}
	return sc.Err()
}

func (d *database) readTables() error {
	list, err := os.ReadFile(filepath.Join(d.dir, "tables.tsv"))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(list), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		t := table{name: f[0], engine: f[1]}
		if f[2] != "" {
			t.cols = strings.Split(f[2], ",")
		}
		base := filepath.Join(d.dir, url.PathEscape(t.name))
		create, err := os.ReadFile(base + ".sql")
		if err != nil {
			return err
		}
		t.create = string(create)
		if st, err := os.Stat(base + ".native"); err == nil {
			t.rows, t.hasRows = base+".native", st.Size() > 0
		}
		d.tables = append(d.tables, t)
	}
	return nil
}

// kind sorts a statement for the replay.
type kind int

const (
	read    kind = iota // answers compared
	write               // run after the reads, in order; the tables compared after
	columns             // a batch INSERT's column list, proven by an INSERT of no rows
	skip                // not replayed (why says why)
)

var (
	firstWord  = regexp.MustCompile(`^\s*(?:--[^\n]*\n\s*|\(\s*)*([A-Za-z]+)`)
	batchInto  = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+(\S+)\s*\((.*)\)\s*(?:VALUES|FORMAT\s+\w+)\s*$`)
	databaseOp = regexp.MustCompile(`(?i)^\s*(CREATE|DROP)\s+DATABASE\b`)
)

// classify says how a statement is replayed; for a batch INSERT (whose
// rows query_log does not keep: the driver sends them as Native blocks)
// it returns the statement that proves its column list instead. The rows
// themselves reach current ClickHouse when the saved tables are loaded.
func classify(q string, migration map[string]bool) (kind, string, string) {
	if migration[bare(q)] {
		return skip, q, "migration (TestMigrationsOnBothVersions)"
	}
	if strings.Contains(q, "throwIf(") {
		// pkg/deletion's fault test: a mutation that fails for ever on
		// 18.16 (in the background) and at once on current ClickHouse.
		return skip, q, "a fault a test injects (throwIf)"
	}
	if databaseOp.MatchString(q) {
		return skip, q, "CREATE/DROP DATABASE (the replay makes its databases)"
	}
	m := firstWord.FindStringSubmatch(q)
	if m == nil {
		return skip, q, "unparsed"
	}
	switch strings.ToUpper(m[1]) {
	case "SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS":
		return read, q, ""
	case "INSERT":
		if b := batchInto.FindStringSubmatch(q); b != nil {
			return columns, "INSERT INTO " + b[1] + " (" + b[2] + ") SELECT " + b[2] + " FROM " + b[1] + " WHERE 0", ""
		}
		return write, q, ""
	case "ALTER", "OPTIMIZE", "TRUNCATE", "CREATE", "DROP", "RENAME":
		return write, q, ""
	case "KILL", "SYSTEM":
		return skip, q, "server administration (" + strings.ToUpper(m[1]) + ")"
	}
	return skip, q, "other: " + strings.ToUpper(m[1])
}

var (
	literals = regexp.MustCompile(`'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b`)
	lists    = regexp.MustCompile(`\?(?:\s*,\s*\?)+`)
	spaces   = regexp.MustCompile(`\s+`)
)

// form is a statement with its literals taken out: statements of one form
// differ in their values only.
func form(q string) string {
	f := literals.ReplaceAllString(q, "?")
	f = lists.ReplaceAllString(f, "?")
	return spaces.ReplaceAllString(strings.TrimSpace(f), " ")
}

// migrationStatements are the texts of every migration's statements and
// those ApplyMigrations sends around them.
func migrationStatements() (map[string]bool, error) {
	all, err := chstore.Migrations()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range all {
		for _, s := range m.Statements {
			out[bare(s)] = true
		}
		if m.OnlyIf != "" {
			out[bare(m.OnlyIf)] = true
		}
	}
	return out, nil
}

// bare is a statement without its comment lines and with its spaces
// collapsed: query_log keeps a statement from its first token, without
// the comments before it.
func bare(q string) string {
	return spaces.ReplaceAllString(strings.TrimSpace(chstore.StripComments(q)), " ")
}
