package ingest

import (
	"context"
	"strconv"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/stream"
)

// The person_order repair (chstore/repair.go): a crashed attempt may
// leave live keys that the refold, batched differently, never
// tombstones. At start and before each retry the ingester learns what it
// owes (rows above the commit point, or a repair a previous process
// recorded and did not finish); once the commit point has passed every
// row above it, one statement tombstones the stale keys.

// beginRepair records and learns the repair owed at commit point c, and
// runs it when it is due already (no rows above c).
func (i *Ingester) beginRepair(ctx context.Context, c uint64) error {
	r, err := i.store.BeginOrderRepair(ctx, i.cfg.Consumer, c, i.mine)
	if err != nil {
		return err
	}
	i.repair = r
	return i.repairIfDue(ctx, c)
}

// repairIfDue runs the repair once the commit point c has passed the rows
// it waits for.
func (i *Ingester) repairIfDue(ctx context.Context, c uint64) error {
	if !i.repair.Due(c) {
		return nil
	}
	if err := i.store.RepairOrder(ctx, i.cfg.Consumer, i.repair, c, i.mine); err != nil {
		return err
	}
	i.metrics.orderRepairs.Inc()
	i.log.Info("person_order repaired after an uncommitted write", "from_seq", i.repair.From, "committed_seq", c)
	i.repair = chstore.OrderRepair{}
	return nil
}

// mine reports whether the project's messages are this ingester's
// (stream.Route's rule for the project's subject token).
func (i *Ingester) mine(project uint64) bool {
	n := i.cfg.Streams.Partitions
	return n <= 1 || stream.PartitionOf(strconv.FormatUint(project, 10), n) == i.cfg.Partition
}
