package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/plugin"
	"github.com/personhub/personhub/pkg/testenv/pluginfixture"
	"github.com/personhub/personhub/pkg/transform"
)

// The transformations phase: the same events ingested end to end four times, each
// into its own project: without a chain, with one trivial enabled
// transformation (adds a property), with one that drops half the
// events, and with the user-agent plugin (PostHog's User Agent
// Populator's shape, uploaded as users upload it: one esbuild bundle with
// its parser, detect-browser from the npm registry; every event carries a
// $useragent, in all four cases alike). Each case is a backlog the ingester child (which runs the
// transformation hook, as cmd/ingester does) folds from a fresh start, so
// the three rates and CPU costs are of the same work on the same machine
// in one run.

// G9Case is one case's ingest.
type G9Case struct {
	Name             string  `json:"name"`
	Events           int     `json:"events"`
	Stored           uint64  `json:"events_stored"`
	PerSecond        float64 `json:"events_per_second"`
	IngesterCPUPerUS float64 `json:"ingester_cpu_us_per_event"`
}

// G9Result is the phase: the cases, and the CPU of a dropped event
// against a stored one, both derived from the same run.
type G9Result struct {
	Cases []G9Case `json:"cases"`
	// StoredUS is a transformed, stored event's ingester CPU (the
	// trivial case); DroppedUS a dropped one's: the drop-half case's CPU
	// less its stored half at StoredUS.
	StoredUS  float64 `json:"stored_event_cpu_us"`
	DroppedUS float64 `json:"dropped_event_cpu_us"`
	// UserAgentBytes is the user-agent bundle's size; UserAgentErr why
	// that case was not run (the bundle could not be built).
	UserAgentBytes int    `json:"user_agent_bundle_bytes,omitempty"`
	UserAgentErr   string `json:"user_agent_error,omitempty"`
}

const (
	g9Trivial  = `export function processEvent(e) { e.properties.g9 = 1; return e }`
	g9DropHalf = `export function processEvent(e) { return parseInt(e.uuid.slice(-1), 16) % 2 ? null : e }`
)

func (s *session) g9(ctx context.Context) error {
	n := 100_000
	if s.p.mode == "quick" {
		n = 20_000
	}
	g := newGenerator(s.o.seed+9, s.p.ids)
	events := make([]genEvent, 0, n)
	for len(events) < n {
		if e := g.next(); !e.Command {
			events = append(events, e)
		}
	}
	for i := range events {
		events[i].Props = withUserAgent(events[i].Props, pluginfixture.UserAgents[i%len(pluginfixture.UserAgents)])
	}
	pub, err := transform.NewPublisher(ctx, s.n.js)
	if err != nil {
		return err
	}
	res := &G9Result{}
	s.res.Project.G9 = res
	type g9Plugin struct {
		name, src string
		config    map[string]any
	}
	cases := []g9Plugin{{name: "none"}, {name: "trivial", src: g9Trivial}, {name: "drop-half", src: g9DropHalf}}
	// The bundle needs test/node's packages (make test-clients).
	if ua, err := pluginfixture.Bundle(".", "user-agent.ts", filepath.Join("test", "node", "node_modules")); err != nil {
		res.UserAgentErr = err.Error() + " (run `make test-clients`)"
	} else {
		res.UserAgentBytes = len(ua)
		// Override: the events carry a $browser, which the plugin
		// otherwise leaves alone; every event is parsed.
		cases = append(cases, g9Plugin{name: "user-agent", src: ua, config: map[string]any{"overrideUserAgentDetails": "true"}})
	}
	for i, c := range cases {
		project := s.project + 900 + uint64(i)
		if c.src != "" {
			if err := pub.PublishChain(ctx, project, []plugin.Link{{ConfigID: uint64(900 + i), PluginID: 900, Filename: "index.js", Source: c.src, Config: c.config}}); err != nil {
				return err
			}
		}
		// The same events under their own uuids: JetStream would take
		// a uuid published again for a duplicate and drop it.
		for j := range events {
			events[j].UUID[10] ^= byte(i + 1)
		}
		gc, err := s.g9Case(ctx, c.name, project, events)
		if err != nil {
			return fmt.Errorf("G9 %s: %w", c.name, err)
		}
		res.Cases = append(res.Cases, gc)
		s.lg.f("G9 %s: %.0f events/s, ingester %.1f us/event, %d of %d stored", gc.Name, gc.PerSecond, gc.IngesterCPUPerUS, gc.Stored, gc.Events)
	}
	t, d := res.Cases[1], res.Cases[2]
	res.StoredUS = t.IngesterCPUPerUS
	if dropped := float64(d.Events) - float64(d.Stored); dropped > 0 {
		res.DroppedUS = (d.IngesterCPUPerUS*float64(d.Events) - float64(d.Stored)*res.StoredUS) / dropped
	}
	s.lg.f("G9: stored event %.1f us, dropped event %.1f us of ingester CPU", res.StoredUS, res.DroppedUS)
	return nil
}

// g9Case publishes the events to project as a backlog, then times a fresh
// ingester child from its first delivery to the last event's commit.
func (s *session) g9Case(ctx context.Context, name string, project uint64, events []genEvent) (G9Case, error) {
	c := G9Case{Name: name, Events: len(events)}
	pr, err := publishAll(ctx, s.n.pubs, project, events)
	if err != nil {
		return c, err
	}
	ing, err := startIngester(s.n.url, s.ch.addr, benchDB, filepath.Join(s.tmp, "ingester-g9-"+name+".log"), s.cfg)
	if err != nil {
		return c, err
	}
	defer func() { _ = ing.stop() }()
	if err := ing.startCPUProfile(s.profile("ingester-g9-" + name + ".cpu.pprof")); err != nil {
		return c, err
	}
	if err := s.waitFirstDelivery(ctx); err != nil {
		return c, err
	}
	meter := newCPUMeter(ing.pid)
	start := time.Now()
	if err := s.watcher.Wait(ctx, pr.lastSeq, time.Hour); err != nil {
		return c, fmt.Errorf("waiting for seq %d: %w", pr.lastSeq, err)
	}
	elapsed := time.Since(start)
	cpu := meter.stop()
	_ = ing.stopCPUProfile()
	c.PerSecond = float64(len(events)) / elapsed.Seconds()
	c.IngesterCPUPerUS = cpu[0] / float64(len(events)) * 1e6
	c.Stored = s.count(ctx, "SELECT count() FROM events WHERE project_id = ?", project)
	if c.Stored == 0 {
		return c, fmt.Errorf("no event of project %d stored", project)
	}
	return c, nil
}

// withUserAgent adds "$useragent": ua to a properties object's text.
func withUserAgent(props, ua string) string {
	b, _ := json.Marshal(ua)
	kv := `"$useragent":` + string(b)
	if strings.TrimSpace(props) == "{}" || props == "" {
		return "{" + kv + "}"
	}
	return "{" + kv + "," + strings.TrimPrefix(strings.TrimSpace(props), "{")
}

// g9UserAgentGoal records the user-agent plugin's rate against the case
// without a chain: a real plugin's cost, with no target of its own.
func g9UserAgentGoal(r *G9Result) Goal {
	const what, target = "ingest with the user-agent plugin (an esbuild bundle with detect-browser) vs none", "recorded"
	switch {
	case r == nil:
		return notMeasured("G9", what, target, "not measured")
	case r.UserAgentErr != "":
		return notMeasured("G9", what, target, "not run: "+r.UserAgentErr)
	case len(r.Cases) < 4 || r.Cases[0].PerSecond == 0:
		return notMeasured("G9", what, target, "not measured")
	}
	ua, none := r.Cases[3], r.Cases[0]
	x := ratio(ua.PerSecond, none.PerSecond)
	return goal("G9", what, target, fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s; ingester CPU %.1f vs %.1f us/event; bundle %d KiB)",
		x, ua.PerSecond, none.PerSecond, ua.IngesterCPUPerUS, none.IngesterCPUPerUS, r.UserAgentBytes>>10), x, true)
}

// g9Goal is the transformations' line: the trivial case's rate against the case without
// a chain, and a dropped event's CPU against a stored one's.
func g9Goal(r *G9Result) Goal {
	const what, target = "ingest with one trivial transformation vs none; dropped vs stored event CPU", ">= 0.60x; dropped < stored"
	if r == nil || len(r.Cases) < 3 || r.Cases[0].PerSecond == 0 {
		return notMeasured("G9", what, target, "not measured")
	}
	x := ratio(r.Cases[1].PerSecond, r.Cases[0].PerSecond)
	// The ingester CPU per event too: on a shared machine the rates move
	// with the others' load, the CPU per event much less.
	return goal("G9", what, target, fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s; ingester CPU %.1f vs %.1f us/event); dropped %.1f us vs stored %.1f us", x,
		r.Cases[1].PerSecond, r.Cases[0].PerSecond, r.Cases[1].IngesterCPUPerUS, r.Cases[0].IngesterCPUPerUS, r.DroppedUS, r.StoredUS), x, x >= 0.6 && r.DroppedUS < r.StoredUS)
}
