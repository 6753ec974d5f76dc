package csvexport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// chunkSize is the allocation unit for encoded rows kept in memory. Rows are
// appended to fixed chunks instead of one growing slice, so a large export
// never needs a doubling copy of everything accumulated so far.
const chunkSize = 64 << 10

var errCorrupt = errors.New("csvexport: corrupt row buffer")

// Limits of a [Writer] made by [NewWriter]. With them an export holds at most
// about DefaultSpillThreshold bytes of rows plus the column names in memory,
// however many rows it has.
const (
	// DefaultSpillThreshold is the bytes of encoded rows kept in memory
	// before they move to the spill file.
	DefaultSpillThreshold = 1 << 20
	// DefaultMaxColumns caps the distinct columns of one export.
	DefaultMaxColumns = 10_000
	// DefaultMaxColumnBytes caps the total bytes of the column names.
	DefaultMaxColumnBytes = 4 << 20
)

// ErrTooManyColumns is returned (wrapped) by Add when a row would take the
// export past MaxColumns or MaxColumnBytes. The row is not added; the rows
// added before stay.
var ErrTooManyColumns = errors.New("csvexport: too many columns")

// Writer accumulates rows page by page and writes them as one CSV document
// with a sorted header once all rows are known.
//
// Add keeps only a compact encoding of each flattened row: a varint column id
// and the cell bytes per non-missing cell; column names are interned once for
// the whole export. The zero value is ready to use. A Writer must not be used
// from several goroutines at once.
type Writer struct {
	// SpillThreshold, if positive, bounds the bytes of encoded rows kept in
	// memory: once exceeded they are appended to a temporary file and read
	// back by WriteTo. Zero or negative keeps everything in memory. Call
	// Close to release the file.
	SpillThreshold int
	// TempDir is where the spill file is created; "" means os.TempDir().
	TempDir string
	// MaxColumns caps the number of distinct columns (0 means
	// DefaultMaxColumns, negative means no cap): the header must be held in
	// memory until the last row is known.
	MaxColumns int
	// MaxColumnBytes caps the total bytes of the distinct column names (0
	// means DefaultMaxColumnBytes, negative means no cap).
	MaxColumnBytes int

	ids       map[string]uint32 // column name -> id
	names     []string          // id -> column name
	nameBytes int               // total bytes of names
	tooWide   bool              // the row being added exceeds a column cap
	seen      []uint64          // id -> generation of the last row that set it
	gen       uint64            // current row's generation

	rowIDs  []uint32 // scratch: cells of the row being added
	rowVals []string
	enc     []byte // scratch: encoded row
	walker  walker

	rows    int
	chunks  [][]byte // encoded rows not spilled yet
	memSize int

	spill     *os.File
	spillName string // set if the file could not be unlinked right away
	spillSize int64
	err       error // sticky: spilling failed and rows were lost
}

// NewWriter returns an empty Writer with bounded memory: rows spill to a
// temporary file past DefaultSpillThreshold bytes, and the column caps are
// the defaults. (The zero Writer keeps every row in memory.)
func NewWriter() *Writer { return &Writer{SpillThreshold: DefaultSpillThreshold} }

// Len returns the number of rows added so far.
func (w *Writer) Len() int { return w.rows }

// Add flattens v (any value accepted by [Flatten]) and appends it as a row.
// If flattening fails, the row is not added and the Writer is unchanged.
func (w *Writer) Add(v any) error {
	if w.err != nil {
		return w.err
	}
	if w.ids == nil {
		w.ids = make(map[string]uint32)
		w.walker.emit = w.emit
	}
	w.gen++
	nkeys := len(w.names)
	w.rowIDs, w.rowVals = w.rowIDs[:0], w.rowVals[:0]
	err := w.walker.walk(v, 0)
	w.walker.path = w.walker.path[:0]
	if err == nil && w.tooWide {
		err = fmt.Errorf("%w (at most %d columns, %d bytes of column names)",
			ErrTooManyColumns, limit(w.MaxColumns, DefaultMaxColumns), limit(w.MaxColumnBytes, DefaultMaxColumnBytes))
	}
	w.tooWide = false
	if err != nil {
		for _, n := range w.names[nkeys:] {
			delete(w.ids, n)
			w.nameBytes -= len(n)
		}
		clear(w.names[nkeys:])
		w.names, w.seen = w.names[:nkeys], w.seen[:nkeys]
		clear(w.rowVals)
		return err
	}
	w.encodeRow()
	clear(w.rowVals) // do not pin the caller's strings
	w.rows++
	return w.store()
}

// limit resolves a cap field: 0 is the default, negative is no cap.
func limit(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return math.MaxInt
	}
	return v
}

// AddAll adds several rows, stopping at the first error.
func (w *Writer) AddAll(rows ...any) error {
	for _, r := range rows {
		if err := w.Add(r); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) emit(key []byte, val string) {
	id, ok := w.ids[string(key)]
	if !ok {
		if len(w.names) >= limit(w.MaxColumns, DefaultMaxColumns) ||
			w.nameBytes+len(key) > limit(w.MaxColumnBytes, DefaultMaxColumnBytes) {
			w.tooWide = true // Add rolls the row back
			return
		}
		w.nameBytes += len(key)
		id = uint32(len(w.names))
		name := string(key)
		w.ids[name] = id
		w.names = append(w.names, name)
		w.seen = append(w.seen, 0)
	}
	if w.seen[id] == w.gen { // collision: the first value wins
		return
	}
	w.seen[id] = w.gen
	w.rowIDs = append(w.rowIDs, id)
	w.rowVals = append(w.rowVals, val)
}

// encodeRow encodes the scratch row into w.enc as
//
//	uvarint(n) n×uvarint(id) n×uvarint(len(value)) value bytes...
func (w *Writer) encodeRow() {
	b := binary.AppendUvarint(w.enc[:0], uint64(len(w.rowIDs)))
	for _, id := range w.rowIDs {
		b = binary.AppendUvarint(b, uint64(id))
	}
	for _, v := range w.rowVals {
		b = binary.AppendUvarint(b, uint64(len(v)))
	}
	for _, v := range w.rowVals {
		b = append(b, v...)
	}
	w.enc = b
}

// store moves the encoded row into the chunk list, spilling when needed.
func (w *Writer) store() error {
	last := len(w.chunks) - 1
	if last < 0 || cap(w.chunks[last])-len(w.chunks[last]) < len(w.enc) {
		w.chunks = append(w.chunks, make([]byte, 0, max(chunkSize, len(w.enc))))
		last++
	}
	w.chunks[last] = append(w.chunks[last], w.enc...)
	w.memSize += len(w.enc)
	if len(w.enc) > chunkSize {
		w.enc = nil // do not keep an oversized scratch buffer
	}
	if w.SpillThreshold > 0 && w.memSize > w.SpillThreshold {
		if err := w.spillChunks(); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

func (w *Writer) spillChunks() error {
	if w.spill == nil {
		f, err := os.CreateTemp(w.TempDir, "csvexport-*.rows")
		if err != nil {
			return err
		}
		// Unlink at once where the OS allows it (Unix), so the file cannot
		// outlive the process; otherwise Close removes it.
		if os.Remove(f.Name()) != nil {
			w.spillName = f.Name()
		}
		w.spill = f
	}
	for _, c := range w.chunks {
		n, err := w.spill.Write(c)
		w.spillSize += int64(n)
		if err != nil {
			return err
		}
	}
	clear(w.chunks)
	w.chunks = w.chunks[:0]
	w.memSize = 0
	return nil
}

// Close releases the spill file, if any, and resets the Writer to empty
// (keeping SpillThreshold, TempDir and the caps).
func (w *Writer) Close() error {
	var err error
	if w.spill != nil {
		err = w.spill.Close()
		if w.spillName != "" {
			if rerr := os.Remove(w.spillName); err == nil {
				err = rerr
			}
		}
	}
	*w = Writer{SpillThreshold: w.SpillThreshold, TempDir: w.TempDir, MaxColumns: w.MaxColumns, MaxColumnBytes: w.MaxColumnBytes}
	return err
}

// WriteTo writes the header and all rows added so far to out, and returns
// the number of bytes written. It does not consume the rows: it may be
// called again, and more rows may be added afterwards. If no row has any
// column, nothing is written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(w.names) == 0 {
		return 0, nil
	}
	order := make([]uint32, len(w.names)) // column -> id
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(w.names[a], w.names[b]) })
	col := make([]int, len(order)) // id -> column
	record := make([]string, len(order))
	for c, id := range order {
		col[id] = c
		record[c] = Sanitize(w.names[id])
	}

	cnt := &countingWriter{w: out}
	bw := bufio.NewWriterSize(cnt, 64<<10)
	rw := newRecordWriter(bw)
	if err := rw.write(record); err != nil {
		return cnt.n, err
	}

	srcs := make([]io.Reader, 0, len(w.chunks)+1)
	if w.spill != nil {
		srcs = append(srcs, io.NewSectionReader(w.spill, 0, w.spillSize))
	}
	for _, c := range w.chunks {
		srcs = append(srcs, bytes.NewReader(c))
	}
	dec := rowDecoder{r: bufio.NewReaderSize(io.MultiReader(srcs...), 64<<10), ncols: len(order)}
	for range w.rows {
		if err := dec.next(); err != nil {
			return cnt.n, err
		}
		clear(record)
		for i, id := range dec.ids {
			record[col[id]] = Sanitize(dec.vals[i])
		}
		if err := rw.write(record); err != nil {
			return cnt.n, err
		}
	}
	if err := rw.flush(); err != nil {
		return cnt.n, err
	}
	err := bw.Flush()
	return cnt.n, err
}

// rowDecoder reads rows encoded by encodeRow.
type rowDecoder struct {
	r     *bufio.Reader
	ncols int
	ids   []uint32
	lens  []int
	vals  []string
	buf   []byte
}

func (d *rowDecoder) next() error {
	n, err := d.uvarint(d.ncols)
	if err != nil {
		return err
	}
	d.ids, d.lens, d.vals = d.ids[:0], d.lens[:0], d.vals[:0]
	for range n {
		id, err := d.uvarint(d.ncols - 1)
		if err != nil {
			return err
		}
		d.ids = append(d.ids, uint32(id))
	}
	total := 0
	for range n {
		l, err := d.uvarint(1<<31 - 1)
		if err != nil {
			return err
		}
		d.lens = append(d.lens, l)
		total += l
	}
	d.buf = slices.Grow(d.buf[:0], total)[:total]
	if _, err := io.ReadFull(d.r, d.buf); err != nil {
		return errCorrupt
	}
	s := string(d.buf) // one allocation per row; cells are substrings
	for _, l := range d.lens {
		d.vals = append(d.vals, s[:l])
		s = s[l:]
	}
	return nil
}

func (d *rowDecoder) uvarint(limit int) (int, error) {
	v, err := binary.ReadUvarint(d.r)
	if err != nil || v > uint64(limit) {
		return 0, errCorrupt
	}
	return int(v), nil
}
