package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// series is one line of a chart panel.
type series struct {
	name  string
	color string
	dash  bool
	pts   [][2]float64 // (x, y)
	notes []string     // optional label per point
}

// Chart geometry.
const (
	chartW      = 760
	panelH      = 280
	marginLeft  = 70
	marginRight = 170
	marginTop   = 60
	panelGap    = 70
)

// chart draws throughput and latency against the offered rate as two
// stacked panels of one SVG, by hand: no plotting dependency.
func chart(r *Results) string {
	steps := slices.Clone(r.Steps)
	slices.SortFunc(steps, func(a, b Step) int { return cmpFloat(a.OfferedPerS, b.OfferedPerS) })
	var offered, accepted, p50, p99, i50, i99 [][2]float64
	var notes []string
	xMax, tMax, lMax := 1.0, 1.0, 1.0
	for _, s := range steps {
		x := s.OfferedPerS
		offered = append(offered, [2]float64{x, x})
		accepted = append(accepted, [2]float64{x, s.AcceptedPerS})
		note := ""
		if s.TargetRate == 0 {
			note = "as fast as possible"
		}
		notes = append(notes, note)
		p50 = append(p50, [2]float64{x, s.AddChainP50})
		p99 = append(p99, [2]float64{x, s.AddChainP99})
		i50 = append(i50, [2]float64{x, s.IntegrateP50})
		i99 = append(i99, [2]float64{x, s.IntegrateP99})
		xMax = max(xMax, x)
		tMax = max(tMax, x, s.AcceptedPerS)
		lMax = max(lMax, s.AddChainP99, s.IntegrateP99)
	}
	xMax, tMax, lMax = niceCeil(xMax), niceCeil(tMax), niceCeil(lMax)
	height := marginTop + 2*panelH + panelGap + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, height, chartW, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginLeft,
		html.EscapeString(fmt.Sprintf("%s end to end: %s, %d cores, %s", r.implementation(), r.CPU, r.Cores, r.Date.Format("2006-01-02"))))
	panel(&b, marginTop, "throughput (entries/s)", xMax, tMax, []series{
		{name: "offered (ideal)", color: "#999999", dash: true, pts: offered},
		{name: "accepted", color: "#1f77b4", pts: accepted, notes: notes},
	})
	panel(&b, marginTop+panelH+panelGap, "latency (ms)", xMax, lMax, []series{
		{name: "add-chain p50", color: "#2ca02c", pts: p50},
		{name: "add-chain p99", color: "#2ca02c", dash: true, pts: p99},
		{name: "integrate p50", color: "#d62728", pts: i50},
		{name: "integrate p99", color: "#d62728", dash: true, pts: i99},
	})
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">offered rate (submissions/s)</text>`+"\n",
		marginLeft+(chartW-marginLeft-marginRight)/2, height-15)
	b.WriteString("</svg>\n")
	return b.String()
}

// panel draws axes, grid, lines and a legend at vertical offset top.
func panel(b *strings.Builder, top int, title string, xMax, yMax float64, ss []series) {
	w := chartW - marginLeft - marginRight
	x := func(v float64) float64 { return marginLeft + v/xMax*float64(w) }
	y := func(v float64) float64 { return float64(top+panelH) - v/yMax*float64(panelH) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, html.EscapeString(title))
	for i := 0; i <= 5; i++ {
		yv := yMax * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginLeft, y(yv), marginLeft+w, y(yv))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginLeft-6, y(yv), tick(yv))
		xv := xMax * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>`+"\n", x(xv), top, x(xv), top+panelH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(xv), top+panelH+16, tick(xv))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginLeft, top, w, panelH)
	for i, s := range ss {
		if len(s.pts) == 0 {
			continue
		}
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="6,4"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		for j, p := range s.pts {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p[0]), y(p[1]), s.color)
			if j < len(s.notes) && s.notes[j] != "" {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n",
					x(p[0])-6, y(p[1])+16, s.color, html.EscapeString(s.notes[j]))
			}
		}
		ly := top + 10 + 20*i
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n",
			marginLeft+w+12, ly, marginLeft+w+40, ly, s.color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", marginLeft+w+46, ly, html.EscapeString(s.name))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
