//go:build chdb

package portability

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chdb-io/chdb-go/chdb"

	chstatement "github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/testenv"
)

// statement is one statement to run on an engine: its text, the database
// it runs in, the settings it was sent with and its external tables.
type statement struct {
	db       string
	query    string
	settings map[string]string
	external []chstatement.RecordedTable
}

// engine is one ClickHouse the statements run on; run answers in
// TabSeparated format.
type engine interface {
	name() string
	run(st statement) (string, error)
	// load inserts a Native file's rows into db.table's columns.
	load(db, table string, cols []string, file string) error
}

// server is ClickHouse 18.16 through its HTTP interface, which takes
// settings and external tables with a statement as the native protocol
// does.
type server struct {
	addr    string
	version string
	client  *http.Client
}

func newServer(t *testing.T) *server {
	s := &server{addr: testenv.ClickHouseHTTPAddr(t), client: &http.Client{Timeout: 5 * time.Minute}}
	v, err := s.run(statement{query: "SELECT version()"})
	if err != nil {
		t.Fatal(err)
	}
	s.version = strings.TrimSpace(v)
	return s
}

func (s *server) name() string { return "ClickHouse " + s.version }

func (s *server) run(st statement) (string, error) {
	params := url.Values{}
	if st.db != "" {
		params.Set("database", st.db)
	}
	for k, v := range st.settings {
		params.Set(k, v)
	}
	var body bytes.Buffer
	contentType := "text/plain"
	if len(st.external) == 0 {
		body.WriteString(st.query)
	} else {
		mw := multipart.NewWriter(&body)
		// The statement goes as a field of the form, not in the URL: a
		// statement with long lists is past the server's URL length.
		if err := mw.WriteField("query", st.query); err != nil {
			return "", err
		}
		for _, e := range st.external {
			params.Set(e.Name+"_structure", e.Structure)
			params.Set(e.Name+"_format", "TabSeparated")
			w, err := mw.CreateFormFile(e.Name, e.Name+".tsv")
			if err != nil {
				return "", err
			}
			io.WriteString(w, e.TSV)
		}
		mw.Close()
		contentType = mw.FormDataContentType()
	}
	return s.post(params, contentType, &body)
}

func (s *server) post(params url.Values, contentType string, body io.Reader) (string, error) {
	resp, err := s.client.Post("http://"+s.addr+"/?"+params.Encode(), contentType, body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (s *server) load(db, table string, cols []string, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	params := url.Values{"query": {"INSERT INTO " + ident(db) + "." + ident(table) + " (" + identList(cols) + ") FORMAT Native"}}
	_, err = s.post(params, "application/octet-stream", f)
	return err
}

// inProcess is current ClickHouse in process (chDB). One session holds
// every database; settings set for a statement are set back to their
// defaults before the next.
type inProcess struct {
	s        *chdb.Session
	version  string
	defaults map[string]string // the settings changed so far, at their defaults
	db       string            // the session's current database
	dir      string            // the session's data
}

var (
	curOnce sync.Once
	cur     *inProcess
	curErr  error
)

// newInProcess returns the process's chDB session, started on first use:
// chDB holds one engine a process, so the tests share it (each in
// databases of its own), and closeInProcess ends it after them.
func newInProcess(t *testing.T) *inProcess {
	curOnce.Do(func() {
		dir, err := os.MkdirTemp("", "personhub-chdb-")
		if err != nil {
			curErr = err
			return
		}
		s, err := chdb.NewSession(dir)
		if err != nil {
			curErr = err
			return
		}
		e := &inProcess{s: s, dir: dir, defaults: map[string]string{}}
		v, err := e.query("SELECT version()")
		if err != nil {
			curErr = err
			return
		}
		e.version = strings.TrimSpace(v)
		cur = e
	})
	if curErr != nil {
		t.Fatalf("chDB: %v", curErr)
	}
	return cur
}

func closeInProcess() {
	if cur != nil {
		cur.s.Close()
		os.RemoveAll(cur.dir)
	}
}

func (e *inProcess) name() string { return "ClickHouse " + e.version + " (chDB)" }

// query runs one statement in the session.
func (e *inProcess) query(q string) (string, error) {
	r, err := e.s.Query(q, "TabSeparated")
	if err != nil {
		return "", err
	}
	if r == nil {
		return "", nil
	}
	defer r.Free()
	if err := r.Error(); err != nil {
		return "", err
	}
	return string(r.Buf()), nil
}

func (e *inProcess) run(st statement) (string, error) {
	if st.db != "" && st.db != e.db {
		if _, err := e.query("USE " + ident(st.db)); err != nil {
			return "", err
		}
		e.db = st.db
	}
	if err := e.applySettings(st.settings); err != nil {
		return "", err
	}
	for _, x := range st.external {
		if _, err := e.query("CREATE TEMPORARY TABLE " + ident(x.Name) + " (" + x.Structure + ") ENGINE = Memory"); err != nil {
			return "", fmt.Errorf("external table %s: %w", x.Name, err)
		}
		defer e.query("DROP TEMPORARY TABLE IF EXISTS " + ident(x.Name))
		if x.TSV != "" {
			if _, err := e.query("INSERT INTO " + ident(x.Name) + " FORMAT TabSeparated\n" + x.TSV); err != nil {
				return "", fmt.Errorf("external table %s: %w", x.Name, err)
			}
		}
	}
	return e.query(st.query)
}

// applySettings sets the statement's settings and sets those of the
// statements before it back to their defaults.
func (e *inProcess) applySettings(want map[string]string) error {
	names := make([]string, 0, len(want)+len(e.defaults))
	for k := range want {
		names = append(names, k)
	}
	for k := range e.defaults {
		if _, ok := want[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if _, known := e.defaults[k]; !known {
			v, err := e.query("SELECT value FROM system.settings WHERE name = " + quote(k))
			if err != nil {
				return err
			}
			e.defaults[k] = strings.TrimSuffix(v, "\n")
		}
		v, ok := want[k]
		if !ok {
			v = e.defaults[k]
		}
		if _, err := e.query("SET " + ident(k) + " = " + settingLiteral(v)); err != nil {
			return fmt.Errorf("setting %s: %w", k, err)
		}
	}
	return nil
}

// load inserts the saved rows as they are: current ClickHouse would
// apply a table's merge to an inserted block (optimize_on_insert, on by
// default from 21.x), where 18.16 keeps every row, so the two would start
// from different rows of a ReplacingMergeTree.
func (e *inProcess) load(db, table string, cols []string, file string) error {
	if _, err := e.query("SET optimize_on_insert = 0"); err != nil {
		return err
	}
	defer e.query("SET optimize_on_insert = DEFAULT")
	_, err := e.query("INSERT INTO " + ident(db) + "." + ident(table) + " (" + identList(cols) + ") FROM INFILE " + quote(file) + " FORMAT Native")
	return err
}

// target is a database of an engine as chstore.MigrationTarget.
type target struct {
	e  engine
	db string
}

func (t target) Exec(_ context.Context, statement string) error {
	_, err := t.e.run(statementIn(t.db, statement))
	return err
}

func (t target) Uints(_ context.Context, query string) ([]uint64, error) {
	out, err := t.e.run(statementIn(t.db, query))
	if err != nil {
		return nil, err
	}
	var vs []uint64
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		v, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an unsigned integer", query, line)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func statementIn(db, q string) statement { return statement{db: db, query: q} }

func ident(s string) string {
	return "`" + strings.NewReplacer("\\", "\\\\", "`", "\\`").Replace(s) + "`"
}

func identList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = ident(c)
	}
	return strings.Join(q, ", ")
}

func quote(s string) string {
	return "'" + strings.NewReplacer("\\", "\\\\", "'", "\\'").Replace(s) + "'"
}

// settingLiteral is a setting's value as SET takes it: a number as is,
// anything else quoted.
func settingLiteral(v string) string {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return v
	}
	return quote(v)
}
