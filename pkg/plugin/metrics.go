package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketConfigMetrics holds each plugin config's transformation counts,
// written by the ingester (which runs the chains) and shown in the config
// JSON: key decimal config id, value ConfigMetrics.
const BucketConfigMetrics = "plugin_config_metrics"

// ConfigMetrics are a config's counts over every run of the ingester
// (events folded again by a replay count again).
type ConfigMetrics struct {
	EventsIn      uint64  `json:"events_in"`
	EventsDropped uint64  `json:"events_dropped"`
	EventsFailed  uint64  `json:"events_failed"`
	TimeMillis    float64 `json:"time_ms"`
}

// OpenConfigMetrics opens (creating if needed) BucketConfigMetrics.
func OpenConfigMetrics(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BucketConfigMetrics, History: 1, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, BucketConfigMetrics)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: open %s: %w", BucketConfigMetrics, err)
	}
	return kv, nil
}

// ReadConfigMetrics reads a config's counts (zero when it never ran).
func ReadConfigMetrics(ctx context.Context, kv jetstream.KeyValue, id uint64) (ConfigMetrics, error) {
	m, _, err := get[ConfigMetrics](ctx, kv, idKey(id))
	if errors.Is(err, ErrNotFound) {
		return ConfigMetrics{}, nil
	}
	return m, err
}

// WriteConfigMetrics stores a config's counts.
func WriteConfigMetrics(ctx context.Context, kv jetstream.KeyValue, id uint64, m ConfigMetrics) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, idKey(id), data)
	return err
}

// ConfigMetrics returns the counts of a config (zero when the ingester
// has not written any; an unreadable bucket is an error).
func (s *Service) ConfigMetrics(ctx context.Context, id uint64) (ConfigMetrics, error) {
	return ReadConfigMetrics(ctx, s.st.metrics, id)
}
