package csvexport

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestWriterPages(t *testing.T) {
	pages := []string{
		`[{"id":1,"name":"a"},{"id":2,"props":{"x":true}}]`,
		`[{"id":3,"distinct_ids":["p","q"]}]`,
		`[]`,
		`[{"id":-4,"name":"=evil()"}]`,
	}
	var all []any
	w := NewWriter()
	for _, p := range pages {
		rows := rowsOf(t, p)
		all = append(all, rows...)
		if err := w.AddAll(rows...); err != nil {
			t.Fatal(err)
		}
	}
	if w.Len() != 4 {
		t.Fatalf("Len = %d", w.Len())
	}
	var got, want bytes.Buffer
	n, err := w.WriteTo(&got)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(got.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, got.Len())
	}
	if err := Write(&want, all); err != nil {
		t.Fatal(err)
	}
	const expect = "distinct_ids.0,distinct_ids.1,id,name,props.x\r\n" +
		",,1,a,\r\n,,2,,true\r\np,q,3,,\r\n,,'-4,'=evil(),\r\n"
	if got.String() != expect || want.String() != expect {
		t.Fatalf("Writer:\n%q\nWrite:\n%q\nwant:\n%q", got.String(), want.String(), expect)
	}

	// WriteTo does not consume; more rows may follow.
	if err := w.Add(map[string]any{"z": "last"}); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	if _, err := w.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.String(), ",,,,,last\r\n") || !strings.HasPrefix(got.String(), "distinct_ids.0,distinct_ids.1,id,name,props.x,z\r\n") {
		t.Fatalf("after second Add: %q", got.String())
	}
}

func TestWriterAddErrorLeavesNoTrace(t *testing.T) {
	w := NewWriter()
	if err := w.Add(map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	// "b" is interned before the channel fails to marshal; it must vanish.
	bad := map[string]any{"b": "x", "c": map[string]any{"d": make(chan int)}}
	if err := w.Add(bad); err == nil {
		t.Fatal("want error")
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "a\r\n1\r\n" {
		t.Fatalf("got %q", buf.String())
	}
	if err := Write(&buf, []any{1, bad}); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("Write error = %v", err)
	}
}

func TestWriterSpill(t *testing.T) {
	dir := t.TempDir()
	var rows []any
	for i := range 5000 {
		r := map[string]any{"id": i, "name": fmt.Sprintf("person %d, \"q\"\n", i)}
		if i%7 == 0 {
			r[fmt.Sprintf("prop.k%d", i%50)] = strings.Repeat("v", i%300)
		}
		if i == 4000 {
			r["huge"] = strings.Repeat("h", 3*chunkSize) // larger than a chunk
		}
		rows = append(rows, r)
	}
	var mem bytes.Buffer
	if err := Write(&mem, rows); err != nil {
		t.Fatal(err)
	}

	w := &Writer{SpillThreshold: 4 << 10, TempDir: dir}
	for _, r := range rows {
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if w.spill == nil || w.spillSize == 0 {
		t.Fatal("expected rows to be spilled")
	}
	if w.memSize > w.SpillThreshold {
		t.Fatalf("memSize %d above threshold", w.memSize)
	}
	for pass := range 2 { // replay twice: the spill file is read, not consumed
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), mem.Bytes()) {
			t.Fatalf("pass %d: spilled output differs from in-memory output", pass)
		}
	}
	recs, err := csv.NewReader(bytes.NewReader(mem.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	checkRecords(t, rows, recs)

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("temp files left behind: %v", ents)
	}
	if w.Len() != 0 || w.SpillThreshold != 4<<10 {
		t.Fatalf("Close did not reset: len %d threshold %d", w.Len(), w.SpillThreshold)
	}
	// The Writer is reusable after Close.
	if err := w.Add(map[string]any{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil || out.String() != "a\r\nb\r\n" {
		t.Fatalf("after Close: %q, %v", out.String(), err)
	}
}

func TestWriterSpillError(t *testing.T) {
	w := &Writer{SpillThreshold: 1, TempDir: t.TempDir() + "/missing"}
	if err := w.Add(map[string]any{"a": 1}); err == nil {
		t.Fatal("want error creating spill file")
	}
	if err := w.Add(map[string]any{"a": 2}); err == nil {
		t.Fatal("error must be sticky")
	}
	if _, err := w.WriteTo(new(bytes.Buffer)); err == nil {
		t.Fatal("WriteTo must report the lost rows")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, fmt.Errorf("disk full")
	}
	return len(p), nil
}

func TestWriterOutputError(t *testing.T) {
	rows := make([]any, 0, 20000)
	for i := range 20000 {
		rows = append(rows, map[string]any{"i": i})
	}
	if err := Write(&failWriter{n: 1000}, rows); err == nil {
		t.Fatal("want write error")
	}
	// The single-empty-cell path writes directly; its errors surface too.
	if err := Write(&failWriter{n: 0}, []any{nil}); err == nil {
		t.Fatal("want write error")
	}
}

func BenchmarkWriter(b *testing.B) {
	row := decode(b, `{"id":42,"uuid":"0191-abc","name":"Ann","distinct_ids":["a","b"],
	  "properties":{"email":"x@y","nested":{"k":[1,2]}},"created_at":"2024-01-02T03:04:05Z","is_identified":false}`)
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter()
		for range 1000 {
			if err := w.Add(row); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.WriteTo(new(bytes.Buffer)); err != nil {
			b.Fatal(err)
		}
	}
}
