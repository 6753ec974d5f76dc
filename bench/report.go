package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/personhub/personhub/pkg/ingest"
)

// Result is everything one run measured; it is written as JSON.
type Result struct {
	Started  time.Time     `json:"started"`
	LoadAvg  [2]float64    `json:"loadavg_1min_start_end"`
	Seconds  float64       `json:"seconds"`
	Mode     string        `json:"mode"`
	Machine  Machine       `json:"machine"`
	Dataset  Dataset       `json:"dataset"`
	Ingester ingest.Config `json:"ingester_config"`
	Baseline Baselines     `json:"baselines"`
	Project  Project       `json:"project"`
	Scale    *Scale        `json:"scale,omitempty"`
	Goals    []Goal        `json:"goals"`
	Profiles []string      `json:"profiles"`
	Notes    []string      `json:"notes,omitempty"`
}

// Dataset describes the generated data.
type Dataset struct {
	Seed             uint64  `json:"seed"`
	Events           int     `json:"events"`
	MutatingEvents   int     `json:"person_mutating_events"`
	DistinctIDs      int     `json:"distinct_id_pool"`
	MeanEventBytes   float64 `json:"mean_event_bytes"`
	PersonsTarget    int     `json:"persons_target"`
	FillEvents       int     `json:"fill_events"`
	PublishPerSecond float64 `json:"publish_async_per_second"`
	ReadSamplePerson int     `json:"read_sample_persons"`
	// PersonRowsModel estimates the person rows ratio for other person-flush intervals
	// (see personRowsModel).
	PersonRowsModel map[string]float64 `json:"g3_person_rows_model"`
	G10             *G10Dataset        `json:"g10,omitempty"`
}

// Baselines are the raw measurements the ratios divide by.
type Baselines struct {
	ConsumeAckEach   Rate `json:"jetstream_consume_ack_each"`
	ConsumeAckAll500 Rate `json:"jetstream_consume_ackall_500"`
	// ConsumeNoAck is the ingester's consumer policy (AckNone), reported
	// beside the ingest's baseline, not used by it.
	ConsumeNoAck Rate             `json:"jetstream_consume_no_ack"`
	Insert       insertComparison `json:"events_insert"`
	Reads        []Latency        `json:"reads_bare_driver"`
	G10          []Latency        `json:"g10_bare_driver"`
}

// Project are the service's own figures.
type Project struct {
	Ingest           Ingest     `json:"ingest"`
	Fill             Rate       `json:"fill_ingest"`
	PersonsTotal     uint64     `json:"persons_live"`
	RSSAt1MBytes     int64      `json:"ingester_rss_at_persons_target_bytes"`
	RSSPeakBytes     int64      `json:"ingester_rss_peak_bytes"`
	HeapInuseBytes   float64    `json:"ingester_heap_inuse_at_persons_target_bytes"`
	CachedPersonsMax int        `json:"max_cached_persons"`
	Reads            []Latency  `json:"reads"`
	Load             LoadStats  `json:"read_load"`
	PatchIdle        [2]Latency `json:"patch_idle"`
	PatchLoad        [2]Latency `json:"patch_under_load"`
	PatchPending     int        `json:"patch_answered_202"`
	OneRowInsert     Latency    `json:"one_row_insert"`
	Purge            *Purge     `json:"purge,omitempty"`
	PurgeErr         string     `json:"purge_error,omitempty"`
	PurgeRepeats     []Purge    `json:"purge_repeats,omitempty"` // -purge-runs beyond the first
	Soak             *Soak      `json:"soak,omitempty"`
	G5f              []G5fPoint `json:"g5f"`
	G5fErr           string     `json:"g5f_error,omitempty"`
	G10              []Latency  `json:"g10"`
	G10Err           string     `json:"g10_error,omitempty"`
	G9               *G9Result  `json:"g9,omitempty"`
	G9Err            string     `json:"g9_error,omitempty"`
}

// Ingest is the end-to-end ingest run (ingest rate, person rows).
type Ingest struct {
	Rate
	IngesterCPUPerEventUS  float64 `json:"ingester_cpu_us_per_event"`
	ClickHouseCPUPerEvtUS  float64 `json:"clickhouse_cpu_us_per_event"`
	BenchNATSCPUPerEventUS float64 `json:"bench_process_cpu_us_per_event"`
	EventsInTable          uint64  `json:"events_in_table"`
	PersonRowsMetric       float64 `json:"person_rows_written_metric"`
	PersonRowsInTable      uint64  `json:"person_rows_in_table_no_final"`
	DistinctIDRows         float64 `json:"distinct_id_rows_written"`
	Batches                float64 `json:"batches"`
	FoldSeconds            float64 `json:"fold_seconds_total"`
	FlushSeconds           float64 `json:"flush_seconds_total"`
	PersonsLive            uint64  `json:"persons_live"`
	// PersonsEver counts every person the ingest created (merged-away
	// ones included): each needs at least one row, so PersonsEver /
	// person-mutating events is the person rows ratio's floor for this dataset.
	PersonsEver uint64 `json:"persons_created"`
	// CPU used by processes other than the ingester, ClickHouse and the
	// bench (other work on a shared machine) while the ingest ran.
	OtherCPUSeconds    float64 `json:"other_processes_cpu_seconds"`
	CPUCapacitySeconds float64 `json:"cpu_capacity_seconds"`
}

// Goal is one line of the targets table.
type Goal struct {
	ID       string  `json:"id"`
	What     string  `json:"what"`
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Pass     *bool   `json:"pass"` // nil: not measured in this run
}

func goal(id, what, target, measured string, value float64, pass bool) Goal {
	return Goal{ID: id, What: what, Target: target, Measured: measured, Value: value, Pass: &pass}
}

func notMeasured(id, what, target, why string) Goal {
	return Goal{ID: id, What: what, Target: target, Measured: why}
}

func findLat(list []Latency, name, load string, conc int) Latency {
	for _, l := range list {
		if l.Name == name && l.Load == load && l.Concurrency == conc {
			return l
		}
	}
	return Latency{}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func printReport(w io.Writer, r *Result) {
	fmt.Fprintf(w, "\npersonhub bench (%s) %s, %d cores, %.1f GiB, %s, ClickHouse %s, nats-server %s, %s\n",
		r.Mode, r.Started.Format(time.RFC3339), r.Machine.NProc, float64(r.Machine.MemTotalBytes)/(1<<30),
		r.Machine.CPUModel, r.Machine.ClickHouse, r.Machine.NATSServer, r.Machine.GoVersion)
	if r.Scale == nil {
		fmt.Fprintf(w, "dataset: %d events (%d person-mutating), %d distinct ids, %.0f B/event, %d persons\n\n",
			r.Dataset.Events, r.Dataset.MutatingEvents, r.Dataset.DistinctIDs, r.Dataset.MeanEventBytes, r.Project.PersonsTotal)
	} else {
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "goal\twhat\ttarget\tmeasured\tresult")
	for _, g := range r.Goals {
		res := "n/a"
		if g.Pass != nil {
			res = map[bool]string{true: "PASS", false: "FAIL"}[*g.Pass]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.ID, g.What, g.Target, g.Measured, res)
	}
	tw.Flush()
	if r.Scale != nil {
		printScale(w, r.Scale)
		return
	}
	fmt.Fprintln(w, "\nabsolute figures")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	b, p := r.Baseline, r.Project
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("publish (PublishAsync, window 4000)", fmt.Sprintf("%.0f msg/s", r.Dataset.PublishPerSecond))
	row("raw consume, ack each", fmt.Sprintf("%.0f msg/s", b.ConsumeAckEach.PerSecond))
	row("raw consume, AckAll every 500th", fmt.Sprintf("%.0f msg/s", b.ConsumeAckAll500.PerSecond))
	row("raw consume, no ack (the ingester's policy)", fmt.Sprintf("%.0f msg/s", b.ConsumeNoAck.PerSecond))
	row("clickhouse-client TSV insert", fmt.Sprintf("%.0f rows/s (server %.1f us/row)", b.Insert.Client.PerSecond, b.Insert.Client.ServerCPUPerItem))
	row(fmt.Sprintf("store WriteRows, %d-row batches", b.Insert.Batch), fmt.Sprintf("%.0f rows/s (server %.1f us/row, client %.1f us/row)", b.Insert.Store.PerSecond, b.Insert.Store.ServerCPUPerItem, b.Insert.Store.ClientCPUPerItem))
	row("end-to-end ingest", fmt.Sprintf("%.0f events/s (%d events in %.1fs)", p.Ingest.PerSecond, p.Ingest.Items, p.Ingest.Seconds))
	row("ingester CPU per event", fmt.Sprintf("%.1f us", p.Ingest.IngesterCPUPerEventUS))
	row("ClickHouse CPU per event", fmt.Sprintf("%.1f us", p.Ingest.ClickHouseCPUPerEvtUS))
	row("bench process (NATS server) CPU per event", fmt.Sprintf("%.1f us", p.Ingest.BenchNATSCPUPerEventUS))
	row("other processes' CPU during the ingest", fmt.Sprintf("%.1fs of %.1fs capacity", p.Ingest.OtherCPUSeconds, p.Ingest.CPUCapacitySeconds))
	row("fold / flush time (sum over batches)", fmt.Sprintf("%.1fs / %.1fs in %.0f batches", p.Ingest.FoldSeconds, p.Ingest.FlushSeconds, p.Ingest.Batches))
	row("G3 floor: persons created / person-mutating events", fmt.Sprintf("%.3f (%d persons)", float64(p.Ingest.PersonsEver)/float64(max(1, r.Dataset.MutatingEvents)), p.Ingest.PersonsEver))
	row("G3 model: person rows / mutating event by flush interval", fmt.Sprint(r.Dataset.PersonRowsModel))
	row("fill ingest (new persons)", fmt.Sprintf("%.0f events/s", p.Fill.PerSecond))
	row("ingester RSS at persons target / peak", fmt.Sprintf("%.0f MiB / %.0f MiB (heap in use %.0f MiB, max cached persons %d)", mib(p.RSSAt1MBytes), mib(p.RSSPeakBytes), p.HeapInuseBytes/(1<<20), p.CachedPersonsMax))
	row("ingest rate during read load", fmt.Sprintf("%.0f events/s (backlog cap %d)", p.Load.IngestPerSec, p.Load.BacklogCap))
	tw.Flush()
	fmt.Fprintln(w, "\nlatencies (bare driver, store, HTTP API)")
	for _, l := range append(append(append(append([]Latency{}, b.Reads...), p.Reads...), b.G10...), p.G10...) {
		fmt.Fprintln(w, "  "+l.String())
	}
	for _, l := range []Latency{p.PatchIdle[0], p.PatchIdle[1], p.PatchLoad[0], p.PatchLoad[1], p.OneRowInsert} {
		if l.N == 0 {
			continue // a phase that did not run (-only)
		}
		fmt.Fprintln(w, "  "+l.String())
	}
	if p.Purge != nil {
		fmt.Fprintf(w, "\npurge of %d persons (%d of %d events): raw ALTER DELETE %.2fs (+%.2fs for events_by_distinct_id), deletion.Runner %.2fs (%d mutations, %d verified)\n",
			p.Purge.Persons, p.Purge.EventsToDelete, p.Purge.EventsTotal, p.Purge.RawSeconds, p.Purge.RawCopySeconds, p.Purge.RunnerSeconds, p.Purge.RunnerMutation, p.Purge.RunnerVerified)
	}
	if p.Soak != nil {
		fmt.Fprintf(w, "soak: %.0fs at %d events/s, RSS %s MiB, growth %.1f%%, slope %.2f MiB/min, lag at end %d\n",
			p.Soak.Seconds, p.Soak.RatePerSecond, rssList(p.Soak.RSSBytes), p.Soak.GrowthPct, p.Soak.SlopeMBPerMin, p.Soak.LagAtEnd)
	}
	if g := r.Dataset.G10; g != nil {
		fmt.Fprintf(w, "\nG10 window %s .. %s: %d events (%v), %d distinct ids, inserted in %.1fs; persons on the first pages %v\n",
			g.From.Format(time.DateOnly), g.To.Format(time.DateOnly), g.Events, g.ByEvent, g.DistinctIDs, g.InsertSeconds, g.Returned)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func rssList(s []int64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%.0f", mib(v))
	}
	return strings.Join(parts, " ")
}

func writeJSON(dir string, r *Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Started.UTC().Format("20060102T150405Z")+"-"+r.Mode+".json")
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(raw, '\n'), 0o644)
}
