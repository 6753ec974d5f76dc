package csvexport

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

func FuzzFlattenJSON(f *testing.F) {
	for _, s := range []string{
		`[{"id": 42, "uuid": "u", "name": "n", "distinct_ids": ["a","b"], "properties": {"email": "x", "nested": {"k": [1,2]}}, "created_at": "c", "is_identified": false}]`,
		`[]`, `{}`, `null`, `""`, `-5`, `[{}]`, `[null]`, `[[]]`, `[{"a":null}]`,
		`[{"a.b":1,"a":{"b":2}}]`, `{"":{"":[""]}}`,
		`[{"=x":"+y"},{"@z":"-1"},{"\t":"\r"},{"\r\n":"a\r\nb"}]`,
		`[{"n":12345678901234567890,"e":1e400,"q":"a,\"b\"\nc"}]`,
		`["\u0000", " x", "\\.", "\ufeff=1", "\ud800"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return
		}
		rows, ok := v.([]any)
		if !ok {
			rows = []any{v}
		}
		var buf bytes.Buffer
		if err := Write(&buf, rows); err != nil {
			t.Fatalf("Write: %v", err)
		}
		out := buf.String()
		r := csv.NewReader(strings.NewReader(out))
		r.FieldsPerRecord = -1 // checked below, with a better message
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("output does not parse: %v\n%q", err, out)
		}
		if len(recs) > 0 && len(recs) != len(rows)+1 {
			t.Fatalf("%d rows, %d records\n%q", len(rows), len(recs), out)
		}
		for i, rec := range recs {
			if len(rec) != len(recs[0]) {
				t.Fatalf("record %d: %d fields, header has %d\n%q", i, len(rec), len(recs[0]), out)
			}
			for _, cell := range rec {
				if cell != "" && strings.IndexByte("=+-@\t\r", cell[0]) >= 0 {
					t.Fatalf("record %d: dangerous cell %q", i, cell)
				}
			}
		}
		// Stronger: the output is exactly what the rules predict.
		checkRecords(t, rows, recs)
	})
}
