// Command bench measures the service's speed, cost and memory against raw
// baselines taken in the same run on the same data (the targets of
// docs/performance.md), prints a table and writes the results as JSON
// under bench/results/. `make bench` runs it; `make bench QUICK=1` runs the
// small dataset. See docs/performance.md.
//
// It starts its own ClickHouse (pkg/chlocal in a temp dir, or
// $CLICKHOUSE_ADDR) and an embedded JetStream server, runs the ingester as
// a child process (this binary with the ingester-child argument: pkg/ingest
// as cmd/ingester runs it, plus a loopback pprof endpoint), and the HTTP
// API in this process, wired as cmd/stack wires them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/personhub/personhub/pkg/ingest"
)

// plan is the size of one run.
type plan struct {
	mode          string
	events, ids   int
	persons       int // persons in the table for the read and memory measurements
	deletePersons int
	get1, get16   budget
	// list1 and list16 are the list rows' samples: p99 is the
	// ceil(0.99 n)-th fastest, so at 100 samples the second slowest, and
	// one stall of the shared machine decided the deep pages' rows; 300
	// (800 at c=16) make it the fourth (ninth) slowest.
	list1, list16 budget
	patchIdle     int
	patchLoad     int
	soak          time.Duration
	soakRate      int
	g5fSizes      []int // the list's project sizes as it grows, in order
}

func planFor(quick bool) plan {
	if quick {
		return plan{mode: "quick", events: 50_000, ids: 10_000, persons: 50_000, deletePersons: 1_000,
			get1: budget{300, 2 * time.Second}, get16: budget{600, 2 * time.Second},
			list1: budget{60, 3 * time.Second}, list16: budget{160, 2 * time.Second},
			patchIdle: 40, patchLoad: 8, g5fSizes: []int{100_000}}
	}
	return plan{mode: "full", events: 1_000_000, ids: 200_000, persons: 1_000_000, deletePersons: 10_000,
		get1: budget{1000, 20 * time.Second}, get16: budget{4000, 20 * time.Second},
		list1: budget{300, 30 * time.Second}, list16: budget{800, 20 * time.Second},
		patchIdle: 200, patchLoad: 40, soak: 10 * time.Minute, soakRate: 4000, g5fSizes: []int{100_000, 1_000_000, 5_000_000}}
}

type options struct {
	quick       bool
	out         string
	seed        uint64
	soak        time.Duration
	soakRate    int
	rssCeiling  int64
	keep        bool
	only        string // "": every phase; "g1": raw consume and ingest only; "g10": ingest and fill, then the analysis alone; "g5": then the reads and the list's growth; "g7": then the purge; "g9": the transformations alone
	purgeRuns   int    // the purge repeated on fresh copies (the first is the target's row)
	g5fSizes    string // comma-separated persons, overriding the plan's sizes for the list's growth
	writeLane   bool   // the ingester's -write-lane
	growFor     time.Duration
	growPers    int
	maxCached   int
	denseMisses int
	// streamCompression is the events stream's (stream.Config.Compression).
	streamCompression string
	batchSize         int
	g6Load            int // PATCHes while ingesting, overriding the plan's
	scale             int // the ten-times run (S1-S7) at this factor of the full run's size, alone
	replot            string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		if err := childMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench ingester:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == readerChildCommand {
		if err := readerChildMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench reader:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == apiChildCommand {
		if err := apiChildMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench api:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.scale, "scale", 0, "run S1-S7 alone at this multiple of the full run's size (10: 50M events over 50 days from 2M distinct ids, a list of 10M persons: about two and a half hours on two cores, and the disk it checks for first); with -quick a hundredth of it")
	fs.StringVar(&o.replot, "replot", "", "draw a scale run's plots again from its JSON results into -out, and run nothing")
	fs.BoolVar(&o.quick, "quick", false, "small dataset (~50k events), under two minutes")
	fs.BoolVar(&o.writeLane, "write-lane", ingest.DefaultConfig().WriteLane, "run the ingester with its write lane (its default): API writes folded ahead of the capture backlog (G6); -write-lane=false for the log order")
	fs.DurationVar(&o.growFor, "grow-for", ingest.DefaultConfig().GrowFor, "the ingester's -grow-for (batches that grow with the backlog; its default)")
	fs.IntVar(&o.growPers, "grow-persons", ingest.DefaultConfig().GrowPersons, "the ingester's -grow-persons (its default)")
	fs.IntVar(&o.batchSize, "batch-size", ingest.DefaultConfig().BatchSize, "the ingester's -batch-size (its default): the messages of one fold step, each step loading its persons' misses")
	fs.IntVar(&o.maxCached, "max-cached-persons", ingest.DefaultConfig().MaxCachedPersons, "the ingester's -max-cached-persons (its default)")
	fs.StringVar(&o.streamCompression, "stream-compression", "none", "the events stream's compression (the ingester's -stream-compression): s2 or none")
	fs.IntVar(&o.denseMisses, "dense-misses", ingest.DefaultConfig().DenseMisses, "the ingester's -dense-misses (its default; -1: never read a project whole, for A/B runs)")
	fs.StringVar(&o.out, "out", "bench/results", "folder for the JSON results and profiles")
	fs.Uint64Var(&o.seed, "seed", 42, "dataset seed")
	fs.DurationVar(&o.soak, "soak", -1, "soak duration (default 10m in full mode, none in quick mode; 0 skips)")
	fs.IntVar(&o.g6Load, "g6-load-patches", 0, "G6: PATCHes while ingesting (default 40; quick 8, whose p99 is the worst of 8: more make quick A/B pairs readable)")
	fs.IntVar(&o.soakRate, "soak-rate", 0, "events per second during the soak (default 4000)")
	var ceiling int64
	fs.Int64Var(&ceiling, "rss-ceiling-mib", 1024, "documented ingester RSS ceiling (G8) at the default max-cached-persons")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (ClickHouse and NATS data, logs)")
	fs.StringVar(&o.only, "only", "", "run one phase: g1 (raw consume and the ingest alone, no fill), g10, g5 (the reads, G4 and G5, and G5f), g7 (the purge), or g9 (ingest without a transformation, with a trivial one, with one dropping half and with the user-agent plugin, nothing else); for g10, g5 and g7 the persons are still ingested and filled first, and they combine (-only g10,g7: the purge over G10's events too, as in a full run). With -scale: s3 alone (the list project filled to the reference size and read, then to its full size and read again, nothing else), or s5, s6 or s7, combined as s6,s7: the events are published and ingested (S1's rate, without the raw consume), the list project filled for s7, and only those phases follow (s6 at its largest size)")
	fs.IntVar(&o.purgeRuns, "purge-runs", 1, "G7: purge fresh copies of the tables this many times, raw and deleter back to back each time (the first pair is G7's row; all are logged and kept in the JSON)")
	fs.StringVar(&o.g5fSizes, "g5f-sizes", "", "G5f's project sizes in persons, comma-separated (default 100000,1000000,5000000; quick 100000; \"none\" skips G5f)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	o.rssCeiling = ceiling << 20
	if err := checkOnly(o.only, o.scale); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.replot != "" {
		if err := replot(o.replot, o.out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// logf prints progress with the time since the start.
type progressLog struct{ start time.Time }

func (p progressLog) f(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	p := planFor(o.quick)
	if o.soak >= 0 {
		p.soak = o.soak
	}
	if o.soakRate > 0 {
		p.soakRate = o.soakRate
	}
	if p.soakRate == 0 {
		p.soakRate = 4000
	}
	if o.g6Load > 0 {
		p.patchLoad = o.g6Load
	}
	if o.g5fSizes != "" {
		sizes, err := parseSizes(o.g5fSizes)
		if err != nil {
			return err
		}
		p.g5fSizes = sizes
	}
	res := &Result{Started: time.Now().UTC(), Mode: p.mode, LoadAvg: [2]float64{loadAvg(), 0}}
	lg := progressLog{start: time.Now()}
	tmp, err := os.MkdirTemp("", "personhub-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		lg.f("temp dir %s (kept)", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.only != "" {
		res.Mode = p.mode + "-" + strings.ReplaceAll(o.only, ",", "-")
	}
	if o.scale > 0 {
		res.Mode = fmt.Sprintf("%s-scale%d", p.mode, o.scale)
		if o.only != "" {
			res.Mode += "-" + strings.ReplaceAll(o.only, ",", "-")
		}
	}
	stamp := res.Started.Format("20060102T150405Z") + "-" + res.Mode
	profile := func(name string) string {
		path, _ := filepath.Abs(filepath.Join(o.out, stamp+"-"+name))
		res.Profiles = append(res.Profiles, path)
		return path
	}

	lg.f("starting ClickHouse and JetStream")
	ch, err := startClickHouse(ctx, tmp, o.scale > 0)
	if err != nil {
		return err
	}
	defer ch.stop()
	n, err := startNATS(tmp)
	if err != nil {
		return err
	}
	defer n.stop()
	res.Machine = describeMachine(ch)
	res.Machine.DataDir, res.Machine.DataFS = tmp, describeFS(tmp)
	lg.f("data in %s: %s", tmp, res.Machine.DataFS)
	if strings.HasSuffix(res.Machine.DataFS, "(no journal)") {
		lg.f("warning: ext4 without a journal costs ClickHouse's parts much more CPU than a usual filesystem (docs/performance.md, \"Where the data lives\"); set TMPDIR to a directory elsewhere")
	}
	if ch.pid == 0 {
		res.Notes = append(res.Notes, "ClickHouse server process not found: its CPU time is not measured")
	}
	s := &session{o: o, p: p, res: res, lg: lg, tmp: tmp, ch: ch, n: n, profile: profile,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: ingest.DefaultConfig()}
	s.sp = scalePlanFor(o.scale, o.quick)
	s.cfg.WriteLane = o.writeLane
	s.cfg.GrowFor, s.cfg.GrowPersons, s.cfg.MaxCachedPersons, s.cfg.BatchSize = o.growFor, o.growPers, o.maxCached, o.batchSize
	s.cfg.DenseMisses = o.denseMisses
	s.cfg.Streams.Compression = o.streamCompression
	if err := s.cfg.Streams.Validate(); err != nil {
		return err
	}
	res.Ingester = s.cfg
	err = s.run(ctx)
	s.close()
	res.Seconds = time.Since(lg.start).Seconds()
	res.LoadAvg[1] = loadAvg()
	if o.scale > 0 {
		res.Goals = scaleGoals(res.Scale)
	} else {
		res.Goals = goals(res, o, p)
	}
	printReport(os.Stdout, res)
	path, werr := writeJSON(o.out, res)
	if werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Printf("\nresults: %s\n", path)
	return err
}

// cpuProfile profiles this process (the bench's clients, the bare driver and the
// embedded NATS server) until the returned function is called.
func cpuProfile(path string) func() {
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// heapProfile writes this process's heap profile to path; a failure
// leaves no file.
func heapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = os.Remove(path)
	}
}

// parseSizes reads -g5f-sizes: ascending persons counts, or "none".
func parseSizes(v string) ([]int, error) {
	if v == "none" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("-g5f-sizes %q: want ascending positive counts, e.g. 100000,1000000", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkOnly accepts "", g1 or g9 alone, or a comma list of g10, g5 and g7
// (each runs in the full run's order).
func checkOnly(only string, scale int) error {
	if only == "" || (scale == 0 && (only == "g1" || only == "g9")) {
		return nil
	}
	if scale > 0 {
		if only == "s3" {
			return nil
		}
		for _, ph := range strings.Split(only, ",") {
			if ph != "s5" && ph != "s6" && ph != "s7" {
				return fmt.Errorf("-only %q with -scale: the phases that run without the others are s3 alone, and s5, s6 and s7, alone or combined (s6,s7)", only)
			}
		}
		return nil
	}
	for _, ph := range strings.Split(only, ",") {
		if ph != "g10" && ph != "g5" && ph != "g7" {
			return fmt.Errorf("-only %q: the phases that run alone are g1, g10, g5, g7 and g9; g10, g5 and g7 combine (g10,g7)", only)
		}
	}
	return nil
}

// runs says whether phase runs: every phase without -only, else those listed.
func (o options) runs(phase string) bool {
	return o.only == "" || slices.Contains(strings.Split(o.only, ","), phase)
}
