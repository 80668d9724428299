// The charts drawn from the answers of known saved queries (bytes per call,
// throughput over time, streaming efficiency; what if, in whatif.go).

package report

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Chart names: the saved queries the report knows how to draw.
const (
	queryBytes      = "bytes_by_operation"
	queryThroughput = "throughput_per_second"
	queryStreaming  = "streaming_efficiency"
)

func addCharts(sec *Section) {
	if sec.Name == queryWhatIf {
		addWhatIf(sec) // its table, notes and chart (whatif.go)
		return
	}
	if len(sec.Errors) > 0 || sec.Result == nil {
		return
	}
	var chart func(*Result) (Chart, []string)
	switch sec.Name {
	case queryBytes:
		chart = bytesChart
	case queryThroughput:
		chart = throughputChart
	case queryStreaming:
		chart = streamingChart
	default:
		return
	}
	if len(sec.Result.Rows) == 0 {
		sec.Notes = append(sec.Notes, "No rows: chart skipped.")
		return
	}
	c, missing := chart(sec.Result)
	if len(missing) > 0 {
		sec.Notes = append(sec.Notes, fmt.Sprintf("Chart skipped: the result lacks the columns %s.", strings.Join(missing, ", ")))
		return
	}
	sec.Charts = append(sec.Charts, c)
}

func indexes(res *Result, names ...string) ([]int, []string) {
	idx := make([]int, len(names))
	var missing []string
	for i, n := range names {
		idx[i] = res.Index(n)
		if idx[i] < 0 {
			missing = append(missing, n)
		}
	}
	return idx, missing
}

func cellF(row []any, i int) float64 {
	f, _ := CellFloat(row[i])
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// Byte segments: request then response; the body bar shows the body without
// its gRPC framing, which is drawn as its own segment (body = payload + framing).
var byteSegments = []struct{ name, color string }{
	{"request headers", "#1f4e79"},
	{"request body", "#4e79a7"},
	{"request framing", "#a0c4e8"},
	{"response headers", "#b35806"},
	{"response body", "#f28e2b"},
	{"response framing", "#fdc38d"},
}

func bytesChart(res *Result) (Chart, []string) {
	idx, missing := indexes(res, "operation", "protocol", "req_header_b", "req_body_b", "req_framing_b",
		"resp_header_b", "resp_body_b", "resp_framing_b")
	if len(missing) > 0 {
		return Chart{}, missing
	}
	panels := map[string]*Panel{}
	var order []string
	for _, row := range res.Rows {
		op, proto := CellText(row[idx[0]]), CellText(row[idx[1]])
		reqH, reqB, reqF := cellF(row, idx[2]), cellF(row, idx[3]), cellF(row, idx[4])
		respH, respB, respF := cellF(row, idx[5]), cellF(row, idx[6]), cellF(row, idx[7])
		// Framing is part of the body when it fits in it.
		if reqF <= reqB {
			reqB -= reqF
		}
		if respF <= respB {
			respB -= respF
		}
		vals := []float64{reqH, reqB, reqF, respH, respB, respF}
		bar := Bar{Label: proto, Color: ProtocolColor(proto)}
		for i, sg := range byteSegments {
			bar.Segments = append(bar.Segments, Segment{Name: sg.name, Value: vals[i], Color: sg.color})
		}
		if panels[op] == nil {
			panels[op] = &Panel{Title: op}
			order = append(order, op)
		}
		panels[op].Bars = append(panels[op].Bars, bar)
	}
	var list []Panel
	for _, op := range order {
		list = append(list, *panels[op])
	}
	var legend []legendItem
	for _, sg := range byteSegments {
		legend = append(legend, legendItem{label: sg.name, color: sg.color})
	}
	return Chart{Title: "Bytes per call", SVG: BarPanels("Mean bytes per call, by operation and protocol", legend, list, "B", "bytes"),
		Caption: "Mean bytes per call each way, stacked: headers, body (without framing), gRPC framing. Each operation has its own scale."}, nil
}

func throughputChart(res *Result) (Chart, []string) {
	idx, missing := indexes(res, "second", "protocol", "calls")
	if len(missing) > 0 {
		return Chart{}, missing
	}
	iErr := res.Index("errors")
	loc := res.Location()
	type acc struct{ calls, errs map[int64]float64 }
	byProto := map[string]*acc{}
	var lo, hi int64
	first := true
	for _, row := range res.Rows {
		t, ok := parseCHTime(row[idx[0]], loc)
		if !ok {
			continue
		}
		sec := t.Unix()
		p := CellText(row[idx[1]])
		if byProto[p] == nil {
			byProto[p] = &acc{calls: map[int64]float64{}, errs: map[int64]float64{}}
		}
		byProto[p].calls[sec] += cellF(row, idx[2])
		if iErr >= 0 {
			byProto[p].errs[sec] += cellF(row, iErr)
		}
		if first || sec < lo {
			lo = sec
		}
		if first || sec > hi {
			hi = sec
		}
		first = false
	}
	if first {
		return Chart{}, []string{"second (as a time)"}
	}
	// Seconds without calls are zeros; long windows are binned (at most ~600 points).
	bin := int64(1)
	if span := hi - lo + 1; span > 600 {
		bin = (span + 599) / 600
	}
	var series, errSeries []TimeSeries
	anyErrors := false
	for _, p := range sortedKeys(byProto) {
		a := byProto[p]
		ts := TimeSeries{Name: p, Color: ProtocolColor(p)}
		es := TimeSeries{Name: p + " errors", Color: ProtocolColor(p), Dashed: true}
		for b := lo; b <= hi; b += bin {
			var c, e float64
			for s := b; s < b+bin; s++ {
				c += a.calls[s]
				e += a.errs[s]
			}
			t := time.Unix(b, 0).UTC()
			ts.Points = append(ts.Points, Point{T: t, V: c / float64(bin)})
			es.Points = append(es.Points, Point{T: t, V: e / float64(bin)})
			anyErrors = anyErrors || e > 0
		}
		series = append(series, ts)
		errSeries = append(errSeries, es)
	}
	caption := "Calls per second at the proxy, per protocol."
	if anyErrors {
		series = append(series, errSeries...)
		caption += " Dashed: errors per second."
	} else if iErr >= 0 {
		caption += " No errors."
	}
	if bin > 1 {
		caption += fmt.Sprintf(" Averaged over %d-second bins.", bin)
	}
	if hi == lo {
		caption += " Every call fell within one second: one point per protocol."
	}
	return Chart{Title: "Throughput over time", SVG: TimeChart("Throughput over time", "calls per second", series), Caption: caption}, nil
}

func streamingChart(res *Result) (Chart, []string) {
	idx, missing := indexes(res, "operation", "protocol", "streaming", "work_ms_per_1000_messages")
	if len(missing) > 0 {
		return Chart{}, missing
	}
	panels := map[string]*Panel{}
	var order []string
	for _, row := range res.Rows {
		op, proto, mode := CellText(row[idx[0]]), CellText(row[idx[1]]), CellText(row[idx[2]])
		if panels[op] == nil {
			panels[op] = &Panel{Title: op}
			order = append(order, op)
		}
		color := ProtocolColor(proto)
		panels[op].Bars = append(panels[op].Bars, Bar{Label: proto + " · " + mode, Color: color,
			Segments: []Segment{{Name: "ms per 1000 messages", Value: cellF(row, idx[3]), Color: color}}})
	}
	var list []Panel
	for _, op := range order {
		list = append(list, *panels[op])
	}
	return Chart{Title: "Streaming efficiency", SVG: BarPanels("Work per 1000 messages: streaming versus unary", nil, list, "ms", "ms per 1000 messages"),
		Caption: "Milliseconds of work per 1000 messages (lower is better), per protocol and call shape. Each operation has its own scale."}, nil
}
