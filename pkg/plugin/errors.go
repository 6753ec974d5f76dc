package plugin

import (
	"errors"
	"fmt"
)

// Kind says how the API answers an Error.
type Kind int

// Error kinds.
const (
	KindInvalid     Kind = iota + 1 // 400, Attr names the input
	KindForbidden                   // 403
	KindNotFound                    // 404
	KindUnavailable                 // 503: a backing service (e.g. the repository source) failed
)

// Error is a failure the caller can act on; Detail is meant for the user.
type Error struct {
	Kind   Kind
	Attr   string
	Detail string
	Err    error // cause, for logs; not shown
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Detail + ": " + e.Err.Error()
	}
	return e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNotFound: no such plugin or config, or not visible to the
// organization (the two look the same).
var ErrNotFound = &Error{Kind: KindNotFound, Detail: "Not found."}

// Fixed messages of the rules.
var (
	errManagedElsewhere = &Error{Kind: KindForbidden, Detail: "This plugin installation is managed by another organization"}
	errGlobalDenied     = &Error{Kind: KindForbidden, Detail: "This organization can't manage global plugins!"}
	errDeleteGlobal     = &Error{Kind: KindInvalid, Detail: "This plugin is marked as global! Make it local before uninstallation"}
	errNotPluginURL     = &Error{Kind: KindInvalid, Attr: "url", Detail: "Must be a GitHub/GitLab repository or npm package URL!"}
	errNoManifest       = &Error{Kind: KindInvalid, Attr: "url", Detail: "Could not find plugin.json in the plugin"}
)

func invalid(attr, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Attr: attr, Detail: fmt.Sprintf(format, args...)}
}

func unavailable(detail string, err error) *Error {
	return &Error{Kind: KindUnavailable, Detail: detail, Err: err}
}

// IsNotFound reports whether err is ErrNotFound.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindNotFound
}
