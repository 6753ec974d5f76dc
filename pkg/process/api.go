package process

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/transform"
)

// APIConfig is what the HTTP API is built from. The caller dials and owns
// the connections and the control plane, and closes them after API.Close.
type APIConfig struct {
	Store *chstore.Store
	NC    *nats.Conn
	JS    jetstream.JetStream
	Keys  *controlplane.Store
	Log   *slog.Logger
	Reg   prometheus.Registerer
	// Server holds the HTTP settings (timeouts, body limits, rate limits,
	// the ops address); its zero value is no rate limit and the API's
	// default body limits.
	Server  httpapi.Settings
	Plugins plugin.Settings
	// PublicURL, when set, is the base of absolute URLs in responses.
	PublicURL string
	// Consumer is the ingester whose progress person writes wait on
	// (the base name, with Partitions partitions: each write waits on
	// its project's); WriteWait how long they wait before answering 202
	// (0: default).
	Consumer   string
	Partitions int
	WriteWait  time.Duration
	// GeoIP is the database of meta.geoip.locate in dry runs of
	// transformations, the ingester's; nil: locate answers null.
	GeoIP *geoip.DB
}

// API is the HTTP API with every route family: persons, person writes and
// deletions, plugins, actions, cohorts, analysis and capture.
type API struct {
	api *httpapi.API
	// Ready reports whether NATS and ClickHouse answer (the API's /readyz
	// and the ops server's).
	Ready   func(context.Context) error
	cohorts *cohort.Service
	watcher *progress.Partitions
}

// NewAPI builds the API. Serve its Handler, and Close it after the server
// has stopped.
func NewAPI(ctx context.Context, c APIConfig) (*API, error) {
	// Person writes publish on commands.<project>: an EVENTS stream made
	// before that subject existed gets it now, whether or not the
	// ingester was upgraded first (the ingester creates missing streams).
	if err := stream.Upgrade(ctx, c.JS, c.Log); err != nil {
		return nil, err
	}
	kv, err := progress.Open(ctx, c.JS)
	if err != nil {
		return nil, err
	}
	if err := stream.CheckPartitions(ctx, c.JS, c.Partitions); err != nil {
		return nil, err
	}
	watcher, err := progress.WatchPartitions(ctx, kv, c.Consumer, c.Partitions)
	if err != nil {
		return nil, err
	}
	a := &API{Ready: Readiness(c.NC, c.Store.Ping), watcher: watcher}
	ok := false
	defer func() {
		if !ok {
			a.Close()
		}
	}()
	deps := httpapi.Deps{Store: c.Store, Keys: c.Keys, Log: c.Log, Reg: c.Reg, Ready: a.Ready, GeoIP: c.GeoIP,
		Writes: &httpapi.PersonWrites{JS: c.JS, Progress: watcher, Activity: activity.New(c.Store.Conn()),
			Deletions: deletion.NewQueue(c.Store.Conn()), Wait: c.WriteWait}}
	// Plugins: KV buckets, object store and event stream on the same
	// JetStream; closed with the NATS connection.
	// Every change of a project's transformation chain is put on the log
	// for the ingester (docs/architecture.md, "Transformations").
	chains, err := transform.NewPublisher(ctx, c.JS)
	if err != nil {
		return nil, err
	}
	if deps.Plugins, err = c.Plugins.Open(ctx, c.JS, c.Keys, c.Store.Conn(), chains, c.Log, c.Reg); err != nil {
		return nil, err
	}
	// Actions and cohorts (docs/cohorts.md): KV buckets on the same
	// JetStream, static cohort members in ClickHouse.
	if deps.Actions, err = action.Open(ctx, c.JS); err != nil {
		return nil, err
	}
	insights := insight.New(c.Store.Conn(), deps.Actions)
	deps.Insights = insights
	// Behavioural cohort filters on actions resolve them as analysis does.
	if a.cohorts, err = cohort.Open(ctx, c.JS, c.Store.Conn(), insights); err != nil {
		return nil, err
	}
	deps.Cohorts = a.cohorts
	// Capture for the client libraries (docs/capture.md), publishing on
	// the same NATS connection.
	if deps.Capture, err = capture.NewPublisher(capture.Config{}, c.JS, c.Keys, c.Log.With("component", "capture"), c.Reg); err != nil {
		return nil, err
	}
	if a.api, err = httpapi.New(c.Server.Apply(httpapi.Config{PublicURL: c.PublicURL}), deps); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// Handler serves the API's routes.
func (a *API) Handler() http.Handler { return a.api.Handler() }

// Close stops what NewAPI started: the cohorts' background count
// refreshes (before the caller closes ClickHouse), then the progress
// watcher.
func (a *API) Close() {
	if a.cohorts != nil {
		a.cohorts.Close()
	}
	a.watcher.Stop()
}
