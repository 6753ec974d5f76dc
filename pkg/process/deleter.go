package process

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/deletion"
)

// DeleterConfig is what the deleter is built from. The caller opens and
// owns the store, and closes it after Run or RunOnce returns.
type DeleterConfig struct {
	// Deletion is the schedule, the batch size, the mutation timeout and
	// the ingesters' consumer and partitions whose commits requests wait
	// for.
	Deletion deletion.Config
	// Store is ClickHouse: the deleter uses no NATS.
	Store *chstore.Store
	Log   *slog.Logger
	Reg   prometheus.Registerer
}

// Deleter executes the queued deletions of deleted persons' events.
type Deleter struct {
	runner *deletion.Runner
}

// NewDeleter builds the deleter.
func NewDeleter(c DeleterConfig) (*Deleter, error) {
	runner, err := deletion.New(c.Store.Conn(), c.Deletion, c.Log, c.Reg)
	if err != nil {
		return nil, err
	}
	return &Deleter{runner: runner}, nil
}

// Run runs on the schedule until ctx ends; the run in progress stops
// after its current statement before Run returns.
func (d *Deleter) Run(ctx context.Context) error { return d.runner.Schedule(ctx) }

// RunOnce runs once now; ctx ending stops it after its current statement.
func (d *Deleter) RunOnce(ctx context.Context) (deletion.Summary, error) {
	return d.runner.RunOnce(ctx)
}
