// Package csvexport renders lists of JSON objects (API responses such as
// persons) as CSV, for endpoints that accept format=csv.
//
// # Flattening
//
// Every row is flattened into key/cell pairs by [Flatten]:
//
//   - Nested object keys are joined with "." ("properties.email").
//   - Array elements are addressed by index ("distinct_ids.0",
//     "properties.nested.k.1").
//   - Strings are kept as-is, numbers keep their exact JSON text (values
//     are decoded with json.Decoder.UseNumber, so 12345678901234567890 and
//     1e400 are never reformatted), booleans become "true"/"false" and
//     null becomes an empty cell (the column still exists).
//   - Empty objects and empty arrays produce no column at all.
//   - A row that is not an object is flattened too: an array row yields
//     columns "0", "1", ...; a scalar row yields one column whose name is
//     the empty string (the empty path).
//   - Values that are not plain decoded JSON (structs, typed maps and
//     slices, float64, json.RawMessage, ...) are round-tripped through
//     encoding/json (Marshal, then Decode with UseNumber), so struct tags
//     and json.Marshaler implementations are respected.
//   - Invalid UTF-8 in keys or strings is replaced by U+FFFD, as
//     encoding/json would do.
//   - Key collisions ({"a": {"b": 1}, "a.b": 2} both produce "a.b") are
//     resolved deterministically: object keys are visited in sorted order
//     and the first value wins (here 1, from "a").
//
// # CSV output
//
// The header is the union of the flattened keys of all rows, sorted
// byte-wise on the keys themselves, before [Sanitize] adds any quote prefix
// (so "distinct_ids.10" sorts before "distinct_ids.2"); cells a row does
// not have are empty. Because of the prefix, the keys "=a" and "'=a" would
// both be shown as '=a; they remain separate columns. Output is produced by encoding/csv (RFC 4180
// quoting) with UseCRLF set, i.e. records end in "\r\n", which is what
// spreadsheet applications expect.
//
// Every header name and cell goes through [Sanitize] first:
//
//   - Formula injection: a value a spreadsheet could evaluate is prefixed
//     with a single quote ('), which spreadsheets take as a text marker.
//     That is a value starting with any control character (tab, CR, LF,
//     NUL, ...), or whose first character after leading blanks (white
//     space, controls, invisible format characters such as U+FEFF) is '=',
//     '+', '-' or '@' or their fullwidth forms ([IsFormula]): " =1+1",
//     "\r=1+1" and "\n@x" are all quoted. This includes negative numbers:
//     the writer sees JSON numbers as text and does not tell them apart, so
//     -5 is written as '-5. That is the conservative OWASP recommendation;
//     spreadsheets display such cells as text.
//   - Line breaks inside a value ("\r\n" and a lone "\r") are normalized to
//     "\n". encoding/csv with UseCRLF would otherwise silently drop a lone
//     "\r", and every CSV reader turns an embedded "\r\n" into "\n" anyway.
//     Inside quoted cells "\n" is emitted as "\r\n".
//
// A record consisting of a single empty cell is written as `""` instead of
// an empty line, because CSV readers (encoding/csv included) skip empty
// lines and the row would be lost.
//
// If no row contributes any column (in particular for an empty row list,
// or rows that are all {}), nothing at all is written: not even a header
// line, since a CSV file with zero columns cannot represent its rows.
//
// # Large exports
//
// The header depends on every row, so nothing can be written before the
// last row is known. [Writer] therefore works in two passes: Add flattens a
// row and keeps only a compact binary encoding of it (interned column ids
// plus the cell bytes), never the original value; encoded rows beyond
// [Writer.SpillThreshold] bytes move to a temporary spill file (unlinked as
// soon as it is created, where the OS allows, so it cannot outlive the
// process; Close releases it). WriteTo then writes the header and streams the
// rows back from the file through a 64 KiB buffer.
//
// A Writer from [NewWriter] holds at most DefaultSpillThreshold (1 MiB) of
// rows in memory, plus the column names, which are capped at
// DefaultMaxColumns (10,000) distinct columns and DefaultMaxColumnBytes
// (4 MiB) of names: Add refuses a row that would go past a cap with
// [ErrTooManyColumns]. Memory is therefore bounded whatever the number of
// rows (TestNewWriterMemoryBounded exports 200k rows).
package csvexport
