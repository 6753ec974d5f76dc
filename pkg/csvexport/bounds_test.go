package csvexport

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestWriterColumnCap(t *testing.T) {
	tests := []struct {
		name string
		w    *Writer
	}{
		{"columns", &Writer{MaxColumns: 3}},
		{"name bytes", &Writer{MaxColumnBytes: 3}}, // "a", "b", "c" fit; "d" does not
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			if err := w.AddAll(map[string]any{"a": 1, "b": 2}, map[string]any{"c": 3}); err != nil {
				t.Fatal(err)
			}
			err := w.Add(map[string]any{"a": 4, "d": 5})
			if !errors.Is(err, ErrTooManyColumns) {
				t.Fatalf("Add past the cap: %v", err)
			}
			// Known columns still take rows.
			if err := w.Add(map[string]any{"a": 6}); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := w.WriteTo(&out); err != nil {
				t.Fatal(err)
			}
			if want := "a,b,c\r\n1,2,\r\n,,3\r\n6,,\r\n"; out.String() != want {
				t.Fatalf("got %q, want %q", out.String(), want)
			}
		})
	}
}

func TestNewWriterDefaultCaps(t *testing.T) {
	w := NewWriter()
	defer w.Close()
	row := map[string]any{}
	for i := range DefaultMaxColumns {
		row[fmt.Sprintf("k%d", i)] = i
	}
	if err := w.Add(row); err != nil {
		t.Fatalf("%d columns: %v", DefaultMaxColumns, err)
	}
	if err := w.Add(map[string]any{"one more": 1}); !errors.Is(err, ErrTooManyColumns) {
		t.Fatalf("column %d: %v", DefaultMaxColumns+1, err)
	}
	w2 := NewWriter()
	defer w2.Close()
	if err := w2.Add(map[string]any{strings.Repeat("k", DefaultMaxColumnBytes+1): 1}); !errors.Is(err, ErrTooManyColumns) {
		t.Fatalf("long column name: %v", err)
	}
	// Negative: no cap.
	w3 := &Writer{MaxColumns: -1}
	row[strings.Repeat("k", 10)] = 1
	if err := w3.Add(row); err != nil {
		t.Fatal(err)
	}
}

// liveHeap is the heap in use after a collection: what the export retains.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapSampler is an output that measures the live heap every few writes.
type heapSampler struct {
	writes, peak uint64
	n            int64
}

func (h *heapSampler) Write(p []byte) (int, error) {
	if h.writes++; h.writes%64 == 0 {
		h.peak = max(h.peak, liveHeap())
	}
	h.n += int64(len(p))
	return len(p), nil
}

// A NewWriter's memory does not grow with the number of rows: 200k rows
// (about 18 MB of CSV) are exported while the live heap stays within a few
// MiB of where it started, and the spill file is gone once closed.
func TestNewWriterMemoryBounded(t *testing.T) {
	const rows = 200_000
	dir := t.TempDir()
	w := NewWriter()
	w.TempDir = dir
	row := map[string]any{
		"id": 0, "uuid": "0191f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00", "distinct_ids": []any{"anon-0", "user-0"},
		"properties": map[string]any{"email": "", "plan": "pro", "n": 0},
	}
	base := liveHeap()
	var peak uint64
	for i := range rows {
		row["id"] = i
		row["properties"].(map[string]any)["email"] = fmt.Sprintf("person%d@example.com", i)
		if err := w.Add(row); err != nil {
			t.Fatal(err)
		}
		if i%20_000 == 0 {
			peak = max(peak, liveHeap())
		}
	}
	if w.spill == nil {
		t.Fatal("rows were not spilled")
	}
	out := &heapSampler{}
	if _, err := w.WriteTo(out); err != nil {
		t.Fatal(err)
	}
	peak = max(peak, out.peak)
	if out.n < 16<<20 {
		t.Fatalf("only %d bytes written", out.n)
	}
	const bound = 6 << 20
	if peak > base && peak-base > bound {
		t.Fatalf("live heap grew by %d bytes exporting %d bytes of CSV (bound %d)", peak-base, out.n, bound)
	}
	t.Logf("%d rows, %d bytes of CSV, live heap growth %d bytes", rows, out.n, int64(peak)-int64(base))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spill files left: %v", ents)
	}
}
