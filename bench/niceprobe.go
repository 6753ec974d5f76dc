package main

import (
	"context"
	"strconv"
	"syscall"
	"time"

	"github.com/personhub/personhub/pkg/process"
)

// niceProbe is G4's A/B for the ingester's CPU priority, interleaved in
// one run so that the machine's load hits both sides alike: with the
// backlog kept full, it sets the ingester child's threads to niceness 0,
// then to the niceness it started at (INGESTER_NICE; if that is 0,
// process.IngesterNice), for `rounds` rounds, and each time measures GET person
// at c=1 (bare driver and HTTP API, 1.5 s each) and the events the
// ingester folded meanwhile. Setting a niceness back to 0 needs
// CAP_SYS_NICE (root); without it the probe says so and does nothing.
// Off unless -g4-nice-probe is given (docs/performance.md, "h/g4l").
func (s *session) niceProbe(ctx context.Context, ops *readOps, rounds int) {
	start, err := syscall.Getpriority(syscall.PRIO_PROCESS, s.ing.pid)
	if err != nil {
		s.lg.f("nice probe: %v; skipped", err)
		return
	}
	// The raw getpriority answers 20 - nice; the child goes back to its
	// own niceness after the probe.
	defer func() { _ = setProcessNice(s.ing.pid, 20-start) }()
	nice := 20 - start
	if nice == 0 {
		nice = process.IngesterNice
	}
	levels := []int{0, nice}
	s.probeSides(ctx, ops.inProcess(), rounds, "nice probe",
		[]string{"ingester nice " + strconv.Itoa(levels[0]), "ingester nice " + strconv.Itoa(levels[1])},
		func(i int) error { return setProcessNice(s.ing.pid, levels[i]) })
}

// probeSides is the loop of G4's interleaved A/B probes (niceProbe,
// mergeProbe, chNiceProbe, selfNiceProbe): with the backlog kept full, for `rounds` rounds, each side
// in turn is set (set(i)), then GET person at c=1 is measured by clients
// (bare driver and HTTP API, 1.5 s each) with the events the ingester folded meanwhile;
// each side's figures are logged under its name. A failing set ends the
// probe.
func (s *session) probeSides(ctx context.Context, clients probeClients, rounds int, probe string, names []string, set func(i int) error) {
	type side struct {
		raw, api []time.Duration
		events   float64
		secs     float64
	}
	sides := make([]side, len(names))
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		for i := range names {
			if err := set(i); err != nil {
				s.lg.f("%s: %s: %v; skipped", probe, names[i], err)
				return
			}
			time.Sleep(300 * time.Millisecond) // let the change settle
			e0, t0 := s.ing.metric("ingester_events_total"), time.Now()
			b := budget{N: 100_000, Max: 1500 * time.Millisecond}
			raw := clients.raw.measure(ctx, 1, b, r*1000)
			api := clients.api.measure(ctx, 1, b, r*1000+500)
			sd := &sides[i]
			sd.raw, sd.api = append(sd.raw, raw.lat...), append(sd.api, api.lat...)
			sd.events += s.ing.metric("ingester_events_total") - e0
			sd.secs += time.Since(t0).Seconds()
		}
	}
	for i, sd := range sides {
		raw, api := summarize(sd.raw), summarize(sd.api)
		s.lg.f("%s: %s: GET person c=1 bare n=%d p50=%.2f p90=%.2f p99=%.2f ms, HTTP API n=%d p50=%.2f p90=%.2f p99=%.2f ms; ingest %.0f events/s",
			probe, names[i], raw.N, raw.P50ms, raw.P90ms, raw.P99ms, api.N, api.P50ms, api.P90ms, api.P99ms, sd.events/sd.secs)
	}
}

// probeClients are the GET person clients a probe measures: the bare
// driver and the HTTP API, in this process (inProcess) or in the reader
// child.
type probeClients struct{ raw, api namedOp }

// inProcess are the probe's clients in this process.
func (o *readOps) inProcess() probeClients {
	return probeClients{raw: namedOp{op: o.rawGet}, api: namedOp{op: o.apiGet}}
}
