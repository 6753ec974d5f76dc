package csvexport

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func FuzzFlattenJSON(f *testing.F) {
	for _, s := range []string{
		`[{"id": 42, "uuid": "u", "name": "n", "distinct_ids": ["a","b"], "properties": {"email": "x", "nested": {"k": [1,2]}}, "created_at": "c", "is_identified": false}]`,
		`[]`, `{}`, `null`, `""`, `-5`, `[{}]`, `[null]`, `[[]]`, `[{"a":null}]`,
		`[{"a.b":1,"a":{"b":2}}]`, `{"":{"":[""]}}`,
		`[{"=x":"+y"},{"@z":"-1"},{"\t":"\r"},{"\r\n":"a\r\nb"}]`,
		`[{"n":12345678901234567890,"e":1e400,"q":"a,\"b\"\nc"}]`,
		`["\u0000", " x", "\\.", "\ufeff=1", "\ud800"]`,
		`[{"a":"\r=1","b":"\n=1","c":"\r\n@x","d":" \t-1","e":"\u00a0+1","f":"\uff1d1","\n=h":"\u200b=1"}]`,
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
				if spreadsheetEvaluates(cell) {
					t.Fatalf("record %d: a spreadsheet would evaluate cell %q", i, cell)
				}
			}
		}
		// Stronger: the output is exactly what the rules predict.
		checkRecords(t, rows, recs)
	})
}

// spreadsheetEvaluates reports whether a cell, as read back from the CSV, is
// one a spreadsheet could evaluate: it does not start with the quote that
// marks text, and it starts with a control character, or its first
// character after any blanks (white space, controls, format characters) is a
// formula sign, ASCII or fullwidth. Written independently of IsFormula.
func spreadsheetEvaluates(cell string) bool {
	if cell == "" || cell[0] == '\'' {
		return false
	}
	if first, _ := utf8.DecodeRuneInString(cell); unicode.Is(unicode.Cc, first) {
		return true
	}
	rest := strings.TrimLeftFunc(cell, func(r rune) bool {
		return unicode.In(r, unicode.White_Space, unicode.Cc, unicode.Cf)
	})
	return rest != "" && strings.ContainsRune("=+-@＝＋－＠", []rune(rest)[0])
}
