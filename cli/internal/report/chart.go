package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Charts are plain SVG, written here: no script, no external font or style,
// so the report's HTML stays one self-contained file. Every chart carries
// role="img", a <title>, and class names (axis, grid, series, bar) that tests
// and stylesheets can rely on.

// Colors of the protocols, the same in every chart.
var protocolColors = map[string]string{
	"grpc":            "#4e79a7",
	"grpc-web":        "#59a14f",
	"grpc-web-text":   "#76b7b2",
	"rest":            "#f28e2b",
	"rest-proto":      "#9c755f",
	"rest-transcoded": "#b07aa1",
	"unknown":         "#bab0ac",
}

var extraColors = []string{"#e15759", "#edc948", "#ff9da7", "#17becf", "#7f7f7f"}

// ProtocolColor is the color of a protocol's series; unknown names get a
// stable color of their own.
func ProtocolColor(protocol string) string {
	if c, ok := protocolColors[protocol]; ok {
		return c
	}
	h := 0
	for _, r := range protocol {
		h = h*31 + int(r)
	}
	if h < 0 {
		h = -h
	}
	return extraColors[h%len(extraColors)]
}

// ---------------------------------------------------------------- numbers and ticks

// niceStep is a 1, 2 or 5 × 10^k step giving about n intervals over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks covers [0, max] (or [min, max]) with nice ticks; it returns the
// ticks and the axis end (the last tick).
func linearTicks(lo, hi float64, n int) ([]float64, float64, float64) {
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep(hi-lo, n)
	start := math.Floor(lo/step) * step
	end := math.Ceil(hi/step) * step
	var ticks []float64
	for v := start; v <= end+step/2; v += step {
		ticks = append(ticks, math.Round(v/step)*step)
	}
	return ticks, start, end
}

// FormatNumber writes a value for an axis or a label: thousands separators,
// at most three significant decimals, k/M suffixes when compact.
func FormatNumber(v float64, compact bool) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	a := math.Abs(v)
	if compact {
		switch {
		case a >= 1e9:
			return trimZeros(strconv.FormatFloat(v/1e9, 'f', 1, 64)) + "G"
		case a >= 1e6:
			return trimZeros(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
		case a >= 1e4:
			return trimZeros(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
		}
	}
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return groupThousands(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 10:
		return trimZeros(strconv.FormatFloat(v, 'f', 1, 64))
	case a >= 1:
		return trimZeros(strconv.FormatFloat(v, 'f', 2, 64))
	default:
		return trimZeros(strconv.FormatFloat(v, 'g', 3, 64))
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "eE") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatMillis writes a latency given in milliseconds.
func FormatMillis(ms float64) string {
	if ms < 1 {
		return FormatNumber(ms*1000, false) + " µs"
	}
	return FormatNumber(ms, false) + " ms"
}

// ---------------------------------------------------------------- SVG writer

type svg struct {
	b    strings.Builder
	w, h int
}

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func esc(s string) string { return html.EscapeString(s) }

func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

func (s *svg) open(title, class string) {
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" class="chart %s" role="img" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif" font-size="12">`,
		esc(class), s.w, s.h, s.w, s.h)
	s.f(`<title>%s</title>`, esc(title))
	s.f(`<rect class="background" x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, s.w, s.h)
}

func (s *svg) close() string {
	s.f(`</svg>`)
	return s.b.String()
}

func (s *svg) text(x, y float64, anchor, class, text string, extra ...string) {
	s.f(`<text class="%s" x="%s" y="%s" text-anchor="%s" fill="#333"%s>%s</text>`,
		class, num(x), num(y), anchor, strings.Join(extra, ""), esc(text))
}

func (s *svg) line(x1, y1, x2, y2 float64, class, stroke string, width float64) {
	s.f(`<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"/>`,
		class, num(x1), num(y1), num(x2), num(y2), stroke, num(width))
}

// legend draws swatches and labels in a row from (x, y); it returns the y
// below it, wrapping at maxX.
func (s *svg) legend(x, y, maxX float64, items []legendItem) float64 {
	cx := x
	for _, it := range items {
		width := 22 + 7*float64(len([]rune(it.label)))
		if cx+width > maxX && cx > x {
			cx = x
			y += 18
		}
		if it.dashed {
			s.f(`<line class="legend-swatch" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="4 3"/>`,
				num(cx), num(y-4), num(cx+14), num(y-4), it.color)
		} else {
			s.f(`<rect class="legend-swatch" x="%s" y="%s" width="12" height="12" fill="%s"/>`, num(cx), num(y-10), it.color)
		}
		s.text(cx+17, y, "start", "legend", it.label)
		cx += width + 12
	}
	return y + 18
}

type legendItem struct {
	label  string
	color  string
	dashed bool
}

// ---------------------------------------------------------------- latency CDF

// CDFSeries is one protocol's latency distribution: Values[i] (ms) is the
// Levels[i] quantile.
type CDFSeries struct {
	Name         string
	Calls        int64   // estimated when sampled (each recorded call weighted by 1/sample_rate)
	SampledCalls int64   // calls recorded, the quantiles' sample; 0: the same as Calls
	Median       float64 // ms; NaN: read it from the 0.5 level
	Levels       []float64
	Values       []float64 // milliseconds
}

// CDFChart draws cumulative distributions on a log-scale latency axis.
func CDFChart(title string, series []CDFSeries) string {
	// The legend (protocol, calls, median) flows in rows under the title, so
	// no curve hides under it; the plot starts below it.
	type entry struct {
		label, color string
		x, y         float64
	}
	const width, left, right, bottom, plotH = 526.0, 58.0, 26.0, 46.0, 244.0
	var entries []entry
	x, y := left, 44.0
	for _, sr := range series {
		median := sr.Median
		if math.IsNaN(median) || median == 0 {
			median = quantileAt(sr, 0.5)
		}
		label := fmt.Sprintf("%s (%d calls, p50 %s)", sr.Name, sr.Calls, FormatMillis(median))
		if sr.SampledCalls > 0 && sr.SampledCalls != sr.Calls {
			label = fmt.Sprintf("%s (~%d calls, %d sampled, p50 %s)", sr.Name, sr.Calls, sr.SampledCalls, FormatMillis(median))
		}
		w := 18 + 6.4*float64(len([]rune(label)))
		if x+w > width-right && x > left {
			x, y = left, y+17
		}
		entries = append(entries, entry{label: label, color: ProtocolColor(sr.Name), x: math.Round(x), y: y})
		x += w + 16
	}
	top := y + 14
	if len(entries) == 0 {
		top = 40
	}
	s := &svg{w: int(width), h: int(top + plotH + bottom)}
	s.open("Latency CDF: "+title, "cdf")
	pw, ph := width-left-right, plotH
	s.text(left, 22, "start", "chart-title", title, ` font-size="14" font-weight="600"`)
	for _, e := range entries {
		s.f(`<rect class="legend-swatch" x="%s" y="%s" width="12" height="4" fill="%s"/>`, num(e.x), num(e.y-6), e.color)
		s.text(e.x+17, e.y, "start", "legend", e.label, ` font-size="11.5"`)
	}

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sr := range series {
		for _, v := range sr.Values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 10
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	xOf := func(v float64) float64 {
		if v <= 0 {
			v = math.Pow(10, d0)
		}
		return left + (math.Log10(v)-d0)/(d1-d0)*pw
	}
	yOf := func(p float64) float64 { return top + (1-p)*ph }

	// Grid and axes.
	s.f(`<g class="grid">`)
	for _, p := range []float64{0, 0.25, 0.5, 0.75, 1} {
		s.line(left, yOf(p), left+pw, yOf(p), "grid-line", "#e5e5e5", 1)
	}
	decades := int(d1 - d0)
	for d := d0; d <= d1; d++ {
		s.line(xOf(math.Pow(10, d)), top, xOf(math.Pow(10, d)), top+ph, "grid-line", "#d9d9d9", 1)
		if d < d1 {
			for _, m := range []float64{2, 5} {
				x := xOf(m * math.Pow(10, d))
				s.line(x, top, x, top+ph, "grid-line minor", "#f0f0f0", 1)
			}
		}
	}
	s.f(`</g><g class="axis x-axis">`)
	s.line(left, top+ph, left+pw, top+ph, "axis-line", "#666", 1)
	for d := d0; d <= d1; d++ {
		v := math.Pow(10, d)
		s.line(xOf(v), top+ph, xOf(v), top+ph+5, "tick", "#666", 1)
		s.text(xOf(v), top+ph+18, "middle", "tick-label", FormatMillis(v))
		if d < d1 && decades <= 2 {
			for _, m := range []float64{2, 5} {
				s.text(xOf(m*v), top+ph+18, "middle", "tick-label minor", FormatMillis(m*v), ` fill-opacity="0.7"`)
			}
		}
	}
	s.text(left+pw/2, float64(s.h)-8, "middle", "axis-title", "latency at the proxy (log scale)")
	s.f(`</g><g class="axis y-axis">`)
	s.line(left, top, left, top+ph, "axis-line", "#666", 1)
	for _, p := range []float64{0, 0.25, 0.5, 0.75, 1} {
		s.text(left-6, yOf(p)+4, "end", "tick-label", fmt.Sprintf("%d%%", int(p*100)))
	}
	s.text(14, top+ph/2, "middle", "axis-title", "share of calls at or below", fmt.Sprintf(` transform="rotate(-90 14 %s)"`, num(top+ph/2)))
	s.f(`</g>`)

	// Series: a line through the quantiles (x: latency, y: level).
	for i, sr := range series {
		var path strings.Builder
		for j := range sr.Values {
			if j >= len(sr.Levels) {
				break
			}
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%s %s ", cmd, num(xOf(sr.Values[j])), num(yOf(sr.Levels[j])))
		}
		s.f(`<path class="series" data-series="%s" d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"><title>%s</title></path>`,
			esc(sr.Name), strings.TrimSpace(path.String()), entries[i].color, esc(entries[i].label))
	}
	return s.close()
}

func quantileAt(sr CDFSeries, level float64) float64 {
	for i, l := range sr.Levels {
		if math.Abs(l-level) < 1e-9 && i < len(sr.Values) {
			return sr.Values[i]
		}
	}
	return math.NaN()
}

// ---------------------------------------------------------------- horizontal bar panels

// Segment is one part of a stacked bar.
type Segment struct {
	Name  string
	Value float64
	Color string
}

// Bar is one row of a panel: a label and its stacked segments.
type Bar struct {
	Label    string
	Color    string // the label's swatch (the protocol), optional
	Note     string // written after the bar's total, optional (e.g. a ratio)
	Segments []Segment
}

// Panel is one group of bars with its own scale (one operation).
type Panel struct {
	Title string
	Bars  []Bar
}

// BarPanels draws stacked horizontal bars, one panel per group, each panel
// with its own x axis; legend lists the segment kinds; unit names the values
// (e.g. "B", "ms").
func BarPanels(title string, legend []legendItem, panels []Panel, unit, axisTitle string) string {
	const rowH, barH, headH, axisH, gap = 24.0, 15.0, 24.0, 34.0, 12.0
	s := &svg{w: 1100}
	height := 40.0
	if len(legend) > 0 {
		height += 22
	}
	for _, p := range panels {
		height += headH + rowH*float64(len(p.Bars)) + axisH + gap
	}
	s.h = int(height + 16)
	s.open(title, "bars")
	s.text(12, 22, "start", "chart-title", title, ` font-size="14" font-weight="600"`)
	y := 40.0
	if len(legend) > 0 {
		y = s.legend(150, y+8, float64(s.w)-20, legend) - 4
	}
	labelW, valueW := 150.0, 90.0
	for _, p := range panels {
		for _, b := range p.Bars {
			if b.Note != "" {
				valueW = math.Max(valueW, 90+7*float64(len([]rune(b.Note))))
			}
		}
	}
	pw := float64(s.w) - labelW - valueW - 12
	for _, p := range panels {
		total := 0.0
		for _, b := range p.Bars {
			t := 0.0
			for _, sg := range b.Segments {
				t += math.Max(sg.Value, 0)
			}
			total = math.Max(total, t)
		}
		ticks, _, end := linearTicks(0, total, 6)
		if end <= 0 {
			end = 1
		}
		xOf := func(v float64) float64 { return labelW + v/end*pw }
		s.f(`<g class="panel" data-panel="%s">`, esc(p.Title))
		s.text(12, y+16, "start", "panel-title", p.Title, ` font-weight="600"`)
		y += headH
		plotTop := y
		plotBottom := y + rowH*float64(len(p.Bars))
		s.f(`<g class="grid">`)
		for _, t := range ticks {
			s.line(xOf(t), plotTop, xOf(t), plotBottom, "grid-line", "#e5e5e5", 1)
		}
		s.f(`</g>`)
		for _, b := range p.Bars {
			cy := y + (rowH-barH)/2
			if b.Color != "" {
				s.f(`<rect class="label-swatch" x="22" y="%s" width="4" height="%s" fill="%s"/>`, num(cy), num(barH), b.Color)
			}
			s.text(32, cy+barH-3, "start", "bar-label", b.Label)
			x := labelW
			t := 0.0
			for _, sg := range b.Segments {
				v := math.Max(sg.Value, 0)
				w := v / end * pw
				if w > 0 {
					s.f(`<rect class="bar" data-series="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s · %s: %s %s</title></rect>`,
						esc(sg.Name), num(x), num(cy), num(math.Max(w, 0.5)), num(barH), sg.Color,
						esc(b.Label), esc(sg.Name), FormatNumber(sg.Value, false), esc(unit))
				}
				x += w
				t += v
			}
			value := FormatNumber(t, false) + " " + unit
			if b.Note != "" {
				value += "  " + b.Note
			}
			s.text(x+6, cy+barH-3, "start", "bar-value", value)
			y += rowH
		}
		s.f(`<g class="axis x-axis">`)
		s.line(labelW, plotBottom, labelW+pw, plotBottom, "axis-line", "#666", 1)
		s.line(labelW, plotTop, labelW, plotBottom, "axis-line", "#666", 1)
		for _, t := range ticks {
			s.line(xOf(t), plotBottom, xOf(t), plotBottom+4, "tick", "#666", 1)
			s.text(xOf(t), plotBottom+16, "middle", "tick-label", FormatNumber(t, true))
		}
		if axisTitle != "" {
			s.text(labelW+pw, plotBottom+28, "end", "axis-title", axisTitle, ` fill-opacity="0.75" font-size="11"`)
		}
		s.f(`</g></g>`)
		y = plotBottom + axisH + gap
	}
	return s.close()
}

// ---------------------------------------------------------------- time series

// Point is one value at one time.
type Point struct {
	T time.Time
	V float64
}

// TimeSeries is one line of a time chart.
type TimeSeries struct {
	Name   string
	Color  string
	Dashed bool
	Points []Point // sorted by time
}

// TimeChart draws lines over time on a shared linear y axis.
func TimeChart(title, yTitle string, series []TimeSeries) string {
	s := &svg{w: 1100, h: 340}
	s.open(title, "timeline")
	left, right, top, bottom := 64.0, 40.0, 56.0, 46.0
	pw, ph := float64(s.w)-left-right, float64(s.h)-top-bottom
	s.text(12, 22, "start", "chart-title", title, ` font-size="14" font-weight="600"`)
	var items []legendItem
	for _, sr := range series {
		items = append(items, legendItem{label: sr.Name, color: sr.Color, dashed: sr.Dashed})
	}
	s.legend(left, 44, float64(s.w)-right, items)

	var t0, t1 time.Time
	hi := 0.0
	for _, sr := range series {
		for _, p := range sr.Points {
			if t0.IsZero() || p.T.Before(t0) {
				t0 = p.T
			}
			if t1.IsZero() || p.T.After(t1) {
				t1 = p.T
			}
			hi = math.Max(hi, p.V)
		}
	}
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
		t0 = t0.Add(-500 * time.Millisecond)
	}
	xOf := func(t time.Time) float64 { return left + t.Sub(t0).Seconds()/span*pw }
	yticks, _, yend := linearTicks(0, hi, 5)
	if yend <= 0 {
		yend = 1
	}
	yOf := func(v float64) float64 { return top + (1-v/yend)*ph }

	s.f(`<g class="grid">`)
	for _, v := range yticks {
		s.line(left, yOf(v), left+pw, yOf(v), "grid-line", "#e5e5e5", 1)
	}
	s.f(`</g><g class="axis x-axis">`)
	s.line(left, top+ph, left+pw, top+ph, "axis-line", "#666", 1)
	step := timeStep(span)
	first := t0.Truncate(step)
	if first.Before(t0) {
		first = first.Add(step)
	}
	layout := "15:04:05"
	for t := first; !t.After(t0.Add(time.Duration(span * float64(time.Second)))); t = t.Add(step) {
		s.line(xOf(t), top+ph, xOf(t), top+ph+5, "tick", "#666", 1)
		s.text(xOf(t), top+ph+18, "middle", "tick-label", t.UTC().Format(layout))
	}
	s.text(left+pw/2, float64(s.h)-8, "middle", "axis-title", "time (UTC)")
	s.f(`</g><g class="axis y-axis">`)
	s.line(left, top, left, top+ph, "axis-line", "#666", 1)
	for _, v := range yticks {
		s.text(left-6, yOf(v)+4, "end", "tick-label", FormatNumber(v, true))
	}
	s.text(16, top+ph/2, "middle", "axis-title", yTitle, fmt.Sprintf(` transform="rotate(-90 16 %s)"`, num(top+ph/2)))
	s.f(`</g>`)

	for _, sr := range series {
		var path strings.Builder
		for i, p := range sr.Points {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%s %s ", cmd, num(xOf(p.T)), num(yOf(p.V)))
		}
		dash := ""
		if sr.Dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		if len(sr.Points) > 0 {
			s.f(`<path class="series" data-series="%s" d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s><title>%s</title></path>`,
				esc(sr.Name), strings.TrimSpace(path.String()), sr.Color, dash, esc(sr.Name))
		}
		if len(sr.Points) <= 120 {
			r := "2.5"
			if len(sr.Points) <= 3 { // a run of a second or two: the dots are the data
				r = "4.5"
			}
			for _, p := range sr.Points {
				s.f(`<circle class="point" cx="%s" cy="%s" r="%s" fill="%s"><title>%s %s: %s</title></circle>`,
					num(xOf(p.T)), num(yOf(p.V)), r, sr.Color, esc(sr.Name), p.T.UTC().Format("15:04:05"), FormatNumber(p.V, false))
			}
		}
	}
	return s.close()
}

func timeStep(spanS float64) time.Duration {
	for _, st := range []int{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if spanS/float64(st) <= 10 {
			return time.Duration(st) * time.Second
		}
	}
	return 7 * 24 * time.Hour
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
