package main

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// The plots are well-formed SVG with one polyline per series and a
// legend entry each, whatever the values (log axes drop what they cannot
// show).
func TestPlotSVG(t *testing.T) {
	for _, p := range []plot{
		{title: "log <&>", logX: true, logY: true, series: []plotSeries{
			{name: "a & b", pts: [][2]float64{{1e5, 1}, {1e6, 2}, {1e7, 0}}},
			{name: "limit", dashed: true, pts: [][2]float64{{1e5, 3}, {1e7, 3}}}}},
		{title: "linear", series: []plotSeries{{name: "rate", pts: [][2]float64{{0, 10}, {5e6, 12}, {5e7, 9}}}}},
		{title: "empty"},
	} {
		svg := p.svg()
		d := xml.NewDecoder(strings.NewReader(svg))
		lines := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed: %v\n%s", p.title, err, svg)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
				lines++
			}
		}
		if lines != len(p.series) {
			t.Errorf("%s: %d polylines, want %d", p.title, lines, len(p.series))
		}
		if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
			t.Errorf("%s: a coordinate is not a number:\n%s", p.title, svg)
		}
	}
}

func TestShortNumAndPowerLaw(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 1500: "1.5k", 1e7: "10M", 2.5e9: "2.5G", -3000: "-3k"} {
		if got := shortNum(v); got != want {
			t.Errorf("shortNum(%g) = %q, want %q", v, got, want)
		}
	}
	if k := powerLaw(1e6, 2, 1e7, 20); math.Abs(k-1) > 1e-9 {
		t.Errorf("linear growth: k = %g, want 1", k)
	}
	if k := powerLaw(1e6, 2, 1e7, 2); k != 0 {
		t.Errorf("flat: k = %g, want 0", k)
	}
	if k := powerLaw(1e6, 0, 1e7, 2); !math.IsNaN(k) {
		t.Errorf("a zero time: k = %g, want NaN", k)
	}
}

// A replay that did not reach the end of the log is recorded, not
// judged: its rate covers only what it committed.
func TestScaleGoalsJudgeOnlyAFinishedReplay(t *testing.T) {
	sc := &Scale{Ingest: Rate{PerSecond: 20000}, RawConsume: Rate{PerSecond: 60000},
		Replay: &ScaleReplay{Messages: 60, Committed: 25, Rate: Rate{PerSecond: 47000}}}
	s5 := func() Goal {
		for _, g := range scaleGoals(sc) {
			if g.ID == "S5" {
				return g
			}
		}
		t.Fatal("no S5 row")
		return Goal{}
	}
	if g := s5(); g.Pass != nil {
		t.Fatalf("an unfinished replay judged: %+v", g)
	}
	sc.Replay.Committed, sc.Replay.Finished = 60, true
	if g := s5(); g.Pass == nil || !*g.Pass {
		t.Fatalf("a finished replay at 2.35x not met: %+v", g)
	}
}
