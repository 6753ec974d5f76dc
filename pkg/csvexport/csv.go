package csvexport

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Write writes rows (each a value accepted by [Flatten]) as CSV: a header
// with the sorted union of all flattened keys, then one record per row.
// If no row contributes a column (for example an empty rows slice), nothing
// is written.
func Write(w io.Writer, rows []any) error {
	var cw Writer
	defer cw.Close()
	for i, r := range rows {
		if err := cw.Add(r); err != nil {
			return fmt.Errorf("%w (row %d)", err, i)
		}
	}
	_, err := cw.WriteTo(w)
	return err
}

// crlf normalizes embedded line breaks to "\n".
var crlf = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// Sanitize makes one header name or cell safe to put in a CSV file opened by
// a spreadsheet:
//
//   - a value a spreadsheet could evaluate as a formula (see [IsFormula]) is
//     prefixed with a single quote, which spreadsheets take as "this cell is
//     text" (negative numbers included: "-5" becomes "'-5");
//   - "\r\n" and lone "\r" inside the value become "\n" (see the package
//     documentation for why).
//
// Quoting is left to encoding/csv.
func Sanitize(s string) string {
	if IsFormula(s) {
		s = "'" + s
	}
	if strings.IndexByte(s, '\r') >= 0 {
		s = crlf.Replace(s)
	}
	return s
}

// IsFormula reports whether a spreadsheet opening s as a cell could read it
// as a formula (OWASP's CSV injection list, widened):
//
//   - s starts with a control character (tab, CR, LF, NUL, ...): some
//     importers drop or split on them and evaluate what follows;
//   - the first character that is not blank (Unicode white space, control or
//     invisible format character such as U+FEFF or U+200B) is '=', '+', '-'
//     or '@', or its fullwidth form: importers that trim leading blanks, or
//     normalize fullwidth signs, evaluate " =1+1" and "＝1+1" too.
//
// A value starting with a quote is never a formula, so Sanitize is
// idempotent.
func IsFormula(s string) bool {
	for i, r := range s {
		switch {
		case i == 0 && (r < 0x20 || r == 0x7f):
			return true
		case isFormulaSign(r):
			return true
		case unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			// blank: look further
		default:
			return false
		}
	}
	return false
}

// isFormulaSign reports whether r starts a formula when it leads a cell.
func isFormulaSign(r rune) bool {
	switch r {
	case '=', '+', '-', '@', '\uFF1D', '\uFF0B', '\uFF0D', '\uFF20':
		return true
	}
	return false
}

// recordWriter wraps csv.Writer to keep rows made of one empty cell from
// turning into empty lines, which CSV readers skip.
type recordWriter struct {
	out io.Writer // the writer underneath csv
	csv *csv.Writer
}

func newRecordWriter(out io.Writer) *recordWriter {
	cw := csv.NewWriter(out)
	cw.UseCRLF = true
	return &recordWriter{out: out, csv: cw}
}

func (r *recordWriter) write(rec []string) error {
	if len(rec) != 1 || rec[0] != "" {
		return r.csv.Write(rec)
	}
	// encoding/csv never quotes an empty field; write `""` ourselves after
	// draining what csv has buffered so the output stays in order.
	r.csv.Flush()
	if err := r.csv.Error(); err != nil {
		return err
	}
	_, err := io.WriteString(r.out, "\"\"\r\n")
	return err
}

func (r *recordWriter) flush() error {
	r.csv.Flush()
	return r.csv.Error()
}

// countingWriter counts the bytes written through it, for WriteTo.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
