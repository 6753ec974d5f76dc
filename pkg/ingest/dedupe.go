package ingest

import (
	"context"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// One events row per message (docs/architecture.md, "One events row per
// message"). A batch's rows precede its commit marker, and an insert that
// spans partitions is not atomic, so a failed write (retried in this
// process) or a crash (folded again by the next start) can leave part of
// a batch's events written without a commit. Writing those rows again
// would leave two rows of one message until ClickHouse merges them, and
// the analysis counts rows. So the events of a batch that may overlap
// rows already written are looked up first, and those present are left
// out; every other batch is written without a lookup.
//
// How far rows of an uncommitted batch may reach is known from intents:
// before a batch's rows, the ingester records (ingest_intents) that it may
// write rows through a sequence; the record reaches BatchSize beyond the
// batch, so the following batches up to there need none.
type intents struct {
	// claimed: the highest sequence the intents written cover.
	claimed uint64
	// overlap: rows above the last commit up to this sequence may
	// already be in events (set from claimed when the ingester starts
	// and after a failed write).
	overlap uint64
}

// readIntents learns, on start and before a retry, how far rows of an
// uncommitted batch may reach.
func (i *Ingester) readIntents(ctx context.Context) error {
	seq, err := i.store.LastIntent(ctx, i.cfg.Consumer)
	if err != nil {
		return err
	}
	i.intents = intents{claimed: seq, overlap: seq}
	return nil
}

// unwritten records the intent to write a batch's events (when the last
// one reaches beyond the intents written), and leaves out the events
// already stored when the batch may overlap rows of an uncommitted write.
func (i *Ingester) unwritten(ctx context.Context, events []eventstore.Row) ([]eventstore.Row, error) {
	if len(events) == 0 {
		return events, nil
	}
	first, last := events[0].Seq, events[len(events)-1].Seq
	for _, e := range events {
		// A write lane command's row (its own sequence, beyond the
		// batch's) may sit anywhere in a refolded batch (lane.go).
		first, last = min(first, e.Seq), max(last, e.Seq)
	}
	if last > i.intents.claimed {
		through := last + uint64(i.cfg.BatchSize)
		if err := i.store.WriteIntent(ctx, i.cfg.Consumer, first, through); err != nil {
			return nil, err
		}
		i.intents.claimed = through
	}
	if first > i.intents.overlap {
		return events, nil
	}
	i.metrics.eventLookups.Inc()
	written, err := i.store.WrittenEvents(ctx, events)
	if err != nil || len(written) == 0 {
		return events, err
	}
	// The rows found were written by an insert that may have died before
	// ClickHouse copied them to events_by_distinct_id and counted them in
	// events_hourly; the retry leaves them out, so the views would never
	// see them (RestoreCopies restores both).
	if err := i.store.RestoreCopies(ctx, events, written); err != nil {
		return nil, err
	}
	out := make([]eventstore.Row, 0, len(events))
	for _, e := range events {
		if !written[e.Seq] {
			out = append(out, e)
		}
	}
	i.metrics.eventsWritten.Add(float64(len(events) - len(out)))
	return out, nil
}
