package transform

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/plugin"
)

// Step is one enabled plugin config of a project's chain: its code and
// config as of the event's position in the log (see docs/architecture.md,
// "Transformations").
type Step struct {
	ConfigID uint64
	PluginID uint64
	Order    int
	Filename string         // the entry file's name (index.ts, index.js, ...)
	Source   string         // the entry file
	Config   map[string]any // secrets included; never logged
	// Attachments are meta.attachments, by key (contents included).
	Attachments map[string]plugin.AttachmentFile
	// hash is version(), when known (a resolved Ref): computing it hashes
	// the source and encodes the config, per event otherwise.
	hash string
}

// version identifies a step's code and config: an instance is rebuilt
// (setupPlugin runs again) when either changes.
func (s Step) version() string {
	if s.hash != "" {
		return s.hash
	}
	h := sha256.New()
	cfg, _ := json.Marshal(s.Config) // map keys are sorted: stable
	for _, part := range [][]byte{[]byte(s.Filename), {0}, []byte(s.Source), {0}, cfg} {
		h.Write(part)
	}
	// Only a step with attachments hashes them: versions stored before
	// attachments keep their names.
	for _, k := range slices.Sorted(maps.Keys(s.Attachments)) {
		a := s.Attachments[k]
		for _, part := range []string{k, a.ContentType, a.FileName, a.SHA256} {
			h.Write([]byte{0})
			h.Write([]byte(part))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Outcomes of a step.
const (
	OutcomeOK      = "ok"      // the step's result goes on
	OutcomeDropped = "dropped" // processEvent returned null or undefined
	OutcomeFailed  = "failed"  // threw, timed out, or returned a wrong shape: the input goes on
	OutcomeSkipped = "skipped" // an earlier step dropped the event
)

// StepResult is what one step did.
type StepResult struct {
	ConfigID uint64        `json:"plugin_config_id"`
	PluginID uint64        `json:"plugin_id"`
	Outcome  string        `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	Event    *Event        `json:"event"` // after the step; nil when dropped or skipped
	Duration time.Duration `json:"-"`
	// Millis is Duration for JSON answers (the dry run).
	Millis float64 `json:"duration_ms"`
	// Interrupted: this run stopped the step at its time or memory limit,
	// a fact of this run rather than of the event (the ingester records
	// it, see Plan). Recorded: the failure was a recorded one, applied
	// without running.
	Interrupted bool `json:"-"`
	Recorded    bool `json:"-"`
}

// Plan says how a step runs on one event. Recorded, when not empty, is the
// error of an interruption recorded for this event and step by an earlier
// run: applied without running, so a replay gets that run's outcome.
// Timeout, when positive, replaces Limits.Timeout (a replay re-runs with a
// much larger one a step that once finished in time).
type Plan struct {
	Recorded string
	Timeout  time.Duration
}

// ErrRecorded is a step failure applied from the record of an earlier run.
var ErrRecorded = errors.New("recorded failure of an earlier run")

// Result is a chain's output: the event to store (nil: dropped) and each
// step.
type Result struct {
	Event *Event
	Steps []StepResult
}

// Stats are one plugin config's counts since the process started.
type Stats struct {
	In      uint64        `json:"events_in"`
	Dropped uint64        `json:"events_dropped"`
	Failed  uint64        `json:"events_failed"`
	Time    time.Duration `json:"-"`
}

type counts struct {
	in, dropped, failed, nanos atomic.Uint64
	// lastLog (unix nanoseconds) and suppressed bound failure logs to one
	// a second per config: a plugin that throws on every event would
	// otherwise log every event.
	lastLog    atomic.Int64
	suppressed atomic.Uint64
}

// failureLogEvery is the least time between two failure logs of a config.
const failureLogEvery = time.Second

// shouldLog reports whether a failure is logged now, and how many were
// not logged since the last one.
func (c *counts) shouldLog(now time.Time) (bool, uint64) {
	last := c.lastLog.Load()
	if now.UnixNano()-last >= int64(failureLogEvery) && c.lastLog.CompareAndSwap(last, now.UnixNano()) {
		return true, c.suppressed.Swap(0)
	}
	c.suppressed.Add(1)
	return false, 0
}

// slot holds a config's live instance; its mutex serializes calls (a goja
// runtime is single-threaded).
type slot struct {
	mu      sync.Mutex
	version string
	inst    *instance // nil: to be built
	// failed is why the version could not be built (code that does not
	// compile, a setupPlugin that throws): each event of the version
	// fails with it at once instead of building again. A build stopped
	// by its time or memory limit is not kept: that is a fact of the
	// moment, not of the code.
	failed error
}

// Runtime runs chains of transformations. Safe for concurrent use.
type Runtime struct {
	limits Limits
	log    *slog.Logger
	mu     sync.Mutex
	slots  map[uint64]*slot // by config id
	stats  map[uint64]*counts
	// dryRuns holds a token per dry run under way: a full channel is
	// ErrBusy, never a queue (each run may hold MaxHeapGrowth).
	dryRuns chan struct{}
	dog     *watchdog // bounds every call of every instance
	geo     *geoip.DB // meta.geoip's database; nil: locate answers null
	events  *prometheus.CounterVec
	seconds *prometheus.CounterVec
	builds  *prometheus.CounterVec
}

// Option sets up a Runtime beyond its limits.
type Option func(*Runtime)

// WithGeoIP gives every instance's meta.geoip.locate the database db
// (shared: it is opened once per process); nil, the default, makes locate
// answer null.
func WithGeoIP(db *geoip.DB) Option { return func(r *Runtime) { r.geo = db } }

// New returns a runtime; reg may be nil.
func New(limits Limits, log *slog.Logger, reg prometheus.Registerer, opts ...Option) *Runtime {
	r := &Runtime{limits: limits.withDefaults(), log: log,
		slots: map[uint64]*slot{}, stats: map[uint64]*counts{}, dog: newWatchdog(limits.withDefaults().HeapSample),
		dryRuns: make(chan struct{}, limits.withDefaults().MaxDryRuns),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transformation_events_total",
			Help: "Events through a plugin config's processEvent, by outcome (ok, dropped, failed)."}, []string{"plugin_config_id", "outcome"}),
		seconds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transformation_seconds_total",
			Help: "Time spent in a plugin config's processEvent."}, []string{"plugin_config_id"}),
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "transformation_runtime_builds_total",
			Help: "Runtimes built for a plugin config (its code run and setupPlugin called): at its first event, after a change, after a call stopped by a limit; failed ones too."}, []string{"plugin_config_id"}),
	}
	if reg != nil {
		reg.MustRegister(r.events, r.seconds, r.builds)
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Run runs the chain on ev: steps in ascending order (then config id),
// each on the previous output, counted per config. A drop stops the chain.
func (r *Runtime) Run(ctx context.Context, chain []Step, ev Event) Result {
	return r.run(ctx, chain, ev, nil, r.live).materialized()
}

// RunPlanned is Run with a Plan per step (by config id; nil: the defaults).
func (r *Runtime) RunPlanned(ctx context.Context, chain []Step, ev Event, plan func(configID uint64) Plan) Result {
	return r.run(ctx, chain, ev, plan, r.live)
}

// ErrBusy is a dry run refused because Limits.MaxDryRuns are under way.
var ErrBusy = errors.New("too many dry runs under way; try again shortly")

// DryRun runs the chain like Run but in fresh instances (setupPlugin runs
// for each, no state of the live ones is touched) and counts nothing. At
// most Limits.MaxDryRuns run at once; beyond that ErrBusy at once.
func (r *Runtime) DryRun(ctx context.Context, chain []Step, ev Event) (Result, error) {
	select {
	case r.dryRuns <- struct{}{}:
	default:
		return Result{}, ErrBusy
	}
	defer func() { <-r.dryRuns }()
	return r.run(ctx, chain, ev, nil, r.fresh).materialized(), nil
}

// materialized is res with every event's properties a map (JSON answers,
// callers outside the ingester).
func (res Result) materialized() Result {
	m := func(e *Event) *Event {
		if e == nil || e.text == nil {
			return e
		}
		x := e.materialized()
		return &x
	}
	res.Event = m(res.Event)
	for i := range res.Steps {
		res.Steps[i].Event = m(res.Steps[i].Event)
	}
	return res
}

// Forget drops a config's live instance and counts (a deleted config):
// they would otherwise stay for the life of the process.
func (r *Runtime) Forget(configID uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.slots, configID)
	delete(r.stats, configID)
	id := strconv.FormatUint(configID, 10)
	r.seconds.DeleteLabelValues(id)
	r.builds.DeleteLabelValues(id)
	for _, o := range []string{OutcomeOK, OutcomeDropped, OutcomeFailed} {
		r.events.DeleteLabelValues(id, o)
	}
}

type caller func(s Step, ev Event, p Plan) (*Event, error)

func (r *Runtime) run(ctx context.Context, chain []Step, ev Event, plan func(uint64) Plan, call caller) Result {
	chain = slices.Clone(chain)
	slices.SortStableFunc(chain, func(a, b Step) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.ConfigID, b.ConfigID)) })
	res := Result{Event: &ev}
	for _, s := range chain {
		sr := StepResult{ConfigID: s.ConfigID, PluginID: s.PluginID}
		switch {
		case res.Event == nil:
			sr.Outcome = OutcomeSkipped
		case ctx.Err() != nil:
			sr.Outcome, sr.Error, sr.Event = OutcomeFailed, ctx.Err().Error(), res.Event
		default:
			var p Plan
			if plan != nil {
				p = plan(s.ConfigID)
			}
			start := time.Now()
			out, err := call(s, *res.Event, p)
			sr.Duration = time.Since(start)
			sr.Millis = float64(sr.Duration.Microseconds()) / 1000
			switch {
			case err != nil:
				sr.Outcome, sr.Error, sr.Event = OutcomeFailed, err.Error(), res.Event
				sr.Recorded = errors.Is(err, ErrRecorded)
				sr.Interrupted = !sr.Recorded && (errors.Is(err, ErrTimeout) || errors.Is(err, ErrMemory))
			case out == nil:
				sr.Outcome, res.Event = OutcomeDropped, nil
			default:
				sr.Outcome, sr.Event, res.Event = OutcomeOK, out, out
			}
		}
		res.Steps = append(res.Steps, sr)
	}
	return res
}

// live calls the config's cached instance, building it when its version
// changed, and counts the call.
func (r *Runtime) live(s Step, ev Event, p Plan) (*Event, error) {
	r.mu.Lock()
	sl := r.slots[s.ConfigID]
	if sl == nil {
		sl = &slot{}
		r.slots[s.ConfigID] = sl
	}
	c := r.stats[s.ConfigID]
	if c == nil {
		c = &counts{}
		r.stats[s.ConfigID] = c
	}
	r.mu.Unlock()

	start := time.Now()
	var out *Event
	var err error
	if p.Recorded != "" {
		err = fmt.Errorf("%w: %s", ErrRecorded, p.Recorded)
	} else {
		out, err = r.callSlot(sl, s, ev, p.Timeout)
	}
	took := time.Since(start)
	id := strconv.FormatUint(s.ConfigID, 10)
	c.in.Add(1)
	c.nanos.Add(uint64(took))
	r.seconds.WithLabelValues(id).Add(took.Seconds())
	switch {
	case err != nil:
		c.failed.Add(1)
		r.events.WithLabelValues(id, OutcomeFailed).Inc()
		// The config is never logged: it holds secrets.
		if ok, suppressed := c.shouldLog(time.Now()); ok {
			r.log.Warn("transformation failed", "plugin_config_id", s.ConfigID, "plugin_id", s.PluginID, "event_uuid", ev.UUID, "error", err,
				"failures_not_logged_since_last", suppressed)
		}
	case out == nil:
		c.dropped.Add(1)
		r.events.WithLabelValues(id, OutcomeDropped).Inc()
	default:
		r.events.WithLabelValues(id, OutcomeOK).Inc()
	}
	return out, err
}

func (r *Runtime) callSlot(sl *slot, s Step, ev Event, timeout time.Duration) (*Event, error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	v := s.version()
	if sl.inst == nil || sl.version != v {
		if sl.failed != nil && sl.version == v {
			return nil, sl.failed
		}
		r.builds.WithLabelValues(strconv.FormatUint(s.ConfigID, 10)).Inc()
		inst, err := r.build(s)
		if err != nil {
			sl.inst, sl.version, sl.failed = nil, v, nil
			if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrMemory) {
				sl.failed = err
			}
			return nil, err
		}
		sl.inst, sl.version, sl.failed = inst, v, nil
	}
	out, err := sl.inst.call(ev, timeout)
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrMemory) {
		// An interrupted plugin may have left its state half-updated, and
		// whatever it allocated is freed with its runtime: start afresh.
		sl.inst = nil
	}
	return out, err
}

func (r *Runtime) fresh(s Step, ev Event, p Plan) (*Event, error) {
	if p.Recorded != "" {
		return nil, fmt.Errorf("%w: %s", ErrRecorded, p.Recorded)
	}
	inst, err := r.build(s)
	if err != nil {
		return nil, err
	}
	return inst.call(ev, p.Timeout)
}

// build compiles and instantiates a step. Live instances are rebuilt only
// when a config's version changes, so programs are not cached beyond
// them: a cache by code would grow with every edit of every plugin.
func (r *Runtime) build(s Step) (*instance, error) {
	prog, err := compile(s.Filename, s.Source)
	if err != nil {
		return nil, err
	}
	return newInstance(prog, s.Config, s.Attachments, r.limits, r.dog, r.geo)
}

// Stats returns a config's counts (zero when it never ran here).
func (r *Runtime) Stats(configID uint64) Stats {
	r.mu.Lock()
	c := r.stats[configID]
	r.mu.Unlock()
	if c == nil {
		return Stats{}
	}
	return Stats{In: c.in.Load(), Dropped: c.dropped.Load(), Failed: c.failed.Load(), Time: time.Duration(c.nanos.Load())}
}
