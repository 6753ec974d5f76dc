package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/csvexport"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/transform"
)

// Error is an API error; every error response has this body.
type Error struct {
	Status int     `json:"-"`
	Type   string  `json:"type"`
	Code   string  `json:"code"`
	Detail string  `json:"detail"`
	Attr   *string `json:"attr"`
	// RetryAfter is the Retry-After header in seconds; 503 and 429 always
	// carry one (defaultRetryAfter when zero).
	RetryAfter int `json:"-"`
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
	errInternal         = &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "error", Detail: "A server error occurred."}
	// errDryRunBusy: every dry-run slot is taken (transform.ErrBusy);
	// dry runs take a fraction of a second, so retry soon.
	errDryRunBusy = &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Detail: "Too many dry runs are under way; try again shortly.", RetryAfter: 1}
	// errClientGone answers a request whose client went away before the
	// answer (nginx's 499): nobody reads it, but it is neither a 500 nor
	// logged as one.
	errClientGone = &Error{Status: 499, Type: "invalid_request", Code: "client_closed_request", Detail: "The client closed the request."}
)

// defaultRetryAfter is the Retry-After of a 503 that does not name one:
// long enough for a restarting backend, short enough not to idle clients.
const defaultRetryAfter = 5

// backendUnavailable lists the errors that mean a backing service cannot
// answer now (ClickHouse as classified by chstore/statement; NATS and JetStream
// unreachable, reconnecting or not answering in time), answered 503.
var backendUnavailable = []error{
	statement.ErrUnavailable,
	nats.ErrNoResponders, nats.ErrTimeout, nats.ErrConnectionClosed, nats.ErrConnectionReconnecting,
	nats.ErrDisconnected, nats.ErrNoServers, nats.ErrNoStreamResponse,
	jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled, jetstream.ErrServerShutdown,
	context.DeadlineExceeded,
}

func missingScope(scope string) *Error {
	return &Error{Status: http.StatusForbidden, Type: "authentication_error", Code: "permission_denied",
		Detail: "API key missing required scope '" + scope + "'"}
}

// toAPIError maps domain errors to API errors; anything unknown is a 500
// and is logged. ctx is the request's: a cancelled one means the client
// went away, whatever error that caused below.
func toAPIError(ctx context.Context, err error) (*Error, bool) {
	var apiErr *Error
	var filterErr *propfilter.Error
	var pluginErr *plugin.Error
	var insightErr *insight.Error
	var fieldErr fieldError
	switch {
	case errors.As(err, &apiErr):
		return apiErr, false
	case errors.Is(ctx.Err(), context.Canceled):
		return errClientGone, false
	case isUnavailable(err):
		return errUnavailable, true
	case errors.As(err, &insightErr):
		return invalid(insightErr.Attr, insightErr.Detail), false
	case errors.As(err, &filterErr):
		return invalid("properties", "Properties are unparsable! "+filterErr.Detail), false
	case errors.Is(err, csvexport.ErrTooManyColumns):
		return invalid("format", "The CSV export has too many columns (at most "+strconv.Itoa(csvexport.DefaultMaxColumns)+
			", the union of the rows' properties); narrow it with a properties filter or use format=json."), false
	case errors.Is(err, transform.ErrBusy):
		return errDryRunBusy, false
	case errors.Is(err, cohort.ErrPending):
		return errPending, false
	case errors.Is(err, chstore.ErrNotFound), errors.Is(err, action.ErrNotFound), errors.Is(err, cohort.ErrNotFound):
		return errNotFound, false
	case errors.As(err, &fieldErr):
		return invalid(fieldErr.Field(), fieldErr.Error()), false
	case errors.As(err, &pluginErr):
		if e, internal := fromPluginError(pluginErr); e != nil {
			return e, internal
		}
	}
	return errInternal, true
}

// fieldError is a domain validation error naming its input field
// (action.Error, cohort.Error): a 400 with that attr.
type fieldError interface {
	error
	Field() string
}

func isUnavailable(err error) bool {
	for _, target := range backendUnavailable {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
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
		a.writeError(w, r, err)
	})
}

// writeError maps err and writes it: the one place error responses are
// written. 5xx causes are logged once (503s at warn: an outage is not a
// bug).
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiErr, internal := toAPIError(r.Context(), err)
	switch {
	case internal && apiErr.Status == http.StatusServiceUnavailable:
		a.log.Warn("backend unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	case internal:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if apiErr.Status == http.StatusServiceUnavailable || apiErr.Status == http.StatusTooManyRequests {
		after := apiErr.RetryAfter
		if after <= 0 {
			after = defaultRetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(after))
	}
	writeJSON(w, apiErr.Status, apiErr)
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
