package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/event"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/plugin"
)

// Hook runs each project's chain on its events in the ingester, before the
// fold (ingest.Hook). The chain an event gets is the one set by the last
// chain command before it in the log; steps interrupted by a limit are
// recorded before the batch commits, so a refold or a replay gives the
// same events (outcomes.go, docs/architecture.md "Transformations").
type Hook struct {
	rt       *Runtime
	versions *Versions
	chains   *Chains
	rec      *outcomes
	log      *slog.Logger
	// long is the time limit of a step re-run below the mark (it ran in
	// time once): the run's limit times 100.
	long    time.Duration
	mu      sync.Mutex
	steps   map[string][]Step // resolved chains, by project and command seq
	metrics *configMetrics
	// recorded counts outcome records written, by kind.
	recorded *prometheus.CounterVec
}

// NewHook opens the version store and the outcome record (reading it
// whole: chains and interruptions are rare) on js. replicas is the
// record stream's, when created; reg may be nil.
func NewHook(ctx context.Context, js jetstream.JetStream, rt *Runtime, replicas int, log *slog.Logger, reg prometheus.Registerer) (*Hook, error) {
	vs, err := OpenVersions(ctx, js)
	if err != nil {
		return nil, err
	}
	chains := NewChains()
	rec, err := openOutcomes(ctx, js, replicas, chains)
	if err != nil {
		return nil, err
	}
	kv, err := plugin.OpenConfigMetrics(ctx, js)
	if err != nil {
		return nil, err
	}
	h := &Hook{rt: rt, versions: vs, chains: chains, rec: rec, log: log, long: 100 * rt.limits.Timeout, steps: map[string][]Step{},
		metrics: &configMetrics{kv: kv, base: map[uint64]plugin.ConfigMetrics{}},
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transformation_outcomes_recorded_total",
			Help: "Records written to " + StreamOutcomes + " by kind: chain (a chain command folded), failure (a step interrupted by a limit), mark."}, []string{"kind"})}
	if reg != nil {
		reg.MustRegister(h.recorded)
	}
	return h, nil
}

// Transform implements ingest.Hook.
func (h *Hook) Transform(ctx context.Context, in []ingest.HookInput) ([]fold.Input, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]fold.Input, 0, len(in))
	var recs []outcome
	mark := h.rec.markAt()
	ran := false
	counted := map[uint64]bool{}
	for _, x := range in {
		switch {
		case x.Event.Event == event.SetTransformations:
			if x.Command {
				recs = h.setChain(x, recs)
			}
			continue
		case x.Command:
			// Person writes through the API are not transformed.
			out = append(out, x.Input)
			continue
		}
		refs, at := h.chains.At(x.ProjectID, x.Seq)
		if len(refs) == 0 {
			out = append(out, x.Input)
			continue
		}
		steps, err := h.resolve(ctx, x.ProjectID, at, refs)
		if err != nil {
			return nil, err // the version store is unreachable: retried
		}
		ev, err := FromEnvelope(x.ProjectID, &x.Event)
		if err != nil {
			h.log.Error("transformation skipped: event not in plugin shape", "seq", x.Seq, "err", err)
			out = append(out, x.Input)
			continue
		}
		versions := make(map[uint64]string, len(refs))
		for _, r := range refs {
			versions[r.ConfigID] = r.Version
		}
		ran = ran || x.Seq > mark
		res := h.rt.RunPlanned(ctx, steps, ev, h.rec.plan(x.Seq, versions, h.long))
		if ctx.Err() != nil {
			// A step cut short by the stop is no outcome of the event.
			return nil, ctx.Err()
		}
		changed := false
		for _, s := range res.Steps {
			changed = changed || s.Outcome == OutcomeOK
			if s.Outcome != OutcomeSkipped {
				counted[s.ConfigID] = true
			}
			if s.Interrupted {
				if x.Seq <= mark {
					h.log.Error("transformation interrupted on a refold although it once ran in time; recorded, the outcome may differ from the first run", "seq", x.Seq, "plugin_config_id", s.ConfigID)
				}
				recs = append(recs, outcome{Kind: recordFailure, Project: x.ProjectID, Seq: x.Seq, ConfigID: s.ConfigID, Version: versions[s.ConfigID], Error: s.Error})
			}
		}
		if res.Event == nil {
			continue // dropped: folds nothing, no events row
		}
		if changed {
			pe, err := res.Event.Parsed()
			if err != nil { // checked per step already; kept as a guard
				h.log.Error("transformed event refused", "seq", x.Seq, "err", err)
			} else {
				x.Event = pe
			}
		}
		out = append(out, x.Input)
	}
	if last := in[len(in)-1].Seq; ran && last > mark {
		recs = append(recs, outcome{Kind: recordMark, Seq: last})
	}
	if len(recs) > 0 {
		if err := h.rec.publish(ctx, recs, h.chains); err != nil {
			return nil, err
		}
		for _, r := range recs {
			h.recorded.WithLabelValues(r.Kind).Inc()
		}
	}
	if len(counted) > 0 {
		// Counts are for people, not for the fold: a failure to write
		// them is logged, and the next batch writes the totals again.
		if err := h.metrics.write(ctx, h.rt, counted); err != nil {
			h.log.Warn("transformation metrics not written", "err", err)
		}
	}
	return out, nil
}

// setChain folds a chain command: the chain applies from the next
// message of the project on. Its record goes out with the batch.
func (h *Hook) setChain(x ingest.HookInput, recs []outcome) []outcome {
	var props map[string]json.RawMessage
	refs, err := []Ref(nil), json.Unmarshal(x.Event.PropertiesRaw, &props)
	if err == nil {
		refs, err = ParseRefs(props[event.PropTransformations])
	}
	if err != nil {
		// Only the API publishes chains; a bad one changes nothing, the
		// same way on every replay.
		h.log.Error("chain command ignored", "seq", x.Seq, "project_id", x.ProjectID, "err", err)
		return recs
	}
	// Recorded at every fold of the command, not only the first: a batch
	// whose records failed to publish is folded again, and its chain must
	// be recorded before it commits. Applying a record twice is harmless.
	h.chains.Set(x.ProjectID, x.Seq, refs)
	return append(recs, outcome{Kind: recordChain, Project: x.ProjectID, Seq: x.Seq, Refs: refs})
}

// resolve reads a chain's versions once per chain command.
func (h *Hook) resolve(ctx context.Context, project, at uint64, refs []Ref) ([]Step, error) {
	key := strconv.FormatUint(project, 10) + "/" + strconv.FormatUint(at, 10)
	h.mu.Lock()
	steps, ok := h.steps[key]
	h.mu.Unlock()
	if ok {
		return steps, nil
	}
	steps, err := Resolve(ctx, h.versions, refs)
	if err != nil {
		return nil, fmt.Errorf("transform: chain of project %d at seq %d: %w", project, at, err)
	}
	h.mu.Lock()
	h.steps[key] = steps
	h.mu.Unlock()
	return steps, nil
}

// NewIngestHook is the ingester's hook with its own runtime, whose
// per-config metrics go to reg: the composition root's one call.
func NewIngestHook(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger, reg prometheus.Registerer) (*Hook, error) {
	return NewHook(ctx, js, New(Limits{}, log.With("component", "transform"), reg), replicas, log.With("component", "transform"), reg)
}
