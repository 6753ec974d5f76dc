package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// plot is one SVG chart of lines: the bench's plots of cost against size
// (G5f, S1-S7). Hand-written: a few polylines need no plotting library.
type plot struct {
	title          string
	xLabel, yLabel string
	logX, logY     bool
	// xTick labels an x value (a tick is drawn at every point's x).
	xTick  func(x float64) string
	series []plotSeries
}

// plotSeries is one line; dashed lines are limits and references.
type plotSeries struct {
	name   string
	dashed bool
	color  string // "": the palette's, by position
	pts    [][2]float64
}

var plotColors = []string{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// svg renders the chart. Log axes drop values <= 0; linear axes start at 0.
func (p plot) svg() string {
	const w, h, left, right, top, bottom = 760.0, 420.0, 80.0, 270.0, 34.0, 52.0
	tx := func(v float64) float64 {
		if p.logX {
			return math.Log10(max(v, 1e-9))
		}
		return v
	}
	ty := func(v float64) float64 {
		if p.logY {
			return math.Log10(max(v, 1e-3))
		}
		return v
	}
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	var xs []float64
	for _, s := range p.series {
		for _, pt := range s.pts {
			x, y := tx(pt[0]), ty(pt[1])
			xlo, xhi, ylo, yhi = min(xlo, x), max(xhi, x), min(ylo, y), max(yhi, y)
			if !s.dashed {
				xs = append(xs, pt[0])
			}
		}
	}
	if math.IsInf(xlo, 1) {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	if p.logX {
		xlo, xhi = xlo-0.1, xhi+0.1
	} else {
		xlo, xhi = min(0, xlo), niceCeil(xhi)
	}
	if p.logY {
		ylo, yhi = math.Floor(ylo), math.Ceil(yhi)
	} else {
		ylo, yhi = min(0, ylo), niceCeil(yhi*1.05)
	}
	if yhi <= ylo {
		yhi = ylo + 1
	}
	px := func(x float64) float64 { return left + (tx(x)-xlo)/(xhi-xlo)*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - (ty(y)-ylo)/(yhi-ylo)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18">%s</text>`+"\n", left, html.EscapeString(p.title))
	// y grid: decades on a log axis, fifths on a linear one.
	var yt []float64
	if p.logY {
		for d := ylo; d <= yhi; d++ {
			yt = append(yt, math.Pow(10, d))
		}
	} else {
		for i := 0; i <= 5; i++ {
			yt = append(yt, ylo+(yhi-ylo)*float64(i)/5)
		}
	}
	for _, v := range yt {
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, y, w-right, y, left-6, y+4, shortNum(v))
	}
	tick := p.xTick
	if tick == nil {
		tick = shortNum
	}
	if !p.logX {
		// A linear axis is ticked in fifths; a log one at the points.
		xs = xs[:0]
		for i := 0; i <= 5; i++ {
			xs = append(xs, xlo+(xhi-xlo)*float64(i)/5)
		}
	}
	seen := map[string]bool{}
	for _, v := range xs {
		label := tick(v)
		if seen[label] {
			continue
		}
		seen[label] = true
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			x, top, x, h-bottom, x, h-bottom+16, html.EscapeString(label))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (left+w-right)/2, h-12, html.EscapeString(p.xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n",
		(top+h-bottom)/2, (top+h-bottom)/2, html.EscapeString(p.yLabel))
	for i, s := range p.series {
		color := s.color
		if color == "" {
			color = plotColors[i%len(plotColors)]
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var coords []string
		for _, pt := range s.pts {
			if (p.logX && pt[0] <= 0) || (p.logY && pt[1] <= 0) {
				continue
			}
			x, y := px(pt[0]), py(pt[1])
			coords = append(coords, fmt.Sprintf("%.1f,%.1f", x, y))
			if !s.dashed && len(s.pts) <= 40 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x, y, color)
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(coords, " "))
		ly := top + 20 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			w-right+10, ly, w-right+30, ly, color, dash, w-right+35, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (0 stays 1).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// shortNum writes a value the way an axis shows it: 1.5k, 10M, 0.3.
func shortNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trimZero(v/1e9) + "G"
	case a >= 1e6:
		return trimZero(v/1e6) + "M"
	case a >= 1e3:
		return trimZero(v/1e3) + "k"
	default:
		return trimZero(v)
	}
}

func trimZero(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}
