package main

import "context"

// mergeProbe is G4's A/B for ClickHouse's background merges, interleaved
// in one run as niceProbe is: with the backlog kept full, it alternates
// SYSTEM START MERGES and SYSTEM STOP MERGES (which also cancels the
// merges running) for `rounds` rounds, and each time measures GET person
// at c=1 (bare driver and HTTP API, 1.5 s each) and the events the
// ingester folded meanwhile. "Off" is the most any merge setting can buy
// the read (fewer merge threads, cheaper merges); it is not a way to run:
// parts pile up without merges. Merges are started again at the end. Off
// unless -g4-merge-probe is given (docs/performance.md, "h/g4m").
func (s *session) mergeProbe(ctx context.Context, ops *readOps, rounds int) {
	conn := s.rawStore.Conn()
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "SYSTEM START MERGES") }()
	stmts := []string{"SYSTEM START MERGES", "SYSTEM STOP MERGES"}
	s.probeSides(ctx, ops.inProcess(), rounds, "merge probe", []string{"merges on", "merges off"},
		func(i int) error { return conn.Exec(ctx, stmts[i]) })
}
