// Package apiserver assembles the HTTP API from its parts: the one place
// where cmd/api and cmd/stack (which runs the same API beside an embedded
// NATS and the ingester) wire persons, writes, plugins, actions, cohorts,
// analysis and capture, so the two binaries cannot drift apart.
package apiserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/action"
	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/appconfig"
	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/cohort"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/deletion"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/progress"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/transform"
)

// Deps are what the API is built from; the caller owns and closes them.
type Deps struct {
	Store *chstore.Store
	NC    *nats.Conn
	JS    jetstream.JetStream
	Keys  *controlplane.Store
	Log   *slog.Logger
	Reg   *prometheus.Registry
	// Server holds the HTTP settings (timeouts, body limits, rate limits,
	// the ops address).
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
}

// Build returns the API and its readiness check; stop releases what Build
// started (the progress watcher). Call stop after the server has stopped.
func Build(ctx context.Context, d Deps) (api *httpapi.API, ready func(context.Context) error, stop func(), err error) {
	ready = appconfig.Readiness(d.NC, d.Store.Ping)
	api, err = httpapi.New(d.Server.Apply(httpapi.Config{PublicURL: d.PublicURL}), d.Store, d.Keys, d.Log, d.Reg, ready)
	if err != nil {
		return nil, nil, nil, err
	}
	kv, err := progress.Open(ctx, d.JS)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := stream.CheckPartitions(ctx, d.JS, d.Partitions); err != nil {
		return nil, nil, nil, err
	}
	watcher, err := progress.WatchPartitions(ctx, kv, d.Consumer, d.Partitions)
	if err != nil {
		return nil, nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			watcher.Stop()
		}
	}()
	api.SetPersonWrites(httpapi.PersonWrites{JS: d.JS, Progress: watcher, Activity: activity.New(d.Store.Conn()),
		Deletions: deletion.NewQueue(d.Store.Conn()), Wait: d.WriteWait})
	// Plugins: KV buckets, object store and event stream on the same
	// JetStream; closed with the NATS connection.
	// Every change of a project's transformation chain is put on the log
	// for the ingester (docs/architecture.md, "Transformations").
	chains, err := transform.NewPublisher(ctx, d.JS)
	if err != nil {
		return nil, nil, nil, err
	}
	plugins, err := d.Plugins.Open(ctx, d.JS, d.Keys, d.Store.Conn(), chains, d.Log, d.Reg)
	if err != nil {
		return nil, nil, nil, err
	}
	api.SetPlugins(plugins)
	// Actions and cohorts (docs/cohorts.md): KV buckets on the same
	// JetStream, static cohort members in ClickHouse.
	actions, err := action.Open(ctx, d.JS)
	if err != nil {
		return nil, nil, nil, err
	}
	api.SetActions(actions)
	insights := insight.New(d.Store.Conn(), actions)
	// Behavioural cohort filters on actions resolve them as analysis does.
	cohorts, err := cohort.Open(ctx, d.JS, d.Store.Conn(), insights)
	if err != nil {
		return nil, nil, nil, err
	}
	api.SetCohorts(cohorts)
	api.SetInsights(insights)
	// Capture for the client libraries (docs/capture.md), publishing on
	// the same NATS connection.
	publisher, err := capture.NewPublisher(capture.Config{}, d.JS, d.Keys, d.Log.With("component", "capture"), d.Reg)
	if err != nil {
		return nil, nil, nil, err
	}
	api.SetCapture(publisher)
	ok = true
	// Background count refreshes stop before the caller closes ClickHouse.
	stopAll := func() {
		cohorts.Close()
		watcher.Stop()
	}
	return api, ready, stopAll, nil
}
