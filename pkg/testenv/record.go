package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Recording for the portability test (test/portability). With
// $PERSONHUB_SQL_RECORD naming a folder, the shared server logs every
// statement (chlocal.WithQueryLog) and the stores tag each with its
// database (statement.RecordEnv). Before a test's database is dropped, its
// tables are saved (their CREATE statements and their rows in Native
// format) under <folder>/server-<pid>/data/<database>/; when the package's
// tests end, the statements the stores sent are saved from query_log to
// <folder>/server-<pid>/queries.jsonl. The portability test loads each
// database into ClickHouse 18.16 and current ClickHouse alike and replays
// its statements on both.

// recording is the recording of this test binary's shared server.
type recording struct {
	dir  string // <folder>/server-<pid>
	http string // the server's HTTP address
	mu   sync.Mutex
	done map[string]bool // databases saved
}

var rec *recording

// recordFolder is the folder statements are recorded under, or "".
func recordFolder() string { return os.Getenv(statement.RecordEnv) }

func startRecording(folder, httpAddr string) error {
	dir := filepath.Join(folder, fmt.Sprintf("server-%d", os.Getpid()))
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	rec = &recording{dir: dir, http: httpAddr, done: map[string]bool{}}
	return nil
}

// query runs a statement on the server over HTTP and writes its answer
// to w.
func (r *recording) query(q string, w io.Writer) error {
	resp, err := http.Post("http://"+r.http+"/", "text/plain", strings.NewReader(q))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", q, strings.TrimSpace(string(body)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func (r *recording) lines(q string) ([]string, error) {
	var b strings.Builder
	if err := r.query(q, &b); err != nil {
		return nil, err
	}
	s := strings.TrimRight(b.String(), "\n")
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, "\n"), nil
}

// saveDatabase saves db's tables: tables.tsv lists name, engine and the
// columns an INSERT takes; <table>.sql is its CREATE statement and
// <table>.native its rows (none for views).
func (r *recording) saveDatabase(db string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done[db] {
		return nil
	}
	r.done[db] = true
	lit := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(db) + "'"
	tables, err := r.lines("SELECT name, engine FROM system.tables WHERE database = " + lit + " ORDER BY name FORMAT TabSeparated")
	if err != nil || len(tables) == 0 {
		return err
	}
	dir := filepath.Join(r.dir, "data", url.PathEscape(db))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var list strings.Builder
	for _, line := range tables {
		name, engine, _ := strings.Cut(line, "\t")
		name = unescapeTSV(name)
		qname := quoteIdent(db) + "." + quoteIdent(name)
		var create strings.Builder
		if err := r.query("SHOW CREATE TABLE "+qname+" FORMAT TSVRaw", &create); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, url.PathEscape(name)+".sql"), []byte(create.String()), 0o644); err != nil {
			return err
		}
		cols, err := r.lines("SELECT name FROM system.columns WHERE database = " + lit + " AND table = '" +
			strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(name) + "' AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') FORMAT TabSeparated")
		if err != nil {
			return err
		}
		fmt.Fprintf(&list, "%s\t%s\t%s\n", statement.EscapeTSV(name), engine, strings.Join(cols, ","))
		if strings.HasSuffix(engine, "View") || engine == "Distributed" {
			continue
		}
		f, err := os.Create(filepath.Join(dir, url.PathEscape(name)+".native"))
		if err != nil {
			return err
		}
		err = r.query("SELECT "+quoteList(cols)+" FROM "+qname+" FORMAT Native", f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "tables.tsv"), []byte(list.String()), 0o644)
}

// finish saves the databases still on the server and the statements of
// every store from query_log.
func (r *recording) finish() error {
	dbs, err := r.lines("SELECT name FROM system.databases WHERE name NOT IN ('system', 'default') FORMAT TabSeparated")
	if err != nil {
		return err
	}
	for _, db := range dbs {
		if err := r.saveDatabase(unescapeTSV(db)); err != nil {
			return err
		}
	}
	if err := r.query("SYSTEM FLUSH LOGS", io.Discard); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(r.dir, "queries.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	// type 2: QueryFinish. What failed on this server is not the
	// product's working SQL.
	err = r.query(`SELECT query_id, query, Settings.Names AS setting_names, Settings.Values AS setting_values
FROM system.query_log
WHERE type = 2 AND is_initial_query AND (startsWith(query_id, 'personhub-recorded/') OR startsWith(query_id, 'personhub-ingester/'))
ORDER BY query_start_time, event_time FORMAT JSONEachRow`, w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func quoteIdent(s string) string {
	return "`" + strings.NewReplacer("\\", "\\\\", "`", "\\`").Replace(s) + "`"
}

func quoteList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteIdent(unescapeTSV(c))
	}
	return strings.Join(q, ", ")
}

// unescapeTSV undoes ClickHouse's TabSeparated escaping of one field.
func unescapeTSV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
