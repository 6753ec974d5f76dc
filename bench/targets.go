package main

import (
	"fmt"
	"strings"
)

// goals turns the measurements into the targets table of
// docs/performance.md: each a ratio against a baseline of the same run
// (or an absolute bound where the target is one).
func goals(r *Result, o options, p plan) []Goal {
	var out []Goal
	b, pr := r.Baseline, r.Project
	in := pr.Ingest

	if in.PerSecond > 0 && b.ConsumeAckEach.PerSecond > 0 {
		x := ratio(in.PerSecond, b.ConsumeAckEach.PerSecond)
		out = append(out, goal("G1", "end-to-end ingest vs raw consume (ack each)", ">= 0.50x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f ev/s)", x, in.PerSecond, b.ConsumeAckEach.PerSecond), x, x >= 0.5))
	} else {
		out = append(out, notMeasured("G1", "end-to-end ingest vs raw consume (ack each)", ">= 0.50x", "not measured"))
	}
	if b.Insert.Client.PerSecond > 0 {
		x := ratio(b.Insert.Store.PerSecond, b.Insert.Client.PerSecond)
		out = append(out, goal("G2", "events insert (store, ingester batches) vs clickhouse-client TSV", ">= 0.60x",
			fmt.Sprintf("%.2fx (%.0f vs %.0f rows/s)", x, b.Insert.Store.PerSecond, b.Insert.Client.PerSecond), x, x >= 0.6))
	} else {
		out = append(out, notMeasured("G2", "events insert vs clickhouse-client TSV", ">= 0.60x", "not measured"))
	}
	if r.Dataset.MutatingEvents > 0 && in.Batches > 0 {
		x := in.PersonRowsMetric / float64(r.Dataset.MutatingEvents)
		out = append(out, goal("G3", "person rows written / person-mutating events", "<= 1.10",
			fmt.Sprintf("%.3f (%.0f rows / %d events)", x, in.PersonRowsMetric, r.Dataset.MutatingEvents), x, x <= 1.1))
	} else {
		out = append(out, notMeasured("G3", "person rows written / person-mutating events", "<= 1.10", "not measured"))
	}

	latGoal := func(id, what, target string, limit float64, l, base Latency) Goal {
		if l.N == 0 || base.N == 0 {
			return notMeasured(id, what, target, "not measured")
		}
		x := ratio(l.P99ms, base.P99ms)
		return goal(id, what, target, fmt.Sprintf("%.2fx (p99 %.1f vs %.1f ms)", x, l.P99ms, base.P99ms), x, x <= limit)
	}
	raw := func(name string, conc int) Latency { return findLat(b.Reads, name+layerRaw, "idle", conc) }
	api := func(name, load string, conc int) Latency { return findLat(pr.Reads, name+layerAPI, load, conc) }
	persons := fmt.Sprintf("%dk persons", r.Project.PersonsTotal/1000)
	for _, c := range []int{1, 16} {
		out = append(out, latGoal("G4", fmt.Sprintf("GET person p99, c=%d, idle, vs bare driver (%s)", c, persons), "<= 1.3x", 1.3,
			api(nameGet, "idle", c), raw(nameGet, c)))
	}
	for _, c := range []int{1, 16} {
		out = append(out, latGoal("G4", fmt.Sprintf("GET person p99, c=%d, while ingesting, vs bare driver idle", c), "<= 3x", 3,
			api(nameGet, "ingesting", c), raw(nameGet, c)))
	}
	out = append(out, g5Goals(r, latGoal)...)
	for _, c := range []struct {
		load  string
		l     Latency
		limit float64
	}{{"idle", pr.PatchIdle[1], 100}, {"while ingesting", pr.PatchLoad[1], 1000}} {
		what := "PATCH then GET shows it, p99, " + c.load
		target := fmt.Sprintf("<= %.0f ms", c.limit)
		if c.l.N == 0 {
			out = append(out, notMeasured("G6", what, target, "not measured"))
			continue
		}
		out = append(out, goal("G6", what, target, fmt.Sprintf("%.1f ms (p50 %.1f)", c.l.P99ms, c.l.P50ms), c.l.P99ms, c.l.P99ms <= c.limit))
	}
	what7 := fmt.Sprintf("event purge of %d queued persons vs one raw ALTER DELETE", p.deletePersons)
	switch {
	case pr.Purge != nil && pr.Purge.RawSeconds > 0:
		x := ratio(pr.Purge.RunnerSeconds, pr.Purge.RawSeconds)
		ok := x <= 1.2 && pr.Purge.RunnerLeft == 0
		out = append(out, goal("G7", what7, "<= 1.2x", fmt.Sprintf("%.2fx (%.2fs vs %.2fs, %d mutations)", x, pr.Purge.RunnerSeconds, pr.Purge.RawSeconds, pr.Purge.RunnerMutation), x, ok))
	case pr.PurgeErr != "":
		out = append(out, notMeasured("G7", what7, "<= 1.2x", "failed: "+pr.PurgeErr))
	default:
		out = append(out, notMeasured("G7", what7, "<= 1.2x", "not available"))
	}
	out = append(out, g10Goals(r, latGoal)...)
	if r.Project.G9 != nil || r.Project.G9Err != "" {
		g := g9Goal(r.Project.G9)
		if r.Project.G9Err != "" {
			g = notMeasured("G9", "ingest with one trivial transformation vs none", ">= 0.60x; dropped < stored", "failed: "+r.Project.G9Err)
		}
		out = append(out, g, g9UserAgentGoal(r.Project.G9))
	}
	if pr.RSSAt1MBytes > 0 {
		out = append(out, goal("G8", fmt.Sprintf("ingester RSS at %s (max cached %d)", persons, pr.CachedPersonsMax),
			fmt.Sprintf("<= %.0f MiB", mib(o.rssCeiling)), fmt.Sprintf("%.0f MiB (peak %.0f)", mib(pr.RSSAt1MBytes), mib(pr.RSSPeakBytes)),
			mib(pr.RSSAt1MBytes), pr.RSSAt1MBytes <= o.rssCeiling && pr.RSSPeakBytes <= o.rssCeiling))
	}
	if sk := pr.Soak; sk != nil && len(sk.RSSBytes) > 0 {
		out = append(out, goal("G8", fmt.Sprintf("ingester RSS growth over a %.0f-min soak", sk.Seconds/60), "<= 10%",
			fmt.Sprintf("%+.1f%% (%.0f -> %.0f MiB; lag at end %d events)", sk.GrowthPct, mib(sk.RSSBytes[0]), mib(sk.RSSBytes[len(sk.RSSBytes)-1]), sk.LagAtEnd),
			sk.GrowthPct, sk.GrowthPct <= 10 && sk.Seconds >= 300))
	} else {
		out = append(out, notMeasured("G8", "ingester RSS growth over a 10-min soak", "<= 10%", "skipped ("+p.mode+" mode)"))
	}
	return out
}

// g10Goals: each actor route's p99 against the bare count of the same
// window's events; values/ and persons/cohorts/ against the bare GET
// person of the same phase.
func g10Goals(r *Result, latGoal func(id, what, target string, limit float64, l, base Latency) Goal) []Goal {
	d := r.Dataset.G10
	if d == nil {
		why := "not measured"
		if r.Project.G10Err != "" {
			why = "failed: " + r.Project.G10Err
		}
		return []Goal{notMeasured("G10", "analysis actor routes vs a bare scan of the window", "<= 3x", why)}
	}
	var out []Goal
	size := fmt.Sprintf("%dk events, %d days", d.Events/1000, g10Days)
	for _, route := range []string{"trends", "funnel, 3 steps", "retention", "lifecycle", "stickiness", "path"} {
		n := g10Name(route)
		out = append(out, latGoal("G10", fmt.Sprintf("%s p99 vs bare count of the window's events (%s)", route, size), "<= 3x", 3,
			findLat(r.Project.G10, n+layerAPI, "idle", 1), findLat(r.Baseline.G10, n+layerRaw, "idle", 1)))
	}
	for _, load := range []string{"idle", "writes"} {
		get := findLat(r.Baseline.G10, "G10 "+nameGet+layerRaw, load, 1)
		for _, n := range []string{nameG10Values, nameG10Cohorts} {
			name := strings.TrimPrefix(n, "G10 ") + " p99 vs bare GET person"
			if load == "writes" {
				name += fmt.Sprintf(", under %d writes/s", g10WriteRate)
			}
			out = append(out, latGoal("G10", name, "<= 5x", 5, findLat(r.Project.G10, n+layerAPI, load, 1), get))
		}
	}
	return out
}
