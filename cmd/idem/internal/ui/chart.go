package ui

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// series is one line of the outcome chart.
type series struct {
	Name   string
	Color  string
	Values []float64
	Total  float64
}

// chart is an SVG drawn on the server: no script, no inline style (the
// CSP forbids both), colours as presentation attributes.
type chart struct {
	Title  string
	Source string
	Labels []string // one per bucket, oldest first
	Series []series
	Empty  string // why there is nothing to draw
}

var outcomeColors = map[string]string{
	"first": "#2f7d32", "succeeded": "#2f7d32", "replay": "#1565c0", "failed": "#c62828",
	"unknown": "#ef6c00", "conflict": "#6a1b9a", "mismatch": "#ad1457", "released": "#607d8b",
	"fenced": "#795548", "error": "#000000", "cancelled": "#9e9e9e",
}

func colorOf(name string) string {
	if c, ok := outcomeColors[name]; ok {
		return c
	}
	return "#455a64"
}

// svg renders the chart as a polyline per series over a grid.
func (c *chart) SVG() template.HTML {
	const w, h, left, bottom, top, right = 720.0, 220.0, 48.0, 28.0, 12.0, 12.0
	if c.Empty != "" || len(c.Labels) == 0 {
		return ""
	}
	maxV := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			maxV = math.Max(maxV, v)
		}
	}
	if maxV == 0 {
		maxV = 1
	}
	maxV = 4 * niceCeil(maxV/4) // four grid steps of a round size
	n := len(c.Labels)
	x := func(i int) float64 {
		if n == 1 {
			return left + (w-left-right)/2
		}
		return left + float64(i)*(w-left-right)/float64(n-1)
	}
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/maxV) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w, h, template.HTMLEscapeString(c.Title))
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0" stroke-width="1"/>`, left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s</text>`, left-6, y(v)+4, trimFloat(v))
	}
	step := max(1, n/6)
	for i := 0; i < n; i += step {
		anchor := "middle"
		switch {
		case n > 1 && i == 0:
			anchor = "start"
		case n > 1 && i+step >= n:
			anchor = "end" // the last label would run off the right edge
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="%s" fill="#555">%s</text>`, x(i), h-8, anchor, template.HTMLEscapeString(c.Labels[i]))
	}
	for _, s := range c.Series {
		var pts []string
		for i, v := range s.Values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`,
			s.Color, strings.Join(pts, " "), template.HTMLEscapeString(s.Name))
		if n == 1 {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(0), y(s.Values[0]), s.Color)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and escaped names only
}

func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// metricsChart draws per-interval increases of idem_requests_total by
// outcome from the sampler's scrapes.
func metricsChart(samples []sample) (*chart, float64, bool) {
	c := &chart{Title: "requests by outcome per scrape interval", Source: "from --metrics-url (idem_requests_total)"}
	var ok []sample
	for _, s := range samples {
		if s.scrapeErr == "" {
			ok = append(ok, s)
		}
	}
	if len(samples) > 0 && len(ok) == 0 {
		c.Empty = "the metrics endpoint did not answer: " + samples[len(samples)-1].scrapeErr
		return c, 0, false
	}
	if len(ok) < 2 {
		c.Empty = "waiting for a second scrape of the metrics endpoint"
		if len(ok) == 1 {
			return c, ok[0].dupRatio, ok[0].hasRatio
		}
		return c, 0, false
	}
	names := map[string]bool{}
	for _, s := range ok {
		for k := range s.outcomes {
			names[k] = true
		}
	}
	for _, name := range sortedKeys(names) {
		sr := series{Name: name, Color: colorOf(name)}
		for i := 1; i < len(ok); i++ {
			d := ok[i].outcomes[name] - ok[i-1].outcomes[name]
			if d < 0 {
				d = ok[i].outcomes[name] // the proxy restarted: its counters began again
			}
			sr.Values = append(sr.Values, d)
			sr.Total += d
		}
		c.Series = append(c.Series, sr)
	}
	for i := 1; i < len(ok); i++ {
		c.Labels = append(c.Labels, ok[i].at.Format("15:04:05"))
	}
	last := ok[len(ok)-1]
	return c, last.dupRatio, last.hasRatio
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// storeChartWindow and storeChartCap bound the store-drawn chart: the
// records created in the last day, at most this many read.
const (
	storeChartWindow = 24 * time.Hour
	storeChartCap    = 20000
)
