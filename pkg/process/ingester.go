package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/transform"
)

// IngesterConfig is what the ingester is built from. The caller dials and
// owns the connections, and closes them after Run returns.
type IngesterConfig struct {
	// Ingest is every partition's configuration but Ingest.Partition;
	// its Hook is set by NewIngester.
	Ingest ingest.Config
	// Partitions are the partitions of the stream this process folds;
	// nil: all of them (Ingest.Streams.Partitions).
	Partitions []int
	JS         jetstream.JetStream
	// Store is ClickHouse as the ingester writes it: its own connections
	// (a flood of the API's reads must not hold back the fold), with
	// statements at the ingester's niceness (chstore.Config.ThreadNice).
	Store ingest.Store
	Log   *slog.Logger
	Reg   prometheus.Registerer
	// GeoIP is the database of transformations' meta.geoip.locate; nil:
	// locate answers null. Opened by the caller, closed after Run.
	GeoIP *geoip.DB
}

// Ingester is one ingester per partition the process folds.
type Ingester struct{ ings []*ingest.Ingester }

// NewIngester builds the ingesters with the transformation hook; their
// metrics carry a partition label, and their logs a partition, when the
// stream has several partitions.
func NewIngester(ctx context.Context, c IngesterConfig) (*Ingester, error) {
	cfg := c.Ingest
	var err error
	// Enabled transformations run on every event before the fold
	// (docs/plugins.md, "Running transformations"). One hook serves every
	// partition this process runs: its records are per project.
	if cfg.Hook, err = transform.NewIngestHook(ctx, c.JS, max(cfg.Streams.Replicas, 1), c.Log, c.Reg, transform.WithGeoIP(c.GeoIP)); err != nil {
		return nil, err
	}
	n := max(cfg.Streams.Partitions, 1)
	parts := c.Partitions
	if parts == nil {
		for k := range n {
			parts = append(parts, k)
		}
	}
	out := &Ingester{}
	for _, k := range parts {
		pc := cfg
		pc.Partition = k
		r, l := c.Reg, c.Log
		if n > 1 {
			r = prometheus.WrapRegistererWith(prometheus.Labels{"partition": strconv.Itoa(k)}, c.Reg)
			l = c.Log.With("partition", k)
		}
		ing, err := ingest.New(pc, c.JS, c.Store, l, r)
		if err != nil {
			return nil, err
		}
		out.ings = append(out.ings, ing)
	}
	return out, nil
}

// Run runs the ingesters until ctx ends or one fails; a failure stops the
// others. Each commits its batch in hand before Run returns (within
// ingest.Config.ShutdownGrace), so the caller closes the connections
// after it. A failure is returned for the process to exit with, and its
// supervisor to restart it.
func (i *Ingester) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(i.ings))
	var wg sync.WaitGroup
	for j, ing := range i.ings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ing.Run(ctx); err != nil {
				errs[j] = fmt.Errorf("%s: %w", ing.Consumer(), err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
