package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/csvexport"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/propfilter"
)

// Error is an API error; every error response has this body.
type Error struct {
	Status int     `json:"-"`
	Type   string  `json:"type"`
	Code   string  `json:"code"`
	Detail string  `json:"detail"`
	Attr   *string `json:"attr"`
}

func (e *Error) Error() string { return e.Detail }

func attr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid is a 400 validation error about one input field.
func invalid(field, detail string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "invalid_input", Detail: detail, Attr: attr(field)}
}

func required(field string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "required", Detail: "This field is required.", Attr: attr(field)}
}

var (
	errNotAuthenticated = &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "not_authenticated", Detail: "Authentication credentials were not provided."}
	errBadKey           = &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "authentication_failed", Detail: "Personal API key is invalid."}
	errNotFound         = &Error{Status: http.StatusNotFound, Type: "invalid_request", Code: "not_found", Detail: "Not found."}
	errMethod           = &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request", Code: "method_not_allowed", Detail: "Method not allowed."}
	errUnavailable      = &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Detail: "A backing service is unavailable; try again shortly."}
)

func missingScope(scope string) *Error {
	return &Error{Status: http.StatusForbidden, Type: "authentication_error", Code: "permission_denied",
		Detail: "API key missing required scope '" + scope + "'"}
}

// toAPIError maps domain errors to API errors; anything unknown is a 500
// and is logged.
func toAPIError(err error) (*Error, bool) {
	var apiErr *Error
	var filterErr *propfilter.Error
	var pluginErr *plugin.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr, false
	case errors.As(err, &filterErr):
		return invalid("properties", "Properties are unparsable! "+filterErr.Detail), false
	case errors.Is(err, csvexport.ErrTooManyColumns):
		return invalid("format", "The CSV export has too many columns (at most "+strconv.Itoa(csvexport.DefaultMaxColumns)+
			", the union of the rows' properties); narrow it with a properties filter or use format=json."), false
	case errors.Is(err, chstore.ErrNotFound):
		return errNotFound, false
	case errors.As(err, &pluginErr):
		if e, internal := fromPluginError(pluginErr); e != nil {
			return e, internal
		}
	}
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "error", Detail: "A server error occurred."}, true
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// wrap turns a handlerFunc into an http.Handler: the one place errors
// become responses and are logged.
func (a *API) wrap(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		apiErr, internal := toAPIError(err)
		if internal {
			a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		writeJSON(w, apiErr.Status, apiErr)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		slog.Default().Debug("write response", "err", err)
	}
}
