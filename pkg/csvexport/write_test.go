package csvexport

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

// rowsOf decodes a JSON array into rows.
func rowsOf(t testing.TB, s string) []any {
	t.Helper()
	return decode(t, s).([]any)
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty list writes nothing", `[]`, ``},
		{"only empty objects write nothing", `[{},{"a":{}},{"b":[]}]`, ``},
		{"union and sorting", `[{"b":1,"a":2},{"c":3},{"a":4}]`,
			"a,b,c\r\n2,1,\r\n,,3\r\n4,,\r\n"},
		{"byte-wise sort", `[{"ids":[0,1,2,3,4,5,6,7,8,9,10],"B":1,"a":1,"_":1}]`,
			"B,_,a,ids.0,ids.1,ids.10,ids.2,ids.3,ids.4,ids.5,ids.6,ids.7,ids.8,ids.9\r\n1,1,1,0,1,10,2,3,4,5,6,7,8,9\r\n"},
		{"nesting and arrays", `[{"p":{"e":"x","n":{"k":[1,2]}},"d":["a","b"]}]`,
			"d.0,d.1,p.e,p.n.k.0,p.n.k.1\r\na,b,x,1,2\r\n"},
		{"empty object row keeps its line", `[{"a":1},{}]`, "a\r\n1\r\n\"\"\r\n"},
		{"null cells", `[{"a":null,"b":1},{"a":null}]`, "a,b\r\n,1\r\n,\r\n"},
		{"single empty column", `[{"a":null},{"a":""},{"a":"x"}]`, "a\r\n\"\"\r\n\"\"\r\nx\r\n"},
		{"scalar row with empty name", `[""]`, "\"\"\r\n\"\"\r\n"},
		{"quoting", `[{"c":"a,b","q":"say \"hi\"","n":"l1\nl2","s":" lead","p":"\\."}]`,
			"c,n,p,q,s\r\n\"a,b\",\"l1\r\nl2\",\"\\.\",\"say \"\"hi\"\"\",\" lead\"\r\n"},
		{"carriage returns normalized", `[{"a":"x\r\ny\rz"}]`, "a\r\n\"x\r\ny\r\nz\"\r\n"},
		{"unicode (byte-wise order)", `[{"名前":"José 🚀, ok","ü":"ß"}]`, "ü,名前\r\nß,\"José 🚀, ok\"\r\n"},
		{"numbers exact", `[{"big":12345678901234567890,"e":1e400,"f":0.1000,"neg":-5}]`,
			"big,e,f,neg\r\n12345678901234567890,1e400,0.1000,'-5\r\n"},
		{"booleans", `[{"t":true,"f":false}]`, "f,t\r\nfalse,true\r\n"},
		{"header injection", `[{"=cmd":1,"@x":2,"+y":3,"-z":4,"\tt":5,"\rr":6}]`,
			"'\tt,\"'\r\nr\",'+y,'-z,'=cmd,'@x\r\n5,6,3,4,1,2\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, rowsOf(t, tt.in)); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Fatalf("Write(%s)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriteNil(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, nil); err != nil || buf.Len() != 0 {
		t.Fatalf("Write(nil) = %v, %q", err, buf.String())
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"=1+1", "'=1+1"},
		{"+1", "'+1"},
		{"-5", "'-5"},
		{"-", "'-"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"},
		{"\rx", "'\nx"},
		{"\r\nx", "'\nx"},
		{"a=b", "a=b"},
		{"'already", "'already"},
		{"'=already", "'=already"},
		{"a\r\nb\rc\n", "a\nb\nc\n"},
		{"é=", "é="},
		// Line breaks and other controls lead: always quoted.
		{"\nx", "'\nx"},
		{"\x00x", "'\x00x"},
		{"\x7fx", "'\x7fx"},
		// A formula sign after leading blanks.
		{"\r=1+1", "'\n=1+1"},
		{"\n=1+1", "'\n=1+1"},
		{"\r\n=1+1", "'\n=1+1"},
		{"\n\r\t @x", "'\n\n\t @x"},
		{" =x", "' =x"},
		{"   -1", "'   -1"},
		{"\u00a0=x", "'\u00a0=x"},
		{"\u3000+x", "'\u3000+x"},
		{"\ufeff=1", "'\ufeff=1"},
		{"\u200b@x", "'\u200b@x"},
		{"\u202e=x", "'\u202e=x"},
		// Fullwidth signs.
		{"\uff1d1+1", "'\uff1d1+1"},
		{"\uff0b1", "'\uff0b1"},
		{"\uff0d1", "'\uff0d1"},
		{"\uff20x", "'\uff20x"},
		// Blanks then text, or a sign after text: not a formula.
		{" x", " x"},
		{" x=1", " x=1"},
		{"\u00a0", "\u00a0"},
		{"x\n=1", "x\n=1"},
		{"\ufffd=", "\ufffd="},
		{"\xff=", "\xff="},
	}
	for _, tt := range tests {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := Sanitize(Sanitize(tt.in)); got != tt.want {
			t.Errorf("Sanitize twice (%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Each dangerous leading character, in a cell and as a number, must come
// back from a CSV reader with the quote prefix.
func TestInjectionRoundTrip(t *testing.T) {
	for _, c := range []string{"=", "+", "-", "@", "\t", "\r", "\n", "\r=", "\n=", "\r\n=", " =", "\t@", "\ufeff+", "\uff1d"} {
		v := c + "HYPERLINK(\"http://x\")"
		var buf bytes.Buffer
		if err := Write(&buf, []any{map[string]any{c + "k": v}}); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 {
			t.Fatalf("%q: got %d records", c, len(recs))
		}
		// What a CSV reader gives back: line breaks as "\n".
		lf := strings.NewReplacer("\r\n", "\n", "\r", "\n")
		want := "'" + lf.Replace(v)
		if recs[1][0] != want || recs[0][0] != "'"+lf.Replace(c)+"k" {
			t.Errorf("%q: got header %q cell %q", c, recs[0][0], recs[1][0])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	in := `[
	  {"id":42,"uuid":"0191","name":"Ann, \"the\" admin","distinct_ids":["a","b"],
	   "properties":{"email":"x@y","nested":{"k":[1,2]},"bio":"line1\nline2","neg":-3.5,"f":"=1+1"},
	   "created_at":"2024-01-02T03:04:05Z","is_identified":false},
	  {"id":12345678901234567890,"name":"Zoë 名前","distinct_ids":["c"],"properties":{},"extra":null},
	  {"id":7,"is_identified":true,"properties":{"nested":{"k":[]},"big":1e400}}
	]`
	rows := rowsOf(t, in)
	var buf bytes.Buffer
	if err := Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rows)+1 {
		t.Fatalf("got %d records, want %d", len(recs), len(rows)+1)
	}
	checkRecords(t, rows, recs)
}

// checkRecords verifies that recs (read back by encoding/csv) is exactly
// what the flattening and sanitizing rules predict for rows.
func checkRecords(t testing.TB, rows []any, recs [][]string) {
	t.Helper()
	flat := make([]map[string]string, len(rows))
	union := map[string]bool{}
	for i, r := range rows {
		m, err := Flatten(r)
		if err != nil {
			t.Fatal(err)
		}
		flat[i] = m
		for k := range m {
			union[k] = true
		}
	}
	if len(union) == 0 {
		if len(recs) != 0 {
			t.Fatalf("no columns, but %d records", len(recs))
		}
		return
	}
	keys := make([]string, 0, len(union))
	for k := range union {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(recs) != len(rows)+1 {
		t.Fatalf("got %d records, want %d", len(recs), len(rows)+1)
	}
	for c, k := range keys {
		if recs[0][c] != Sanitize(k) {
			t.Fatalf("header[%d] = %q, want %q", c, recs[0][c], Sanitize(k))
		}
	}
	for i, m := range flat {
		rec := recs[i+1]
		if len(rec) != len(keys) {
			t.Fatalf("record %d has %d fields, header %d", i, len(rec), len(keys))
		}
		for c, k := range keys {
			if want := Sanitize(m[k]); rec[c] != want {
				t.Fatalf("row %d col %q = %q, want %q", i, k, rec[c], want)
			}
		}
	}
}
