package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// scaleGoals are S1-S7 of docs/performance.md, from one scale run.
func scaleGoals(sc *Scale) []Goal {
	if sc == nil {
		return nil
	}
	var out []Goal
	if sc.Ingest.PerSecond > 0 && sc.RawConsume.PerSecond > 0 {
		x := ratio(sc.Ingest.PerSecond, sc.RawConsume.PerSecond)
		out = append(out, goal("S1", fmt.Sprintf("ingest of %s events vs raw consume (ack each)", shortNum(float64(sc.Events))), ">= 0.50x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s)", x, sc.Ingest.PerSecond, sc.RawConsume.PerSecond), x, x >= 0.5))
		y := ratio(sc.LastTenthRate, sc.FirstTenthRate)
		out = append(out, goal("S1", "ingest rate of the last tenth vs the first", ">= 0.80x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s)", y, sc.LastTenthRate, sc.FirstTenthRate), y, y >= 0.8))
	} else {
		out = append(out, notMeasured("S1", "sustained ingest vs raw consume", ">= 0.50x", scaleWhy(sc, "S1")))
	}
	if c := sc.ColdRestart; c != nil && sc.Ingest.PerSecond > 0 {
		x := ratio(c.PerSecond, sc.Ingest.PerSecond)
		out = append(out, goal("S1", fmt.Sprintf("a cold restart's ingest of %s events vs the whole ingest's rate", shortNum(float64(c.Events))), "recorded",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s; %.0f projects read whole)", x, c.PerSecond, sc.Ingest.PerSecond, c.WholeReads), x, true))
	}
	if sc.RSSPeakBytes > 0 && sc.RSSRefPeakBytes > 0 {
		x := ratio(float64(sc.RSSPeakBytes), float64(sc.RSSRefPeakBytes))
		out = append(out, goal("S2", fmt.Sprintf("ingester RSS peak vs its peak at %s persons (cache %s)", shortNum(float64(sc.s2Ref())), shortNum(float64(sc.MaxCachedPersons))), "<= 1.10x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f MiB; %.0f heap B per cached person)", x, mib(sc.RSSPeakBytes), mib(sc.RSSRefPeakBytes), sc.BytesPerCachedPerso), x, x <= 1.1))
	} else {
		out = append(out, notMeasured("S2", "ingester RSS peak", "<= 1.10x", scaleWhy(sc, "S2")))
	}
	out = append(out, scaleListGoals(sc)...)
	out = append(out, scaleAnalysisGoals(sc)...)
	if rp := sc.Replay; rp != nil && rp.Finished && rp.Rate.PerSecond > 0 && sc.Ingest.PerSecond > 0 {
		x := ratio(rp.Rate.PerSecond, sc.Ingest.PerSecond)
		out = append(out, goal("S5", fmt.Sprintf("replay of the whole log (%s messages) vs the first ingest", shortNum(float64(rp.Messages))), ">= 0.50x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s)", x, rp.Rate.PerSecond, sc.Ingest.PerSecond), x, x >= 0.5))
		if len(rp.Tables) > 0 {
			out = append(out, goal("S5", "replayed tables vs the ingested ones (rows and hash sums)", "identical",
				fmt.Sprintf("%v (%d state queries)", rp.Identical, len(rp.Tables)), 0, rp.Identical))
		}
	} else {
		out = append(out, notMeasured("S5", "replay vs the first ingest", ">= 0.50x", scaleWhy(sc, "S5")))
	}
	if n := len(sc.Purges); n > 0 {
		pg := sc.Purges[n-1]
		x := ratio(pg.RunnerSeconds, pg.RawSeconds)
		out = append(out, goal("S6", fmt.Sprintf("purge of %s persons' events (%s of %s) vs one raw ALTER DELETE", shortNum(float64(pg.Persons)),
			shortNum(float64(pg.EventsToDelete)), shortNum(float64(pg.EventsTotal))), "<= 1.50x",
			fmt.Sprintf("%.2fx (%.1f vs %.1f s)", x, pg.RunnerSeconds, pg.RawSeconds), x, x <= 1.5))
		if pg.RawCopySeconds > 0 {
			y := ratio(pg.RunnerSeconds, pg.RawSeconds+pg.RawCopySeconds)
			out = append(out, goal("S6", "the same vs raw ALTER DELETEs of both copies of the events (events, events_by_distinct_id)", "recorded",
				fmt.Sprintf("%.2fx (%.1f vs %.1f + %.1f s)", y, pg.RunnerSeconds, pg.RawSeconds, pg.RawCopySeconds), y, true))
		}
	} else {
		out = append(out, notMeasured("S6", "purge vs one raw ALTER DELETE", "<= 1.50x", scaleWhy(sc, "S6")))
	}
	if d := sc.Disk; d != nil && d.EventsTuned > 0 && d.PersonsTuned > 0 {
		x := ratio(d.EventsTable, d.EventsTuned)
		out = append(out, goal("S7", fmt.Sprintf("events table bytes per event vs a hand-tuned table (%.0f B/event in every event table)", d.EventBytes), "<= 1.20x",
			fmt.Sprintf("%.2fx (%.1f vs %.1f B)", x, d.EventsTable, d.EventsTuned), x, x <= 1.2))
		y := ratio(d.PersonsTable, d.PersonsTuned)
		out = append(out, goal("S7", fmt.Sprintf("persons table bytes per person vs a hand-tuned table (%.0f B/person in every person table)", d.PersonBytes), "<= 1.20x",
			fmt.Sprintf("%.2fx (%.1f vs %.1f B)", y, d.PersonsTable, d.PersonsTuned), y, y <= 1.2))
	} else {
		out = append(out, notMeasured("S7", "disk per event and per person", "<= 1.20x", scaleWhy(sc, "S7")))
	}
	return out
}

func scaleWhy(sc *Scale, phase string) string {
	for k, v := range sc.Errors {
		if strings.HasPrefix(k, phase) {
			return "failed: " + v
		}
	}
	return "not measured"
}

// scaleListGoals: S3, each list read's p99 at the full size against the
// same at the reference size.
func scaleListGoals(sc *Scale) []Goal {
	if len(sc.Lists) < 2 {
		return []Goal{notMeasured("S3", "list reads at the full size vs the reference size", "<= 1.50x", scaleWhy(sc, "S3"))}
	}
	a, b := sc.Lists[0], sc.Lists[len(sc.Lists)-1]
	var out []Goal
	for _, n := range []string{nameList, nameListEmail, nameListDistinctID, nameListSearchMail} {
		la, lb := findLat(a.Reads, n+layerAPI, "idle", 1), findLat(b.Reads, n+layerAPI, "idle", 1)
		if la.N == 0 || lb.N == 0 {
			out = append(out, notMeasured("S3", n, "<= 1.50x", "not measured"))
			continue
		}
		x := ratio(lb.P99ms, la.P99ms)
		out = append(out, goal("S3", fmt.Sprintf("%s p99 at %s vs %s persons", n, shortNum(float64(b.Persons)), shortNum(float64(a.Persons))), "<= 1.50x",
			fmt.Sprintf("%.2fx (%.1f vs %.1f ms)", x, lb.P99ms, la.P99ms), x, x <= 1.5))
	}
	return out
}

// scaleAnalysisGoals: S4, each route at the widest window against the
// bare count of its window, and the growth of its cost with the window's
// events (p99 ~ events^k between the narrowest and the widest); the
// property filter at the full size against the bare scan of its columns,
// and its growth with persons.
func scaleAnalysisGoals(sc *Scale) []Goal {
	var out []Goal
	if len(sc.Lists) > 0 {
		b := sc.Lists[len(sc.Lists)-1]
		l, base := findLat(b.Reads, nameListFiltered+layerAPI, "idle", 1), findLat(b.Reads, nameScan+layerRaw, "idle", 1)
		if l.N > 0 && base.N > 0 {
			x := ratio(l.P99ms, base.P99ms)
			out = append(out, goal("S4", fmt.Sprintf("property filter at %s persons vs a bare scan of its columns", shortNum(float64(b.Persons))), "<= 3x",
				fmt.Sprintf("%.2fx (%.1f vs %.1f ms)", x, l.P99ms, base.P99ms), x, x <= 3))
		}
		if a := sc.Lists[0]; len(sc.Lists) > 1 {
			la := findLat(a.Reads, nameListFiltered+layerAPI, "idle", 1)
			if k := powerLaw(float64(a.Persons), la.P99ms, float64(b.Persons), l.P99ms); !math.IsNaN(k) {
				out = append(out, goal("S4", "property filter p99 ~ persons^k", "k <= 1", fmt.Sprintf("k = %.2f", k), k, k <= 1))
			}
		}
	}
	if len(sc.Analysis) == 0 {
		return append(out, notMeasured("S4", "analysis routes vs a bare scan of their window", "<= 3x", scaleWhy(sc, "S4")))
	}
	lo, hi := sc.Analysis[0], sc.Analysis[len(sc.Analysis)-1]
	for _, l := range hi.Reads {
		route, ok := strings.CutSuffix(strings.TrimPrefix(l.Name, "S4 "), layerAPI)
		if !ok {
			continue
		}
		base := findLat(hi.Reads, "S4 "+route+layerRaw, "idle", 1)
		x := ratio(l.P99ms, base.P99ms)
		out = append(out, goal("S4", fmt.Sprintf("%s over %d days (%s events) vs a bare count of the window", route, hi.Days, shortNum(float64(hi.Events))), "<= 3x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ms)", x, l.P99ms, base.P99ms), x, x <= 3))
		if len(sc.Analysis) > 1 {
			first := findLat(lo.Reads, l.Name, "idle", 1)
			k := powerLaw(float64(lo.Events), first.P99ms, float64(hi.Events), l.P99ms)
			if math.IsNaN(k) {
				continue
			}
			out = append(out, goal("S4", fmt.Sprintf("%s p99 ~ window events^k (%d to %d days)", route, lo.Days, hi.Days), "k <= 1",
				fmt.Sprintf("k = %.2f (%.0f -> %.0f ms)", k, first.P99ms, l.P99ms), k, k <= 1))
		}
	}
	return out
}

// powerLaw is k of y ~ x^k through two points.
func powerLaw(x0, y0, x1, y1 float64) float64 {
	if x0 <= 0 || x1 <= x0 || y0 <= 0 || y1 <= 0 {
		return math.NaN()
	}
	return math.Log(y1/y0) / math.Log(x1/x0)
}

// printScale prints a scale run's figures after its goals.
func printScale(w io.Writer, sc *Scale) {
	fmt.Fprintf(w, "\nscale x%d: %d events (%d person-mutating) over %d days from %d distinct ids, %.0f B/event; list project %d persons\n",
		sc.Factor, sc.Events, sc.Mutating, sc.Days, sc.DistinctIDs, sc.MeanEventBytes, sc.ListPersons)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("disk free / needed", fmt.Sprintf("%.1f / %.1f GiB", gib(sc.DiskFreeBytes), gib(sc.DiskNeededBytes)))
	row("publish (PublishAsync)", fmt.Sprintf("%.0f msg/s", sc.PublishPerSec))
	if sc.RawConsume.PerSecond > 0 {
		row("raw consume, ack each", fmt.Sprintf("%.0f msg/s", sc.RawConsume.PerSecond))
	}
	row("ingest", fmt.Sprintf("%.0f events/s (%.0fs); first tenth %.0f, last tenth %.0f", sc.Ingest.PerSecond, sc.Ingest.Seconds, sc.FirstTenthRate, sc.LastTenthRate))
	row("CPU per event: ingester / ClickHouse", fmt.Sprintf("%.1f / %.1f us", sc.IngesterCPUUS, sc.ClickHouseCPUUS))
	if c := sc.ColdRestart; c != nil {
		row("cold restart", fmt.Sprintf("%d events in %.1fs, %.0f events/s; %.0f projects read whole", c.Events, c.Seconds, c.PerSecond, c.WholeReads))
	}
	row("list fill to full size", fmt.Sprintf("%.0f events/s", sc.FillRate.PerSecond))
	if sc.RSSPeakBytes > 0 {
		row("ingester RSS peak: reference / run", fmt.Sprintf("%.0f / %.0f MiB (heap in use %.0f -> %.0f MiB)", mib(sc.RSSRefPeakBytes), mib(sc.RSSPeakBytes), sc.HeapStartBytes/(1<<20), sc.HeapEndBytes/(1<<20)))
	}
	if sc.StreamMessages > 0 {
		row("the log on disk", fmt.Sprintf("%d messages, %.1f GiB, %.0f B/message", sc.StreamMessages, gib(sc.StreamDiskBytes), float64(sc.StreamDiskBytes)/float64(sc.StreamMessages)))
	}
	if rp := sc.Replay; rp != nil {
		row("replay", fmt.Sprintf("%d messages at %.0f/s, identical %v", rp.Messages, rp.Rate.PerSecond, rp.Identical))
	}
	for _, pg := range sc.Purges {
		row(fmt.Sprintf("purge of %d persons", pg.Persons), fmt.Sprintf("%d of %d events: raw %.1fs (+%.1fs for events_by_distinct_id), deleter %.1fs (%d mutations)", pg.EventsToDelete, pg.EventsTotal, pg.RawSeconds, pg.RawCopySeconds, pg.RunnerSeconds, pg.RunnerMutation))
	}
	if d := sc.Disk; d != nil {
		for _, t := range d.Tables {
			row("disk: "+t.Table, fmt.Sprintf("%d rows, %.1f MiB (%.1f B/row, %.1fx compression, %d parts)", t.Rows, float64(t.Bytes)/(1<<20),
				float64(t.Bytes)/float64(max(t.Rows, 1)), float64(t.Uncompressed)/float64(max(t.Bytes, 1)), t.Parts))
		}
	}
	tw.Flush()
	for _, l := range sc.Lists {
		for _, r := range l.Reads {
			fmt.Fprintf(w, "  %d persons: %s\n", l.Persons, r)
		}
	}
	for _, a := range sc.Analysis {
		for _, r := range a.Reads {
			fmt.Fprintf(w, "  %d days, %d events: %s\n", a.Days, a.Events, r)
		}
	}
	for phase, e := range sc.Errors {
		fmt.Fprintf(w, "error: %s: %s\n", phase, e)
	}
	for _, p := range sc.Plots {
		fmt.Fprintf(w, "plot: %s\n", p)
	}
}
