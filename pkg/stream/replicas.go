package stream

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Replicated returns js creating the KV buckets and object stores whose
// configuration names no replica count with n replicas (docs/operations.md,
// "On a NATS cluster"). Every binary's connection goes through it
// (the binaries' NATS connection, NATS_REPLICAS), so the control plane, actions,
// cohorts, plugins and transformation versions created on a cluster
// survive the loss of a server without each package taking a setting.
// A bucket whose configuration sets replicas (the ingester's, from
// -stream-replicas) keeps them; existing buckets are bound as they are.
func Replicated(js jetstream.JetStream, n int) jetstream.JetStream {
	if n <= 1 {
		return js
	}
	return replicated{JetStream: js, n: n}
}

type replicated struct {
	jetstream.JetStream
	n int
}

func (r replicated) replicas(have int) int {
	if have == 0 {
		return r.n
	}
	return have
}

func (r replicated) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = r.replicas(cfg.Replicas)
	return r.JetStream.CreateKeyValue(ctx, cfg)
}

func (r replicated) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = r.replicas(cfg.Replicas)
	return r.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
}

func (r replicated) CreateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Replicas = r.replicas(cfg.Replicas)
	return r.JetStream.CreateObjectStore(ctx, cfg)
}

func (r replicated) CreateOrUpdateObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	cfg.Replicas = r.replicas(cfg.Replicas)
	return r.JetStream.CreateOrUpdateObjectStore(ctx, cfg)
}
