package deletion

import (
	"context"
	"math"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// counts are a batch's rows per person in the three tables a run mutates,
// read in one statement (countBatch). "Mine" are the rows the batch's
// mutation deletes (each person's up to its request_seq); "all" are the
// person's rows of any sequence.
type counts struct {
	events, eventsAll map[uint64]uint64 // events
	copies, copiesAll map[uint64]uint64 // events_by_distinct_id
	hourly            map[uint64]uint64 // sum(events) of events_hourly
	// times are the earliest and latest timestamps (Unix seconds) of a
	// person's rows in events and its copy that the batch deletes ("mine"),
	// for persons with any; above, the same of its rows above its request
	// (those the batch keeps), for persons with any.
	times, above map[uint64][2]uint32
	// inSpan counts a person's events rows of any sequence in the span
	// of the count after the mutations: the rows the hourly rebuild counts
	// again.
	inSpan map[uint64]uint64
}

// span is the UTC hours [from, to) (Unix seconds, whole hours) that
// hold every row a batch deletes, or every hour (all).
type span struct {
	from, to uint32
	all      bool
}

// spanOf is the hours of the persons' deleted rows: the mutations and the
// hourly rebuild need not look outside them. A person whose hourly sums
// drifted from its events (a run stopped midway) has hourly rows with no
// event left to date them, so a batch with one spans every hour; so does a
// batch with nothing dated (nothing to delete but hourly rows).
func (c counts) spanOf(b []Request) span {
	var s span
	dated := false
	for _, q := range b {
		if c.drift(q.PersonID) {
			return span{all: true}
		}
		t, ok := c.times[q.PersonID]
		if !ok {
			continue
		}
		if !dated {
			s.from, s.to, dated = t[0], t[1], true
			continue
		}
		s.from, s.to = min(s.from, t[0]), max(s.to, t[1])
	}
	if !dated {
		return span{all: true}
	}
	s.from -= s.from % 3600
	if s.to > math.MaxUint32-3600 {
		// The hour after the latest row is past DateTime's range (2106).
		return span{all: true}
	}
	s.to += 3600 - s.to%3600
	return s
}

// keepsApart says whether every row of the person above its request
// lies outside the span (and there is one): a mutation bounded by the span
// cannot reach them, so the batch's largest sequence bounds the person as
// well as its own would (eventstore.PurgeTarget.Clean).
func (c counts) keepsApart(person uint64, s span) bool {
	a, ok := c.above[person]
	return ok && !s.all && (a[1] < s.from || a[0] >= s.to)
}

// hours is the span as the events tables' owner takes it.
func (s span) hours() eventstore.Hours { return eventstore.Hours{From: s.from, To: s.to, All: s.all} }

// drift says whether a person's hourly sums are not the number of its
// events the view counts: a run stopped between the events' mutation and
// the hourly rebuild left them (hourly.go). The copy holds exactly the
// events the view counts (schemas 0009 and 0014 share the filter), so it
// stands in for them: comparing with events themselves would read their
// properties (the $actor filter), the widest column of the widest table,
// where the copy's count reads two narrow columns.
func (c counts) drift(person uint64) bool {
	return c.hourly[person] != c.copiesAll[person]
}

// countBatch reads a batch's counts (eventstore.PurgeCounts), each
// person's rows up to its first request's sequence as a batch's mutation
// bounds it.
//
// after is nil for the first count. For the count after the mutations it
// is the batch's span, in which inSpan counts; that count reads no hourly
// sums (nothing uses them), and still counts the rows to delete in every
// month, so that a request is verified only when none is left anywhere.
func (r *Runner) countBatch(ctx context.Context, b []Request, after *span) (counts, error) {
	seen := make(map[uint64]bool, len(b))
	var targets []eventstore.PurgeTarget
	for _, q := range b {
		// One target a person, so that the count meets each of its rows
		// once.
		if seen[q.PersonID] {
			continue
		}
		seen[q.PersonID] = true
		targets = append(targets, eventstore.PurgeTarget{PersonID: q.PersonID, Seq: q.RequestSeq})
	}
	in := span{all: true}
	if after != nil {
		in = *after
	}
	rows, err := eventstore.New(r.conn).PurgeCounts(ctx, b[0].ProjectID, targets, in.hours(), after == nil)
	if err != nil {
		return counts{}, err
	}
	c := counts{events: map[uint64]uint64{}, eventsAll: map[uint64]uint64{}, copies: map[uint64]uint64{},
		copiesAll: map[uint64]uint64{}, hourly: map[uint64]uint64{}, times: map[uint64][2]uint32{},
		above: map[uint64][2]uint32{}, inSpan: map[uint64]uint64{}}
	for _, row := range rows {
		id := row.PersonID
		if row.Table != eventstore.PurgeHourly {
			widen(c.times, id, row.Mine > 0, row.Lo, row.Hi)
			widen(c.above, id, row.All > row.Mine, row.ALo, row.AHi)
		}
		switch row.Table {
		case eventstore.PurgeEvents:
			c.events[id], c.eventsAll[id], c.inSpan[id] = row.Mine, row.All, row.InSpan
		case eventstore.PurgeCopies:
			c.copies[id], c.copiesAll[id] = row.Mine, row.All
		default:
			c.hourly[id] = row.Mine
		}
	}
	return c, nil
}

// widen takes [lo, hi] into a person's range when some rows have it.
func widen(r map[uint64][2]uint32, id uint64, some bool, lo, hi uint32) {
	if !some {
		return
	}
	if w, ok := r[id]; ok {
		lo, hi = min(lo, w[0]), max(hi, w[1])
	}
	r[id] = [2]uint32{lo, hi}
}
