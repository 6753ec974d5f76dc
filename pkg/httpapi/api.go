// Package httpapi serves the HTTP interface: routes, authentication and
// scopes, and the mapping of errors to responses.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/plugin"
)

// Persons is what the API reads persons from.
type Persons interface {
	ListPersons(ctx context.Context, q chstore.ListQuery) ([]chstore.PersonRecord, uint64, error)
	EachPerson(ctx context.Context, q chstore.ListQuery, fn func(chstore.PersonRecord) error) error
	GetPerson(ctx context.Context, projectID, id uint64) (chstore.PersonRecord, error)
	GetPersonByUUID(ctx context.Context, projectID uint64, id uuid.UUID) (chstore.PersonRecord, error)
	PersonEvents(ctx context.Context, projectID uint64, distinctIDs []string, until time.Time) ([]chstore.TimelineEvent, error)
	Ping(ctx context.Context) error
}

// ControlPlane is what the API needs of organizations, projects and keys.
type ControlPlane interface {
	Authenticate(secret string) (controlplane.Key, error)
	ProjectByID(id uint64) (controlplane.Project, bool)
	ListProjects(ctx context.Context, orgID string) ([]controlplane.Project, error)
}

// Config configures the API.
type Config struct {
	// PublicURL, when set, is the base of absolute URLs in responses
	// (next/previous); otherwise the request's Host is used.
	PublicURL string
}

// API holds the handlers' dependencies.
type API struct {
	store     Persons
	keys      ControlPlane
	log       *slog.Logger
	publicURL *url.URL
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	ready     func(ctx context.Context) error
	plugins   *plugin.Service // nil: plugin routes are not served (SetPlugins)
	writes    *PersonWrites
	capture   Capture // nil: capture routes are not served (SetCapture, capture.go)
}

// New builds the API. ready reports whether backing services answer.
func New(cfg Config, store Persons, keys ControlPlane, logger *slog.Logger, reg prometheus.Registerer, ready func(ctx context.Context) error) (*API, error) {
	a := &API{store: store, keys: keys, log: logger, ready: ready}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, &Error{Detail: "public URL must be absolute, e.g. https://persons.example.com"}
		}
		a.publicURL = u
	}
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "api", Name: "requests_total", Help: "HTTP requests by route and status."}, []string{"route", "method", "status"})
	a.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "api", Name: "request_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route", "method"})
	reg.MustRegister(a.requests, a.latency)
	return a, nil
}

// Handler returns the route table: every route of the API, on one screen.
func (a *API) Handler(gatherer prometheus.Gatherer) http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = a.wrap(func(http.ResponseWriter, *http.Request) error { return errNotFound })
	r.MethodNotAllowedHandler = a.wrap(func(http.ResponseWriter, *http.Request) error { return errMethod })

	route := func(method, path string, scopes []string, h handlerFunc) {
		handler := a.wrap(h)
		if strings.Contains(path, "/persons/") {
			handler = a.csvFormat(handler)
		}
		r.Handle(path, a.instrument(path, a.authenticate(scopes, handler))).Methods(method)
	}
	read := []string{"person:read"}
	route("GET", "/api/projects/", []string{"project:read"}, a.listProjects)
	route("GET", "/api/projects/{project_id}/", []string{"project:read"}, a.getProject)
	route("GET", "/api/projects/{project_id}/persons/", read, a.listPersons)
	// Collection routes come before {id}, which would match their names.
	if a.writes != nil {
		route("GET", "/api/projects/{project_id}/persons/activity/", []string{"activity_log:read"}, a.personActivity)
	}
	route("GET", "/api/projects/{project_id}/persons/{id}/", read, a.getPerson)
	route("GET", "/api/projects/{project_id}/persons/{id}/properties_timeline/", read, a.propertiesTimeline)
	if a.writes != nil {
		write := []string{"person:write"}
		activity := []string{"activity_log:read"}
		route("PATCH", "/api/projects/{project_id}/persons/{id}/", write, a.updatePerson)
		route("DELETE", "/api/projects/{project_id}/persons/{id}/", write, a.deletePerson)
		route("POST", "/api/projects/{project_id}/persons/{id}/update_property/", write, a.updateProperty)
		route("POST", "/api/projects/{project_id}/persons/{id}/delete_property/", write, a.deleteProperty)
		route("POST", "/api/projects/{project_id}/persons/{id}/split/", write, a.splitPersonHandler)
		route("GET", "/api/projects/{project_id}/persons/{id}/activity/", activity, a.personActivity)
	}

	if a.plugins != nil {
		// Pipeline transformations (plugins.go) and plugin configs
		// (plugin_configs.go); named routes come before {id}.
		pr, pw := []string{"plugin:read"}, []string{"plugin:write"}
		pt := "/api/organizations/{organization_id}/pipeline_transformations/"
		route("GET", pt, pr, a.listPlugins)
		route("POST", pt, pw, a.createPlugin)
		route("GET", pt+"repository/", pr, a.pluginRepository)
		route("GET", pt+"unused/", pr, a.unusedPlugins)
		route("GET", pt+"exports_unsubscribe_configs/", pr, a.exportsUnsubscribeConfigs)
		route("GET", pt+"activity/", pr, a.pluginActivity)
		route("GET", pt+"{id}/", pr, a.getPlugin)
		route("PATCH", pt+"{id}/", pw, a.patchPlugin)
		route("DELETE", pt+"{id}/", pw, a.deletePlugin)
		route("GET", pt+"{id}/check_for_updates/", pr, a.checkPluginUpdates)
		route("GET", pt+"{id}/source/", pr, a.pluginSource)
		route("PATCH", pt+"{id}/update_source/", pw, a.updatePluginSource)
		route("POST", pt+"{id}/upgrade/", pw, a.upgradePlugin)
		pc := "/api/projects/{project_id}/plugin_configs/"
		route("GET", pc, pr, a.listPluginConfigs)
		route("POST", pc, pw, a.createPluginConfig)
		route("GET", pc+"{id}/", pr, a.getPluginConfig)
		route("PATCH", pc+"{id}/", pw, a.patchPluginConfig)
		route("DELETE", pc+"{id}/", pw, a.deletePluginConfig)
	}

	if a.capture != nil {
		// Capture for the client libraries (capture.go, docs/capture.md):
		// the project token in the request authenticates, never a personal
		// key; CORS for browsers; each path also without its final slash.
		public := func(path string, h handlerFunc) {
			handler := a.instrument(path, captureCORS(a.wrap(h)))
			r.Handle(path, handler).Methods("GET", "POST", "OPTIONS")
			if short := strings.TrimSuffix(path, "/"); short != path {
				r.Handle(short, handler).Methods("GET", "POST", "OPTIONS")
			}
		}
		for _, path := range []string{"/capture/", "/batch/", "/e/", "/i/v0/e/", "/track/"} {
			public(path, a.captureEvents)
		}
		public("/engage/", a.captureEngage)
		public("/flags/", a.flags)
		public("/decide/", a.flags)
		public("/array/{token}/config", a.remoteConfigJSON)
		public("/array/{token}/config.js", a.remoteConfigJS)
	}

	r.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	r.Handle("/readyz", a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.ready(ctx); err != nil {
			a.log.Warn("not ready", "err", err)
			return errUnavailable
		}
		writeJSON(w, 200, map[string]string{"status": "ready"})
		return nil
	}))
	return r
}

// statusWriter records the status code for metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (a *API) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: 200}
		next.ServeHTTP(sw, r)
		a.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
		a.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}
