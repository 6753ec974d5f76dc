package statement

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/google/uuid"
)

// Statement recording, for the portability test (test/portability), which
// replays what the product sends on current ClickHouse as well as on the
// tests' server. With $PERSONHUB_SQL_RECORD naming a folder, every
// statement of a store carries a query id that names its database
// (RecordedPrefix; a writer's ids name it already), so the server's
// query_log (chlocal.WithQueryLog) tells each database's statements apart;
// and the external tables a statement sends, which query_log does not keep,
// are written to <folder>/ext/<escaped query id>.json. Unset, nothing is
// recorded and statements carry no query id but a writer's.

// RecordEnv names the folder statements are recorded under.
const RecordEnv = "PERSONHUB_SQL_RECORD"

// RecordedPrefix starts the query ids of a recorded store's statements
// other than a writer's.
func RecordedPrefix(database string) string {
	return "personhub-recorded/" + url.PathEscape(database) + "/"
}

// WriterPrefix starts the query ids of a consumer's statements (chstore's
// writer.go). The server lists every database's statements together, and
// consumer names are a database's own, so the prefix names both; consumer
// names are JetStream durable names, which never hold '/'.
func WriterPrefix(database, consumer string) string {
	return "personhub-ingester/" + url.PathEscape(database) + "/" + consumer + "/"
}

// DatabaseOfQueryID returns the database a query id of a store's
// statement names (RecordedPrefix or WriterPrefix).
func DatabaseOfQueryID(id string) (string, bool) {
	parts := strings.SplitN(id, "/", 3)
	if len(parts) != 3 || (parts[0] != "personhub-recorded" && parts[0] != "personhub-ingester") {
		return "", false
	}
	db, err := url.PathUnescape(parts[1])
	return db, err == nil
}

// RecordedTable is an external table as recorded: its rows in ClickHouse's
// TabSeparated format.
type RecordedTable struct {
	Name      string `json:"name"`
	Structure string `json:"structure"` // "col Type, ..."
	TSV       string `json:"tsv"`
}

// ExternalFile is where the external tables of the statement with query
// id are recorded under folder.
func ExternalFile(folder, id string) string {
	return filepath.Join(folder, "ext", url.PathEscape(id)+".json")
}

// extKey is the context key of the external tables a statement sends.
type extKey struct{}

// WithExternalTables sends tables with the statements made with ctx, as
// clickhouse.WithExternalTable does, and keeps them where a recording
// store finds them.
func WithExternalTables(ctx context.Context, tables ...*ext.Table) context.Context {
	prev, _ := ctx.Value(extKey{}).([]*ext.Table)
	ctx = context.WithValue(ctx, extKey{}, append(append([]*ext.Table(nil), prev...), tables...))
	return clickhouse.Context(ctx, clickhouse.WithExternalTable(tables...))
}

// RecordExternal writes the external tables of ctx for the statement with
// query id; a failure to write only loses the recording.
func RecordExternal(folder, id string, ctx context.Context) {
	tables, _ := ctx.Value(extKey{}).([]*ext.Table)
	if len(tables) == 0 {
		return
	}
	out := make([]RecordedTable, 0, len(tables))
	for _, t := range tables {
		out = append(out, RecordedTable{Name: t.Name(), Structure: t.Structure(), TSV: tableTSV(t)})
	}
	body, err := json.Marshal(out)
	if err != nil {
		return
	}
	path := ExternalFile(folder, id)
	if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
		_ = os.WriteFile(path, body, 0o644)
	}
}

// tableTSV renders an external table's rows as TabSeparated text.
func tableTSV(t *ext.Table) string {
	cols := t.Block().Columns
	if len(cols) == 0 {
		return ""
	}
	var b strings.Builder
	for i := 0; i < cols[0].Rows(); i++ {
		for j, c := range cols {
			if j > 0 {
				b.WriteByte('\t')
			}
			switch v := c.Row(i, false).(type) {
			case string:
				b.WriteString(EscapeTSV(v))
			default:
				fmt.Fprint(&b, v)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// EscapeTSV escapes a string for ClickHouse's TabSeparated format.
func EscapeTSV(s string) string {
	return tsvEscaper.Replace(s)
}

var tsvEscaper = strings.NewReplacer("\\", "\\\\", "\t", "\\t", "\n", "\\n", "\r", "\\r", "\x00", "\\0")

// RecordingID returns the query id a recording store gives a statement
// that has none.
func RecordingID(database string) string { return RecordedPrefix(database) + uuid.NewString() }
