// Package schema holds the ClickHouse migrations, numbered and append-only.
// A file's statements are separated by lines holding only ';'.
package schema

import "embed"

// Files holds the migrations, NNNN_name.sql.
//
//go:embed *.sql
var Files embed.FS
