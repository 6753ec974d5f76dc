package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// replot draws the plots of a scale run's JSON results again, into out.
func replot(path, out string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.Scale == nil {
		return fmt.Errorf("%s holds no scale run", path)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	stamp := strings.TrimSuffix(filepath.Base(path), ".json")
	r.Scale.Plots = nil
	s := &session{res: &r, profile: func(name string) string { return filepath.Join(out, stamp+"-"+name) },
		lg: progressLog{start: time.Now()}}
	s.scalePlots()
	for _, p := range r.Scale.Plots {
		fmt.Println(p)
	}
	return nil
}

// scalePlots draws one plot per row of S1-S7 from the run's figures.
func (s *session) scalePlots() {
	sc := s.res.Scale
	if len(sc.Progress) > 1 {
		s.writePlot("s1-ingest-rate", s1Plot(sc))
	}
	if len(sc.Progress) > 1 && sc.RSSPeakBytes > 0 {
		s.writePlot("s2-ingester-rss", s2Plot(sc))
	}
	if len(sc.Lists) > 0 {
		s.writePlot("s3-list-reads", s3Plot(sc))
	}
	if len(sc.Analysis) > 0 {
		s.writePlot("s4-analysis", s4Plot(sc))
	}
	if sc.Replay != nil && len(sc.Replay.Progress) > 1 {
		s.writePlot("s5-replay-rate", s5Plot(sc))
	}
	if len(sc.Purges) > 0 {
		s.writePlot("s6-purge", s6Plot(sc))
	}
	if len(sc.Progress) > 1 {
		s.writePlot("s7-disk-per-event", s7Plot(sc))
	}
}

// rateSeries is the rate between samples (half a second apart) in
// windows of about a sixtieth of the run, 5 s at least: a long run's
// watermark moves once per grown batch, and shorter windows would draw
// its commits, not its rate.
func rateSeries(name string, pts []ScalePoint, limit uint64) plotSeries {
	ps := plotSeries{name: name}
	span := rateSpan(pts)
	for i := span; i < len(pts); i += span {
		a, b := pts[i-span], pts[i]
		if a.Events >= limit || b.Seconds <= a.Seconds {
			break
		}
		ps.pts = append(ps.pts, [2]float64{float64(min(b.Events, limit)), float64(b.Events-a.Events) / (b.Seconds - a.Seconds)})
	}
	return ps
}

func rateSpan(pts []ScalePoint) int { return max(10, len(pts)/60) }

// windowSeconds names rateSeries' window in a title.
func windowSeconds(pts []ScalePoint) string {
	return fmt.Sprintf("%d-second windows", rateSpan(pts)/2)
}

func flat(name string, x0, x1, y float64) plotSeries {
	return plotSeries{name: name, dashed: true, pts: [][2]float64{{x0, y}, {x1, y}}}
}

func s1Plot(sc *Scale) plot {
	n := float64(sc.Events)
	return plot{title: fmt.Sprintf("S1: ingest rate of %s pre-published events, %s", shortNum(n), windowSeconds(sc.Progress)),
		xLabel: "events committed", yLabel: "events/s",
		series: []plotSeries{rateSeries("ingest", sc.Progress, uint64(sc.Events)),
			flat("whole-run mean", 0, n, sc.Ingest.PerSecond),
			flat("raw consume, ack each", 0, n, sc.RawConsume.PerSecond),
			flat("target: 0.5x raw consume", 0, n, sc.RawConsume.PerSecond/2)}}
}

func s2Plot(sc *Scale) plot {
	ps := plotSeries{name: "ingester RSS"}
	var end float64
	for _, p := range sc.Progress {
		ps.pts = append(ps.pts, [2]float64{float64(p.Events), mib(p.RSSBytes)})
		end = float64(p.Events)
	}
	ref := mib(sc.RSSRefPeakBytes)
	return plot{title: fmt.Sprintf("S2: ingester RSS over the ingest and the list's fill to %s persons", shortNum(float64(sc.ListPersons))),
		xLabel: "events committed (main events, then the fill)", yLabel: "MiB",
		series: []plotSeries{ps, flat(fmt.Sprintf("peak at %s persons", shortNum(float64(sc.s2Ref()))), 0, end, ref),
			flat("target: 1.1x that peak", 0, end, 1.1*ref)}}
}

func s3Plot(sc *Scale) plot {
	p := plot{title: "S3: list reads, p99 against persons in the project, c=1, idle", xLabel: "persons", yLabel: "p99 ms", logX: true, logY: true}
	for _, n := range []string{nameList + layerAPI, nameListEmail + layerAPI, nameListDistinctID + layerAPI, nameListSearchMail + layerAPI,
		nameListFiltered + layerAPI, nameScan + layerRaw, nameGetG5 + layerRaw} {
		ps := plotSeries{name: strings.TrimSpace(n)}
		for _, l := range sc.Lists {
			if r := findLat(l.Reads, n, "idle", 1); r.N > 0 {
				ps.pts = append(ps.pts, [2]float64{float64(l.Persons), r.P99ms})
			}
		}
		p.series = append(p.series, ps)
	}
	return p
}

func s4Plot(sc *Scale) plot {
	p := plot{title: "S4: analysis routes, p99 against the window's events (7, 15, 30 days)", xLabel: "events in the window",
		yLabel: "p99 ms", logX: true, logY: true}
	// A color per route; its bare count dashed.
	colors := map[string]string{}
	for _, l := range sc.Analysis[len(sc.Analysis)-1].Reads {
		route, _, _ := strings.Cut(strings.TrimPrefix(l.Name, "S4 "), ":")
		if _, ok := colors[route]; !ok {
			colors[route] = plotColors[len(colors)%len(plotColors)]
		}
		ps := plotSeries{name: strings.TrimPrefix(l.Name, "S4 "), color: colors[route], dashed: strings.HasSuffix(l.Name, layerRaw)}
		for _, w := range sc.Analysis {
			if r := findLat(w.Reads, l.Name, "idle", 1); r.N > 0 {
				ps.pts = append(ps.pts, [2]float64{float64(w.Events), r.P99ms})
			}
		}
		p.series = append(p.series, ps)
	}
	return p
}

func s5Plot(sc *Scale) plot {
	rp := sc.Replay
	n := float64(rp.Messages)
	title := fmt.Sprintf("S5: replay of the whole log (%s messages) into empty tables, %s", shortNum(n), windowSeconds(rp.Progress))
	if !rp.Finished {
		title = fmt.Sprintf("S5: replay stopped at %s of %s messages, %s", shortNum(float64(rp.Committed)), shortNum(n), windowSeconds(rp.Progress))
	}
	return plot{title: title,
		xLabel: "messages committed", yLabel: "messages/s",
		series: []plotSeries{rateSeries("replay", rp.Progress, rp.Messages),
			flat("first ingest (S1), whole-run mean", 0, n, sc.Ingest.PerSecond),
			flat("target: 0.5x the first ingest", 0, n, sc.Ingest.PerSecond/2)}}
}

func s6Plot(sc *Scale) plot {
	raw, run := plotSeries{name: "one raw ALTER TABLE events DELETE"}, plotSeries{name: "the deleter (every table)"}
	for _, pg := range sc.Purges {
		raw.pts = append(raw.pts, [2]float64{float64(pg.Persons), pg.RawSeconds})
		run.pts = append(run.pts, [2]float64{float64(pg.Persons), pg.RunnerSeconds})
	}
	return plot{title: fmt.Sprintf("S6: purge time against persons purged (%s events in the table)", shortNum(float64(sc.Purges[0].EventsTotal))),
		xLabel: "persons purged", yLabel: "seconds", logX: true, series: []plotSeries{raw, run}}
}

func s7Plot(sc *Scale) plot {
	ps := plotSeries{name: "events table, as ingested"}
	var end float64
	for _, p := range sc.Progress {
		if p.TableRows > 0 {
			ps.pts = append(ps.pts, [2]float64{float64(p.TableRows), float64(p.TableBytes) / float64(p.TableRows)})
			end = float64(p.TableRows)
		}
	}
	p := plot{title: "S7: events table bytes on disk per event as it grows", xLabel: "rows in the events table", yLabel: "bytes per event",
		series: []plotSeries{ps}}
	if d := sc.Disk; d != nil && d.EventsTuned > 0 {
		p.series = append(p.series, flat("at the end, after merges", 0, end, d.EventsTable),
			flat("hand-tuned table "+d.TunedOrdering, 0, end, d.EventsTuned))
	}
	return p
}
