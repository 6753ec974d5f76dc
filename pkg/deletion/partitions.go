package deletion

import (
	"context"
	"strconv"

	"github.com/personhub/personhub/pkg/stream"
)

// committed returns, for a project, the last stream sequence the
// ingester folding it committed. A request above it comes from a batch
// that ingester has not committed: it may still write that batch's events
// again (it retries a batch from its first insert), so such a request
// waits for a later run.
//
// With one partition that is the last commit of any consumer, as before
// partitions. With several, it is the commit of the project's partition:
// each partition commits its own messages only, and a partition without
// messages for a while would hold back every request if the deleter
// waited for all of them. A partition split from the single consumer
// (docs/operations.md) has folded everything through that consumer's
// commit before its own first one.
func (r *Runner) committed(ctx context.Context) (func(projectID uint64) uint64, error) {
	rows, err := r.conn.Query(ctx, "SELECT consumer, max(last_seq) FROM ingest_batches GROUP BY consumer")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seqs := map[string]uint64{}
	var all uint64
	for rows.Next() {
		var c string
		var seq uint64
		if err := rows.Scan(&c, &seq); err != nil {
			return nil, err
		}
		seqs[c], all = seq, max(all, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	n := max(r.cfg.Partitions, 1)
	if n == 1 {
		return func(uint64) uint64 { return all }, nil
	}
	return func(projectID uint64) uint64 {
		k := stream.PartitionOf(strconv.FormatUint(projectID, 10), n)
		return max(seqs[stream.ConsumerName(r.cfg.Consumer, k, n)], seqs[r.cfg.Consumer])
	}, nil
}
