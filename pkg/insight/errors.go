// Package insight holds the filter of PostHog's legacy insight (actor)
// routes and the queries that answer "which persons are behind this
// number": trends, stickiness and lifecycle, computed in ClickHouse over
// the stored events (docs/analysis.md).
package insight

import "fmt"

// Error is an invalid parameter; Attr names it. The HTTP layer answers it
// with 400.
type Error struct {
	Attr   string
	Detail string
}

func (e *Error) Error() string { return e.Attr + ": " + e.Detail }

func invalidf(attr, format string, a ...any) *Error {
	return &Error{Attr: attr, Detail: fmt.Sprintf(format, a...)}
}
