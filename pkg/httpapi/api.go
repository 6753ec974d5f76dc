// Package httpapi serves the HTTP interface: routes, authentication and
// scopes, and the mapping of errors to responses.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/transform"
)

// Persons is what the API reads persons from.
type Persons interface {
	ListPersons(ctx context.Context, q chstore.ListQuery) ([]chstore.PersonRecord, uint64, error)
	EachPerson(ctx context.Context, q chstore.ListQuery, fn func(chstore.PersonRecord) error) error
	GetPerson(ctx context.Context, projectID, id uint64) (chstore.PersonRecord, error)
	GetPersonByUUID(ctx context.Context, projectID uint64, id uuid.UUID) (chstore.PersonRecord, error)
	PersonsByID(ctx context.Context, projectID uint64, ids []uint64) (map[uint64]chstore.PersonRecord, error)
	PersonsByUUID(ctx context.Context, projectID uint64, uuids []uuid.UUID) (map[uuid.UUID]chstore.PersonRecord, error)
	PersonsByDistinctID(ctx context.Context, projectID uint64, distinctIDs []string) (map[string]chstore.PersonRecord, error)
	PersonEvents(ctx context.Context, projectID uint64, distinctIDs []string, until time.Time) ([]eventstore.TimelineEvent, error)
	// EachPersonEvent streams the events of distinctIDs in stream order
	// (updatesOnly: those that update person properties; until, when not
	// zero: those at or before it).
	EachPersonEvent(ctx context.Context, projectID uint64, distinctIDs []string, updatesOnly bool, until time.Time, fn func(eventstore.PersonEvent) error) error
	PropertyValues(ctx context.Context, projectID uint64, key, contains string) ([]chstore.PropertyValue, error)
	// CountPropertyValues gives PropertyValues' answer from counts kept
	// since the ingester's committed sequence (read before the call).
	CountPropertyValues(ctx context.Context, projectID uint64, key, contains string, committed uint64) ([]chstore.PropertyValue, error)
	Ping(ctx context.Context) error
}

// ControlPlane is what the API needs of organizations, projects and keys.
type ControlPlane interface {
	Authenticate(secret string) (controlplane.Key, error)
	ProjectByID(id uint64) (controlplane.Project, bool)
	ListProjects(ctx context.Context, orgID string) ([]controlplane.Project, error)
	UpdateProject(ctx context.Context, id uint64, u controlplane.ProjectUpdate) (controlplane.Project, error)
}

// Config configures the API.
type Config struct {
	// PublicURL, when set, is the base of absolute URLs in responses
	// (next/previous); otherwise the request's Host is used.
	PublicURL string
	// BodyConcurrency caps the request bodies read at once (default 64),
	// so connections trickling bodies cannot hold unbounded memory; a body
	// waits up to BodyWait (default 10s) for a slot, then answers 503.
	BodyConcurrency int
	BodyWait        time.Duration
	// StreamWriteTimeout bounds each write of a streaming answer (CSV
	// exports), which as a whole may take longer than the server's
	// WriteTimeout; default 60s.
	StreamWriteTimeout time.Duration
	// RequestTimeout, when set, is the deadline of a request's backend
	// calls (not of streaming routes): set below the server's WriteTimeout
	// so a slow backend answers 503 before the connection is cut.
	RequestTimeout time.Duration
	// RateLimit is each personal API key's budget; zero: unlimited.
	RateLimit RateLimit
	// TrustedProxies are the reverse proxies whose X-Forwarded-For
	// capture believes when it records a client's address (clientIP);
	// none: the connection's peer is the client.
	TrustedProxies []netip.Prefix
}

// API holds the handlers' dependencies.
type API struct {
	store     Persons
	keys      ControlPlane
	log       *slog.Logger
	publicURL *url.URL
	trusted   []netip.Prefix
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	listTime  *prometheus.HistogramVec // persons list pages by filter kind (listFilterKind)
	ready     func(ctx context.Context) error
	plugins   *plugin.Service // nil: plugin routes are not served (plugins.go)
	// transforms runs dry runs of transformation chains (plugin_configs/{id}/test/).
	transforms *transform.Runtime
	writes     *PersonWrites   // nil: person write routes are not served (person_writes.go)
	capture    Capture         // nil: capture routes are not served (capture.go)
	insights   Insights        // nil: actor routes are not served (insights.go)
	actions    *action.Store   // nil: actions routes are not served (actions.go)
	cohorts    *cohort.Service // nil: cohorts routes are not served (cohorts.go)
	bodies     *bodySlots
	limiter    *keyLimiter // nil: no rate limit
	stream     time.Duration
	deadline   time.Duration // RequestTimeout
}

// Deps are what the API serves from, given once to New. Store, Keys, Log,
// Reg and Ready are always needed. Each of the others enables its routes
// when set and leaves them unserved when nil: the binaries
// (pkg/process.NewAPI) set every one, while the capture bench and tests of
// one family of routes build an API of that family only.
type Deps struct {
	Store Persons
	Keys  ControlPlane
	Log   *slog.Logger
	Reg   prometheus.Registerer
	// Ready reports whether the backing services answer (/readyz).
	Ready func(ctx context.Context) error
	// Writes: the person write and activity routes (person_writes.go).
	Writes *PersonWrites
	// Plugins: pipeline transformations and plugin configs (plugins.go).
	Plugins *plugin.Service
	// Capture: the public routes of the client libraries (capture.go,
	// docs/capture.md), authenticated by a project's capture token.
	Capture *capture.Publisher
	// Insights: the actor routes (insights.go, docs/analysis.md).
	Insights Insights
	// Actions: the actions routes (actions.go, docs/cohorts.md).
	Actions *action.Store
	// Cohorts: the cohorts routes, persons/cohorts/ and cohort filters in
	// the persons list (cohorts.go, docs/cohorts.md).
	Cohorts *cohort.Service
	// GeoIP: meta.geoip's database in dry runs of transformations (the
	// ingester's file, so that a dry run answers as ingestion will); nil:
	// locate answers null.
	GeoIP *geoip.DB
}

// New builds the API from its settings and its dependencies.
func New(cfg Config, d Deps) (*API, error) {
	store, keys, logger, reg, ready := d.Store, d.Keys, d.Log, d.Reg, d.Ready
	if cfg.BodyConcurrency <= 0 {
		cfg.BodyConcurrency = 64
	}
	if cfg.BodyWait <= 0 {
		cfg.BodyWait = 10 * time.Second
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = 60 * time.Second
	}
	a := &API{store: store, keys: keys, log: logger, ready: ready, stream: cfg.StreamWriteTimeout, deadline: cfg.RequestTimeout,
		bodies: newBodySlots(cfg.BodyConcurrency, cfg.BodyWait), limiter: newKeyLimiter(cfg.RateLimit), trusted: cfg.TrustedProxies}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, &Error{Detail: "public URL must be absolute, e.g. https://persons.example.com"}
		}
		a.publicURL = u
	}
	if d.Writes != nil {
		w := *d.Writes
		if w.Wait <= 0 {
			w.Wait = 5 * time.Second
		}
		a.writes = &w
	}
	if d.Plugins != nil {
		a.plugins = d.Plugins
		// Dry runs only: they count nothing, so no registerer.
		a.transforms = transform.New(transform.Limits{}, a.log, nil, transform.WithGeoIP(d.GeoIP))
	}
	if d.Capture != nil { // a nil *capture.Publisher would be a non-nil Capture
		a.capture = d.Capture
	}
	a.insights, a.actions, a.cohorts = d.Insights, d.Actions, d.Cohorts
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "api", Name: "requests_total", Help: "HTTP requests by route and status."}, []string{"route", "method", "status"})
	a.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "api", Name: "request_seconds", Help: "HTTP request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route", "method"})
	// The list's cost depends on its filter far more than on its route:
	// a filter label tells a slow unfiltered page from a slow property scan.
	a.listTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "api", Name: "persons_list_seconds",
		Help:    "Persons list pages (JSON) by filter kind: none, indexed (distinct_id, email, search), property.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"filter"})
	reg.MustRegister(a.requests, a.latency, a.listTime)
	return a, nil
}

// route is one entry of the route table: data, so that tests can walk
// every route (the auth matrix).
type route struct {
	Methods []string
	Path    string
	// Scopes the personal API key must hold. Public routes (capture,
	// health) take none and never look at a personal key.
	Scopes []string
	Public bool
	// Body is the request body limit of the route's family (body.go).
	Body int64
	// Stream marks answers that may be long (CSV exports): each write gets
	// its own deadline instead of the server's one for the whole answer.
	Stream bool
	// CORS: browsers on any origin may call it (capture).
	CORS bool
	// Canonical, on the twin of a route served without its final slash,
	// is the route's path with it: metrics count both under it.
	Canonical string
	handler   handlerFunc
}

// canonical is the path the route is known by (metrics, route families).
func (rt route) canonical() string {
	if rt.Canonical != "" {
		return rt.Canonical
	}
	return rt.Path
}

// routes is the route table: every route of the API, on one screen.
// Collection routes come before {id}, which would match their names.
func (a *API) routes() []route {
	var rs []route
	add := func(method, path string, scopes []string, body int64, h handlerFunc) *route {
		rs = append(rs, route{Methods: []string{method}, Path: path, Scopes: scopes, Body: body, handler: h})
		return &rs[len(rs)-1]
	}
	read, write, activityRead := []string{"person:read"}, []string{"person:write"}, []string{"activity_log:read"}
	add("GET", "/api/projects/", []string{"project:read"}, 0, a.listProjects)
	add("GET", "/api/projects/{project_id}/", []string{"project:read"}, 0, a.getProject)
	add("PATCH", "/api/projects/{project_id}/", []string{"project:write"}, 0, a.patchProject)
	add("GET", "/api/projects/{project_id}/persons/", read, 0, a.listPersons).Stream = true
	add("GET", "/api/projects/{project_id}/persons/values/", read, 0, a.propertyValues)
	add("GET", "/api/projects/{project_id}/persons/properties_at_time/", read, 0, a.propertiesAtTime)
	if a.cohorts != nil {
		add("GET", "/api/projects/{project_id}/persons/cohorts/", []string{"person:read", "cohort:read"}, 0, a.personCohorts)
	}
	// batch_by_distinct_ids, batch_by_uuids, bulk_delete,
	// reset_person_distinct_id, deletion_status, {id}/delete_events/:
	// persons_bulk.go.
	for _, m := range []string{"GET", "POST"} {
		add(m, "/api/projects/{project_id}/persons/batch_by_distinct_ids/", read, personBody, a.batchByDistinctIDs)
		add(m, "/api/projects/{project_id}/persons/batch_by_uuids/", read, personBody, a.batchByUUIDs)
	}
	if a.writes != nil {
		add("GET", "/api/projects/{project_id}/persons/activity/", activityRead, 0, a.personActivity)
		add("POST", "/api/projects/{project_id}/persons/bulk_delete/", write, personBody, a.bulkDelete)
		add("POST", "/api/projects/{project_id}/persons/reset_person_distinct_id/", write, personBody, a.resetDistinctID)
		if a.writes.Deletions != nil {
			add("GET", "/api/projects/{project_id}/persons/deletion_status/", read, 0, a.deletionStatus)
			// Deletes across persons: the project's write scope too
			// (events_delete.go).
			add("POST", "/api/projects/{project_id}/events/delete/", []string{"person:write", "project:write"}, personBody, a.deleteProjectEvents)
		}
	}
	if a.insights != nil {
		// Actor routes (insights.go, docs/analysis.md).
		add("GET", "/api/projects/{project_id}/persons/trends/", read, 0, a.personsTrends)
		add("GET", "/api/projects/{project_id}/persons/stickiness/", read, 0, a.personsStickiness)
		add("GET", "/api/projects/{project_id}/persons/lifecycle/", read, 0, a.personsLifecycle)
		add("GET", "/api/projects/{project_id}/persons/retention/", read, 0, a.personsRetention)
		add("GET", "/api/projects/{project_id}/persons/path/", read, 0, a.personsPath)
		add("POST", "/api/projects/{project_id}/persons/path/", read, analysisBody, a.personsPath)
		if _, ok := a.funnels(); ok { // insights_funnel.go
			for _, m := range []string{"GET", "POST"} {
				add(m, "/api/projects/{project_id}/persons/funnel/", read, analysisBody, a.personsFunnel)
				add(m, "/api/projects/{project_id}/persons/funnel/correlation/", read, analysisBody, a.personsFunnelCorrelation)
			}
		}
	}
	add("GET", "/api/projects/{project_id}/persons/{id}/", read, 0, a.getPerson)
	add("GET", "/api/projects/{project_id}/persons/{id}/properties_timeline/", read, 0, a.propertiesTimeline)
	if a.writes != nil {
		add("PATCH", "/api/projects/{project_id}/persons/{id}/", write, personBody, a.updatePerson)
		add("DELETE", "/api/projects/{project_id}/persons/{id}/", write, personBody, a.deletePerson)
		add("POST", "/api/projects/{project_id}/persons/{id}/update_property/", write, personBody, a.updateProperty)
		add("POST", "/api/projects/{project_id}/persons/{id}/delete_property/", write, personBody, a.deleteProperty)
		add("POST", "/api/projects/{project_id}/persons/{id}/split/", write, personBody, a.splitPersonHandler)
		add("POST", "/api/projects/{project_id}/persons/{id}/merge/", write, personBody, a.mergePersons)
		add("POST", "/api/projects/{project_id}/persons/{id}/delete_events/", write, personBody, a.deleteEvents)
		add("GET", "/api/projects/{project_id}/persons/{id}/activity/", activityRead, 0, a.personActivity)
		add("GET", "/api/projects/{project_id}/persons/{id}/export/", read, 0, a.exportPerson).Stream = true
	}

	if a.cohorts != nil {
		// Cohorts (cohorts.go, docs/cohorts.md).
		cr, cw, c := []string{"cohort:read"}, []string{"cohort:write"}, "/api/projects/{project_id}/cohorts/"
		add("GET", c, cr, 0, a.listCohorts)
		add("POST", c, cw, cohortBody, a.createCohort)
		add("GET", c+"{id}/", cr, 0, a.getCohort)
		add("PATCH", c+"{id}/", cw, cohortBody, a.patchCohort)
		add("DELETE", c+"{id}/", cw, 0, a.deleteCohort)
		add("PATCH", c+"{id}/add_persons_to_static_cohort/", cw, cohortBody, a.addPersonsToCohort)
		add("PATCH", c+"{id}/remove_person_from_static_cohort/", cw, cohortBody, a.removePersonFromCohort)
		add("GET", c+"{id}/persons/", []string{"cohort:read", "person:read"}, 0, a.cohortPersons).Stream = true
	}
	if a.actions != nil {
		// Actions (actions.go, docs/cohorts.md).
		ar, aw, ac := []string{"action:read"}, []string{"action:write"}, "/api/projects/{project_id}/actions/"
		add("GET", ac, ar, 0, a.listActions)
		add("POST", ac, aw, actionBody, a.createAction)
		add("GET", ac+"{id}/", ar, 0, a.getAction)
		add("PATCH", ac+"{id}/", aw, actionBody, a.patchAction)
		add("DELETE", ac+"{id}/", aw, 0, a.deleteAction)
	}

	if a.plugins != nil {
		// Pipeline transformations (plugins.go) and plugin configs
		// (plugin_configs.go); named routes come before {id}.
		pr, pw := []string{"plugin:read"}, []string{"plugin:write"}
		pt := "/api/organizations/{organization_id}/pipeline_transformations/"
		add("GET", pt, pr, 0, a.listPlugins)
		add("POST", pt, pw, pluginBody, a.createPlugin)
		add("GET", pt+"repository/", pr, 0, a.pluginRepository)
		add("GET", pt+"unused/", pr, 0, a.unusedPlugins)
		add("GET", pt+"exports_unsubscribe_configs/", pr, 0, a.exportsUnsubscribeConfigs)
		add("GET", pt+"activity/", pr, 0, a.pluginActivity)
		add("GET", pt+"{id}/", pr, 0, a.getPlugin)
		add("PATCH", pt+"{id}/", pw, pluginBody, a.patchPlugin)
		add("DELETE", pt+"{id}/", pw, pluginBody, a.deletePlugin)
		add("GET", pt+"{id}/check_for_updates/", pr, 0, a.checkPluginUpdates)
		add("GET", pt+"{id}/source/", pr, 0, a.pluginSource)
		add("PATCH", pt+"{id}/update_source/", pw, sourceBody, a.updatePluginSource)
		add("POST", pt+"{id}/upgrade/", pw, pluginBody, a.upgradePlugin)
		pc := "/api/projects/{project_id}/plugin_configs/"
		add("GET", pc, pr, 0, a.listPluginConfigs)
		add("POST", pc, pw, configFormBody, a.createPluginConfig)
		add("GET", pc+"{id}/", pr, 0, a.getPluginConfig)
		add("PATCH", pc+"{id}/", pw, configFormBody, a.patchPluginConfig)
		add("DELETE", pc+"{id}/", pw, configBody, a.deletePluginConfig)
		add("POST", pc+"{id}/test/", pw, configBody, a.testPluginConfig)
	}

	if a.capture != nil {
		// Capture for the client libraries (capture.go, docs/capture.md):
		// the project token in the request authenticates, never a personal
		// key; CORS for browsers.
		// The guard answers a body over capture's limit with the API's one
		// 413, declared or chunked (capture.Decode applies the limit again
		// to decompressed bodies).
		limit := a.capture.MaxRequestBytes()
		public := func(path string, h handlerFunc) {
			rs = append(rs, route{Methods: []string{"GET", "POST", "OPTIONS"}, Path: path, Public: true, CORS: true, Body: limit, handler: h})
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

	// Health for load balancers; /metrics is on the ops address only
	// (process.OpsServer), never on the public port.
	rs = append(rs,
		route{Methods: []string{"GET"}, Path: "/healthz", Public: true, handler: healthz},
		route{Methods: []string{"GET"}, Path: "/readyz", Public: true, handler: a.readyz},
		// The OpenAPI document (openapi.go): public, as it holds no data.
		route{Methods: []string{"GET"}, Path: "/api/schema/", Public: true, handler: a.openAPISchema})
	return withoutSlash(rs)
}

// withoutSlash adds, right after each route whose path ends in a slash,
// its twin without the slash (same scopes, limits and handler), as
// PostHog's router accepts both: a redirect instead would lose POST and
// PATCH bodies. Twins never shadow other routes: a pattern ending in "/"
// matches only paths ending in "/", one that does not only paths that do
// not, and within each family the table's order is kept.
func withoutSlash(rs []route) []route {
	out := make([]route, 0, 2*len(rs))
	for _, rt := range rs {
		out = append(out, rt)
		if short := strings.TrimSuffix(rt.Path, "/"); short != rt.Path && short != "" {
			twin := rt
			twin.Path, twin.Canonical = short, rt.Path
			out = append(out, twin)
		}
	}
	return out
}

// Handler serves the route table.
func (a *API) Handler() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = a.chain(route{Path: "not_found", Public: true, handler: func(http.ResponseWriter, *http.Request) error { return errNotFound }})
	r.MethodNotAllowedHandler = a.chain(route{Path: "method_not_allowed", Public: true, handler: func(http.ResponseWriter, *http.Request) error { return errMethod }})
	for _, rt := range a.routes() {
		r.Handle(rt.Path, a.chain(rt)).Methods(rt.Methods...)
	}
	return r
}

// chain wraps a route's handler in the middleware every route goes
// through, outermost first: metrics and panic recovery, CORS, the body
// guard, authentication with scopes and the key's rate limit, CSV
// formatting of persons routes, per-write deadlines of streaming routes
// or the request deadline of the others.
func (a *API) chain(rt route) http.Handler {
	h := a.wrap(rt.handler)
	if strings.Contains(rt.canonical(), "/persons/") {
		h = a.csvFormat(h)
	}
	if rt.Stream {
		h = a.streaming(h)
	} else if a.deadline > 0 {
		h = withDeadline(a.deadline, h)
	}
	if !rt.Public {
		h = a.authenticate(rt.Scopes, h)
	}
	h = a.guardBody(rt.Body, h)
	if rt.CORS {
		h = captureCORS(h)
	}
	return a.observe(rt.canonical(), h)
}

func healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz answers 503 while a backing service (ClickHouse, NATS) does not.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		a.log.Warn("not ready", "err", err)
		return errUnavailable
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
