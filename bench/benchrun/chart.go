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
	dash  bool         // dashed
	dot   bool         // dotted
	pts   [][2]float64 // (x, y)
	notes []string     // optional label per point
}

// axis is one vertical scale of a panel and the lines drawn against it.
type axis struct {
	max   float64
	color string // of the tick labels; "" for the default
	ss    []series
}

// Chart geometry.
const (
	chartW      = 840
	panelH      = 280
	marginLeft  = 70
	marginRight = 250
	marginTop   = 60
	panelGap    = 70
	rightAxisW  = 44 // room for a right axis's tick labels before the legend
)

// chart draws, against the offered rate, three stacked panels of one SVG,
// by hand (no plotting dependency): throughput, latency, and the server's
// CPU per accepted entry and peak RSS, for the steps of the first mix of
// issuers (results.md has every mix).
func chart(r *Results) string {
	var steps []Step
	for _, s := range r.Steps {
		if s.Issuers == r.Steps[0].Issuers {
			steps = append(steps, s)
		}
	}
	slices.SortFunc(steps, func(a, b Step) int { return cmpFloat(a.OfferedPerS, b.OfferedPerS) })
	var offered, offeredNew, accepted, p50, p99, i50, i99, cpu, rss [][2]float64
	var notes []string
	xMax, tMax, lMax, cMax, mMax := 1.0, 1.0, 1.0, 1.0, 1.0
	for _, s := range steps {
		x := s.OfferedPerS
		offered = append(offered, [2]float64{x, x})
		offeredNew = append(offeredNew, [2]float64{x, x * (1 - r.Dup)})
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
		cpu = append(cpu, [2]float64{x, s.ServerCPUUSPerEntry})
		rss = append(rss, [2]float64{x, s.RSSMaxMB})
		xMax = max(xMax, x)
		tMax = max(tMax, x, s.AcceptedPerS)
		lMax = max(lMax, s.AddChainP99, s.IntegrateP99)
		cMax = max(cMax, s.ServerCPUUSPerEntry)
		mMax = max(mMax, s.RSSMaxMB)
	}
	xMax, tMax, lMax, cMax, mMax = niceCeil(xMax), niceCeil(tMax), niceCeil(lMax), niceCeil(cMax), niceCeil(mMax)
	height := marginTop + 3*panelH + 2*panelGap + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, height, chartW, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(chartTitle(r)))

	// Throughput. Resubmissions (the hammer's -dup share of what it
	// offers) are answered from the dedup cache with the SCT of the entry
	// already logged and are not new entries, so accepted sits below
	// offered by that share even when nothing is lost: the band between
	// the two offered lines shows it, and a note says so.
	tput := []series{
		{name: "offered (all submissions)", color: "#999999", dash: true, pts: offered},
		{name: "accepted (new entries)", color: "#1f77b4", pts: accepted, notes: notes},
	}
	if r.Dup > 0 { // drawn last: on top of accepted, which it should meet
		tput = append(tput, series{name: "offered new entries", color: "#333333", dot: true, pts: offeredNew})
	}
	top := marginTop
	p := panel(&b, top, "throughput (entries/s)", xMax, axis{max: tMax, ss: tput}, nil)
	if r.Dup > 0 && len(steps) > 0 {
		band := make([]string, 0, 2*len(steps))
		for _, pt := range offered {
			band = append(band, fmt.Sprintf("%.1f,%.1f", p.x(pt[0]), p.y(pt[1])))
		}
		for _, pt := range slices.Backward(offeredNew) {
			band = append(band, fmt.Sprintf("%.1f,%.1f", p.x(pt[0]), p.y(pt[1])))
		}
		fmt.Fprintf(&b, `<polygon points="%s" fill="#999999" fill-opacity="0.25" stroke="none"/>`+"\n", strings.Join(band, " "))
		pct := fmt.Sprintf("%g%%", math.Round(r.Dup*1000)/10)
		for i, line := range []string{
			"shaded: the " + pct + " of submissions that are resubmissions,",
			"answered from the dedup cache with their first SCT and",
			"not counted as accepted: not loss. Accepted on the",
			"offered new entries line means nothing was lost.",
		} {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#555555">%s</text>`+"\n", marginLeft+8, top+18+14*i, html.EscapeString(line))
		}
	}

	top += panelH + panelGap
	panel(&b, top, "latency (ms)", xMax, axis{max: lMax, ss: []series{
		{name: "add-chain p50", color: "#2ca02c", pts: p50},
		{name: "add-chain p99", color: "#2ca02c", dash: true, pts: p99},
		{name: "integrate p50", color: "#d62728", pts: i50},
		{name: "integrate p99", color: "#d62728", dash: true, pts: i99},
	}}, nil)

	top += panelH + panelGap
	const cpuColor, rssColor = "#9467bd", "#ff7f0e"
	panel(&b, top, "server: CPU per accepted entry (µs, left axis) and peak RSS (MB, right axis)", xMax,
		axis{max: cMax, color: cpuColor, ss: []series{{name: "CPU µs/entry (left)", color: cpuColor, pts: cpu}}},
		&axis{max: mMax, color: rssColor, ss: []series{{name: "RSS MB (right)", color: rssColor, dash: true, pts: rss}}})

	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">offered rate (submissions/s)</text>`+"\n",
		marginLeft+(chartW-marginLeft-marginRight)/2, height-15)
	b.WriteString("</svg>\n")
	return b.String()
}

// chartTitle names the backend, so that charts of a local and an S3 run
// cannot be taken for each other.
func chartTitle(r *Results) string {
	on := "local disk" // results from before Backend existed were all local
	if r.Backend == "s3" {
		on = "S3 + PostgreSQL"
	}
	mix := ""
	if len(r.Steps) > 0 && r.Steps[0].Issuers != "" {
		mix = ", -issuers " + r.Steps[0].Issuers
	}
	return fmt.Sprintf("%s end to end on %s%s: %s, %d cores, %s", r.implementation(), on, mix, r.CPU, r.Cores, r.Date.Format("2006-01-02"))
}

// plot maps data to the coordinates of a panel's left axis.
type plot struct {
	x, y func(float64) float64
}

// panel draws axes, grid, lines and a legend at vertical offset top: the
// grid follows the left axis; right, if not nil, gets its own tick labels
// on the right edge. It returns the left axis's mapping.
func panel(b *strings.Builder, top int, title string, xMax float64, left axis, right *axis) plot {
	w := chartW - marginLeft - marginRight
	x := func(v float64) float64 { return marginLeft + v/xMax*float64(w) }
	yOf := func(yMax float64) func(float64) float64 {
		return func(v float64) float64 { return float64(top+panelH) - v/yMax*float64(panelH) }
	}
	y := yOf(left.max)
	fill := func(c string) string {
		if c == "" {
			return ""
		}
		return fmt.Sprintf(` fill="%s"`, c)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, html.EscapeString(title))
	for i := 0; i <= 5; i++ {
		yv := left.max * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginLeft, y(yv), marginLeft+w, y(yv))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle"%s>%s</text>`+"\n", marginLeft-6, y(yv), fill(left.color), tick(yv))
		if right != nil {
			rv := right.max * float64(i) / 5
			fmt.Fprintf(b, `<text x="%d" y="%.1f" dominant-baseline="middle"%s>%s</text>`+"\n", marginLeft+w+6, yOf(right.max)(rv), fill(right.color), tick(rv))
		}
		xv := xMax * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>`+"\n", x(xv), top, x(xv), top+panelH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(xv), top+panelH+16, tick(xv))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", marginLeft, top, w, panelH)
	legendX := marginLeft + w + 12
	if right != nil {
		legendX += rightAxisW
	}
	i := 0
	for _, ax := range []*axis{&left, right} {
		if ax == nil {
			continue
		}
		y := yOf(ax.max)
		for _, s := range ax.ss {
			if len(s.pts) == 0 {
				continue
			}
			var pts []string
			for _, p := range s.pts {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
			}
			dash := ""
			switch {
			case s.dash:
				dash = ` stroke-dasharray="6,4"`
			case s.dot:
				dash = ` stroke-dasharray="2,3"`
			}
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
			for j, p := range s.pts {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p[0]), y(p[1]), s.color)
				if j < len(s.notes) && s.notes[j] != "" {
					// Below and right of the point: the lines come from
					// the left, and nothing is right of the last step.
					fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n",
						x(p[0])+6, y(p[1])+16, s.color, html.EscapeString(s.notes[j]))
				}
			}
			ly := top + 10 + 20*i
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n",
				legendX, ly, legendX+28, ly, s.color, dash)
			fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendX+34, ly, html.EscapeString(s.name))
			i++
		}
	}
	return plot{x: x, y: y}
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
