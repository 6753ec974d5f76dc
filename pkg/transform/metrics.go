package transform

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/plugin"
)

// configMetrics writes the runtime's per-config counts to the bucket the
// API shows them from (plugin.BucketConfigMetrics), after every batch, for
// the configs that ran in it. Counts add to what the bucket held when
// this process first ran the config, so they survive restarts.
type configMetrics struct {
	kv   jetstream.KeyValue
	mu   sync.Mutex
	base map[uint64]plugin.ConfigMetrics
}

func (m *configMetrics) write(ctx context.Context, rt *Runtime, configs map[uint64]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range configs {
		base, ok := m.base[id]
		if !ok {
			var err error
			if base, err = plugin.ReadConfigMetrics(ctx, m.kv, id); err != nil {
				return err
			}
			m.base[id] = base
		}
		st := rt.Stats(id)
		cur := plugin.ConfigMetrics{EventsIn: base.EventsIn + st.In, EventsDropped: base.EventsDropped + st.Dropped,
			EventsFailed: base.EventsFailed + st.Failed, TimeMillis: base.TimeMillis + float64(st.Time.Microseconds())/1000}
		if err := plugin.WriteConfigMetrics(ctx, m.kv, id, cur); err != nil {
			return err
		}
	}
	return nil
}
