package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
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
	steps   map[chainKey][]Step // resolved chains, by project and command seq
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
	h := &Hook{rt: rt, versions: vs, chains: chains, rec: rec, log: log, long: 100 * rt.limits.Timeout, steps: map[chainKey][]Step{},
		metrics: &configMetrics{kv: kv, base: map[uint64]plugin.ConfigMetrics{}},
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transformation_outcomes_recorded_total",
			Help: "Records written to " + StreamOutcomes + " by kind: chain (a chain command folded), failure (a step interrupted by a limit), mark."}, []string{"kind"})}
	if reg != nil {
		reg.MustRegister(h.recorded)
	}
	return h, nil
}

var _ ingest.PassingHook = (*Hook)(nil)

// Passes implements ingest.PassingHook: no input is a chain command and
// none has a chain in force, so Transform would return them as they are
// and record nothing.
func (h *Hook) Passes(in []fold.Input) bool {
	for k := range in {
		if in[k].Event.Event == event.SetTransformations {
			return false
		}
		if refs, _ := h.chains.At(in[k].ProjectID, in[k].Seq); len(refs) > 0 {
			return false
		}
	}
	return true
}

// Transform implements ingest.Hook. Projects are independent (a chain
// and its configs belong to one project), so their events run on all
// cores, each project's in stream order.
func (h *Hook) Transform(ctx context.Context, in []ingest.HookInput) ([]fold.Input, error) {
	if len(in) == 0 {
		return nil, nil
	}
	var order []uint64
	byProject := map[uint64][]int{}
	for i, x := range in {
		if _, ok := byProject[x.ProjectID]; !ok {
			order = append(order, x.ProjectID)
		}
		byProject[x.ProjectID] = append(byProject[x.ProjectID], i)
	}
	keep := make([]bool, len(in))
	outs := make([]fold.Input, len(in))
	workers := min(runtime.GOMAXPROCS(0), len(order))
	accs := make([]batchAcc, workers)
	next := make(chan uint64, len(order))
	for _, p := range order {
		next <- p
	}
	close(next)
	var wg sync.WaitGroup
	for w := range workers {
		accs[w].counted = map[uint64]bool{}
		accs[w].ran = map[uint64]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if accs[w].err != nil {
					return
				}
				mark := h.rec.markAt(p)
				for _, i := range byProject[p] {
					if outs[i], keep[i], accs[w].err = h.one(ctx, in[i], mark, &accs[w]); accs[w].err != nil {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	var recs []outcome
	counted := map[uint64]bool{}
	ran := map[uint64]bool{}
	for _, a := range accs {
		if a.err != nil {
			return nil, a.err
		}
		recs = append(recs, a.recs...)
		for p := range a.ran {
			ran[p] = true
		}
		for id := range a.counted {
			counted[id] = true
		}
	}
	out := make([]fold.Input, 0, len(in))
	for i := range in {
		if keep[i] {
			out = append(out, outs[i])
		}
	}
	for _, p := range order {
		// After the failure records: the project's mark says they are
		// all written. Marks are per project (a project's events are
		// folded in stream order by one ingester, whichever partition
		// it runs), so a lagging partition's events are never taken
		// for run by another partition's progress.
		if ran[p] {
			idx := byProject[p]
			recs = append(recs, outcome{Kind: recordMark, Project: p, Seq: in[idx[len(idx)-1]].Seq})
		}
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

// batchAcc is what one worker learned about the batch: records to write,
// configs that ran, the projects of which an event above the mark ran.
type batchAcc struct {
	recs    []outcome
	counted map[uint64]bool
	ran     map[uint64]bool
	err     error
}

// one transforms one message: the input to fold, and false when it folds
// nothing (dropped, or a chain command).
func (h *Hook) one(ctx context.Context, x ingest.HookInput, mark uint64, acc *batchAcc) (fold.Input, bool, error) {
	switch {
	case x.Event.Event == event.SetTransformations:
		if x.Command {
			acc.recs = h.setChain(x, acc.recs)
		}
		return x.Input, false, nil
	case x.Command:
		// Person writes through the API are not transformed.
		return x.Input, true, nil
	}
	refs, at := h.chains.At(x.ProjectID, x.Seq)
	if len(refs) == 0 {
		return x.Input, true, nil
	}
	steps, err := h.resolve(ctx, x.ProjectID, at, refs)
	if err != nil {
		return x.Input, false, err // the version store is unreachable: retried
	}
	ev, err := fromEnvelopeText(x.ProjectID, &x.Event)
	if err != nil {
		h.log.Error("transformation skipped: event not in plugin shape", "seq", x.Seq, "err", err)
		return x.Input, true, nil
	}
	versions := make(map[uint64]string, len(refs))
	for _, r := range refs {
		versions[r.ConfigID] = r.Version
	}
	if x.Seq > mark {
		acc.ran[x.ProjectID] = true
	}
	res := h.rt.RunPlanned(ctx, steps, ev, h.rec.plan(x.ProjectID, x.Seq, versions, h.long))
	if ctx.Err() != nil {
		// A step cut short by the stop is no outcome of the event.
		return x.Input, false, ctx.Err()
	}
	changed := false
	for _, s := range res.Steps {
		changed = changed || s.Outcome == OutcomeOK
		if s.Outcome != OutcomeSkipped {
			acc.counted[s.ConfigID] = true
		}
		if s.Interrupted {
			if x.Seq <= mark {
				h.log.Error("transformation interrupted on a refold although it once ran in time; recorded, the outcome may differ from the first run", "seq", x.Seq, "plugin_config_id", s.ConfigID)
			}
			acc.recs = append(acc.recs, outcome{Kind: recordFailure, Project: x.ProjectID, Seq: x.Seq, ConfigID: s.ConfigID, Version: versions[s.ConfigID], Error: s.Error})
		}
	}
	if res.Event == nil {
		return x.Input, false, nil // dropped: folds nothing, no events row
	}
	if changed {
		pe, err := res.Event.Parsed()
		if err != nil { // checked per step already; kept as a guard
			h.log.Error("transformed event refused", "seq", x.Seq, "err", err)
		} else {
			x.Event = pe
		}
	}
	return x.Input, true, nil
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

// chainKey is a chain: its project and its command's seq.
type chainKey struct{ project, at uint64 }

// resolve reads a chain's versions once per chain command.
func (h *Hook) resolve(ctx context.Context, project, at uint64, refs []Ref) ([]Step, error) {
	key := chainKey{project, at}
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
func NewIngestHook(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Hook, error) {
	return NewHook(ctx, js, New(Limits{}, log.With("component", "transform"), reg, opts...), replicas, log.With("component", "transform"), reg)
}
