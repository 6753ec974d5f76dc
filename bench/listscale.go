package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"
)

// G5fPoint is the list's cost at one project size.
type G5fPoint struct {
	Persons  uint64  `json:"persons"`
	Get      Latency `json:"get_person_bare"`
	Scan     Latency `json:"property_scan_bare"`
	List     Latency `json:"list_first_page"`
	Filtered Latency `json:"list_property_filter"`
}

// fillChunk bounds the events held in memory while a project is filled.
const fillChunk = 200_000

// g5f grows a project of its own (the main project's rows stay in the
// table, as other tenants' would) through the ingester to each size in
// turn and measures the list there: first page, property filter, and
// their baselines, c=1, idle. The points and an SVG plot go in the run's
// output.
func (s *session) g5f(ctx context.Context) error {
	if len(s.p.g5fSizes) == 0 {
		return nil
	}
	proj, err := s.cp.CreateProject(ctx, s.orgID, "g5f")
	if err != nil {
		return err
	}
	g := newGenerator(s.o.seed+13, 1)
	filled := 0
	for _, size := range s.p.g5fSizes {
		s.lg.f("G5f: filling project %d to %d persons", proj.ID, size)
		for filled < size {
			n := min(fillChunk, size-filled)
			events := make([]genEvent, n)
			for i := range events {
				events[i] = fillEvent(g, filled+i)
			}
			pr, err := publishAll(ctx, s.n.pubs, proj.ID, events)
			if err != nil {
				return err
			}
			if err := s.watcher.Wait(ctx, pr.lastSeq, time.Hour); err != nil {
				return err
			}
			filled += n
		}
		s.settle(ctx)
		ids, err := s.samplePersonsOf(ctx, proj.ID, 1000, ^uint64(0))
		if err != nil {
			return err
		}
		ops, err := s.g5Ops(proj.ID, ids)
		if err != nil {
			return err
		}
		ls := measureSet(ctx, "idle", 1, s.p.list1, namedOp{name: nameGet + layerRaw, op: ops.rawGet}, namedOp{name: nameScan + layerRaw, op: ops.scan},
			namedOp{name: nameList + layerAPI, op: ops.list}, namedOp{name: nameListFiltered + layerAPI, op: ops.filtered})
		pt := G5fPoint{Persons: s.count(ctx, "SELECT count() FROM persons FINAL WHERE project_id = ? AND is_deleted = 0", proj.ID),
			Get: ls[0], Scan: ls[1], List: ls[2], Filtered: ls[3]}
		for _, l := range ls {
			s.lg.f("G5f %d persons: %s", pt.Persons, l)
		}
		s.res.Project.G5f = append(s.res.Project.G5f, pt)
	}
	path := s.profile("g5f.svg")
	if err := os.WriteFile(path, []byte(g5fSVG(s.res.Project.G5f)), 0o644); err != nil {
		return err
	}
	s.lg.f("G5f plot: %s", path)
	return nil
}

// g5fGoals: how the first page's and the filtered list's p99 grow with the
// project, as the exponent k of p99 ~ persons^k between the smallest and
// the largest size (0: flat, 1: linear).
func g5fGoals(r *Result) []Goal {
	pts := r.Project.G5f
	if len(pts) < 2 {
		why := "one size only (quick mode)"
		if r.Project.G5fErr != "" {
			why = "failed: " + r.Project.G5fErr
		} else if len(pts) == 0 {
			why = "not measured"
		}
		return []Goal{notMeasured("G5f", "list p99 growth with persons", "first page k < 1, filtered k <= 1", why)}
	}
	a, b := pts[0], pts[len(pts)-1]
	k := func(la, lb Latency) float64 {
		return math.Log(lb.P99ms/la.P99ms) / math.Log(float64(b.Persons)/float64(a.Persons))
	}
	span := fmt.Sprintf("%dk -> %dk persons", a.Persons/1000, b.Persons/1000)
	kl, kf := k(a.List, b.List), k(a.Filtered, b.Filtered)
	return []Goal{
		goal("G5f", "list first page p99 ~ persons^k, "+span, "k < 1 (sub-linear)",
			fmt.Sprintf("k = %.2f (%.1f -> %.1f ms)", kl, a.List.P99ms, b.List.P99ms), kl, kl < 1),
		goal("G5f", "property filter p99 ~ persons^k, "+span, "k <= 1 (linear at most)",
			fmt.Sprintf("k = %.2f (%.1f -> %.1f ms)", kf, a.Filtered.P99ms, b.Filtered.P99ms), kf, kf <= 1),
	}
}

// g5fSVG plots p99 against persons, both on log scales: one line per
// measurement.
func g5fSVG(pts []G5fPoint) string {
	series := []struct {
		name string
		get  func(G5fPoint) float64
	}{
		{"list first page (API)", func(p G5fPoint) float64 { return p.List.P99ms }},
		{"list, property filter (API)", func(p G5fPoint) float64 { return p.Filtered.P99ms }},
		{"bare scan of the filter's columns", func(p G5fPoint) float64 { return p.Scan.P99ms }},
		{"bare GET person", func(p G5fPoint) float64 { return p.Get.P99ms }},
	}
	pl := plot{title: "G5f: p99 latency (ms, log) vs persons in the project (log), c=1, idle",
		xLabel: "persons", yLabel: "p99 ms", logX: true, logY: true}
	for _, sr := range series {
		ps := plotSeries{name: sr.name}
		for _, p := range pts {
			ps.pts = append(ps.pts, [2]float64{float64(max(p.Persons, 1)), max(sr.get(p), 0.01)})
		}
		pl.series = append(pl.series, ps)
	}
	return pl.svg()
}
