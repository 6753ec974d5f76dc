package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/appconfig"
	"github.com/personhub/personhub/pkg/ingest"
)

// parsePartitions reads -partition: "all" or a comma-separated list of
// partitions of n.
func parsePartitions(list string, n int) ([]int, error) {
	if list == "all" {
		out := make([]int, n)
		for k := range out {
			out[k] = k
		}
		return out, nil
	}
	var out []int
	for _, s := range appconfig.SplitList(list) {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k >= n {
			return nil, fmt.Errorf("-partition %q: want all or partitions among 0..%d", list, n-1)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-partition names no partition")
	}
	return out, nil
}

// newIngesters builds one ingester per partition this process runs; their
// metrics carry a partition label when there are several partitions.
func newIngesters(o *runOptions, js jetstream.JetStream, store ingest.Store, log *slog.Logger, reg prometheus.Registerer) ([]*ingest.Ingester, error) {
	var out []*ingest.Ingester
	for _, k := range o.partitions {
		cfg := o.cfg
		cfg.Partition = k
		r, l := reg, log
		if max(cfg.Streams.Partitions, 1) > 1 {
			r = prometheus.WrapRegistererWith(prometheus.Labels{"partition": strconv.Itoa(k)}, reg)
			l = log.With("partition", k)
		}
		ing, err := ingest.New(cfg, js, store, l, r)
		if err != nil {
			return nil, err
		}
		out = append(out, ing)
	}
	return out, nil
}

// runAll runs the ingesters until ctx ends or one fails; a failure stops
// the others (each commits its batch in hand), and the process exits with
// it, for its supervisor to restart.
func runAll(ctx context.Context, ings []*ingest.Ingester) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ings))
	var wg sync.WaitGroup
	for j, ing := range ings {
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
