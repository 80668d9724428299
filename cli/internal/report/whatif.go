// The what-if section: what_if_protocol.sql's answer (the body bytes the
// same messages would take in each encoding, from the filter's
// counterfactual sizes) as a table of the encodings side by side and a chart.

package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// queryWhatIf is the saved query the what-if section reads.
const queryWhatIf = "what_if_protocol"

// WhatIfCaveat is said wherever the counterfactual numbers appear.
const WhatIfCaveat = "Body bytes only: headers, trailers, URLs and time are not estimated."

// whatIfEncodings are the encodings the query estimates, in its column
// order: the name shown (a protocol's name) and the prefix of its columns
// (<col>_b, <col>_ratio, <col>_ratio_low, <col>_ratio_high).
var whatIfEncodings = []struct{ name, col string }{
	{"rest", "rest"},
	{"rest-proto", "rest_proto"},
	{"grpc", "grpc"},
	{"grpc-web", "grpc_web"},
	{"grpc-web-text", "grpc_web_text"},
}

// OwnEncoding is the encoding of the bodies a protocol carries: REST
// transcoded to gRPC by Envoy is REST with JSON at the client.
func OwnEncoding(protocol string) string {
	if protocol == "rest-transcoded" {
		return "rest"
	}
	return protocol
}

// whatIfRow is one operation and measured protocol of the answer.
type whatIfRow struct {
	operation, protocol string
	calls, estimated    int64
	measured            float64 // NaN when there is no estimate
	cfRate              float64 // NaN when no call was sampled for the counterfactual
	noEstimate          string
	encodings           []whatIfEncoding
}

// whatIfEncoding is one encoding's estimate for a row.
type whatIfEncoding struct {
	name                    string
	bytes, ratio, low, high float64 // NaN when NULL
}

// hasBytes reports whether the row has an estimate for this encoding.
func (e whatIfEncoding) hasBytes() bool { return !math.IsNaN(e.bytes) }

// cellOrNaN reads a numeric cell; NULL (or anything not a number) is NaN.
func cellOrNaN(row []any, i int) float64 {
	if f, ok := CellFloat(row[i]); ok {
		return f
	}
	return math.NaN()
}

// readWhatIf reads the query's answer; it names the columns it lacks.
func readWhatIf(res *Result) ([]whatIfRow, error) {
	names := []string{"operation", "protocol", "calls", "estimated_calls", "measured_b", "counterfactual_rate", "no_estimate"}
	for _, e := range whatIfEncodings {
		names = append(names, e.col+"_b", e.col+"_ratio", e.col+"_ratio_low", e.col+"_ratio_high")
	}
	idx, missing := indexes(res, names...)
	if len(missing) > 0 {
		return nil, fmt.Errorf("the answer of %s lacks the columns %s", queryWhatIf, strings.Join(missing, ", "))
	}
	rows := make([]whatIfRow, 0, len(res.Rows))
	for _, row := range res.Rows {
		r := whatIfRow{operation: CellText(row[idx[0]]), protocol: CellText(row[idx[1]]),
			measured: cellOrNaN(row, idx[4]), cfRate: cellOrNaN(row, idx[5]), noEstimate: CellText(row[idx[6]])}
		r.calls, _ = cellInt(row[idx[2]])
		r.estimated, _ = cellInt(row[idx[3]])
		if row[idx[6]] == nil {
			r.noEstimate = ""
		}
		for k, e := range whatIfEncodings {
			base := 7 + 4*k
			r.encodings = append(r.encodings, whatIfEncoding{name: e.name, bytes: cellOrNaN(row, idx[base]),
				ratio: cellOrNaN(row, idx[base+1]), low: cellOrNaN(row, idx[base+2]), high: cellOrNaN(row, idx[base+3])})
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// formatRatio writes a ratio to the measured protocol's own encoding with
// two decimals, and its interval when it is not one value at that precision.
func formatRatio(e whatIfEncoding) string {
	if math.IsNaN(e.ratio) {
		return ""
	}
	two := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	s := "×" + two(e.ratio)
	if !math.IsNaN(e.low) && !math.IsNaN(e.high) && (two(e.low) != two(e.ratio) || two(e.high) != two(e.ratio)) {
		s += " (" + two(e.low) + "–" + two(e.high) + ")"
	}
	return s
}

// whatIfCell is one encoding's cell of the table: bytes per call, the ratio
// and its interval; "own" marks the measured protocol's own encoding.
func whatIfCell(e whatIfEncoding, own bool) any {
	if !e.hasBytes() {
		return nil
	}
	s := FormatNumber(e.bytes, false) + " B"
	if own {
		return s + " (own)"
	}
	if r := formatRatio(e); r != "" {
		s += " " + r
	}
	return s
}

// addWhatIf gives the what-if section its caveat, its table (the encodings
// side by side), its notes and its chart. The query's own answer stays the
// section's Result: TSV prints every column of it.
func addWhatIf(sec *Section) {
	sec.Caveat = WhatIfCaveat
	if len(sec.Errors) > 0 || sec.Result == nil {
		return
	}
	rows, err := readWhatIf(sec.Result)
	if err != nil {
		sec.Notes = append(sec.Notes, err.Error()+": table and chart skipped.")
		return
	}
	table := &Result{Columns: []Column{{"operation", "String"}, {"protocol", "String"}, {"calls", "UInt64"},
		{"estimated_calls", "UInt64"}, {"measured_b", "Nullable(Float64)"}}, Timezone: sec.Result.Timezone}
	for _, e := range whatIfEncodings {
		table.Columns = append(table.Columns, Column{e.name, "Nullable(String)"})
	}
	table.Columns = append(table.Columns, Column{"no_estimate", "String"})
	estimated, lowestRate := int64(0), 1.0
	for _, r := range rows {
		var measured any
		if !math.IsNaN(r.measured) {
			measured = r.measured
		}
		trow := []any{r.operation, r.protocol, r.calls, r.estimated, measured}
		for _, e := range r.encodings {
			trow = append(trow, whatIfCell(e, e.name == OwnEncoding(r.protocol)))
		}
		table.Rows = append(table.Rows, append(trow, r.noEstimate))
		estimated += r.estimated
		if !math.IsNaN(r.cfRate) && r.cfRate > 0 {
			lowestRate = math.Min(lowestRate, r.cfRate)
		}
	}
	sec.Table = table
	sec.TextTable = true
	if len(rows) == 0 {
		return
	}
	if estimated == 0 {
		sec.Notes = append(sec.Notes, "No call in the window has an estimate: the filter sampled none for it "+
			"(counterfactual_rate 0, or no descriptors in its configuration), or every sampled call was left out "+
			"(no_estimate says why). docs/what-if.md says how to turn it on.")
		return
	}
	sec.Notes = append(sec.Notes, "Per encoding: body bytes per call of the same messages, × the ratio to the "+
		"measured protocol's own (messages and framing only; measured_b is what the bodies carried, grpc-web's "+
		"trailer frame included) with its 95 % bootstrap interval. estimated_calls: the calls with an estimate, "+
		"the sample of every mean and interval; no_estimate: the others sampled for it, by reason.")
	if lowestRate < 1 {
		sec.Notes = append(sec.Notes, fmt.Sprintf("Estimated from a share of the calls (counterfactual_rate down to "+
			"%s): each estimate stands for 1/(sample_rate × counterfactual_rate) calls and the means are weighted by it.",
			formatRate(lowestRate)))
	}
	sec.Charts = append(sec.Charts, whatIfChart(rows))
}

// whatIfChart draws one panel per operation and measured protocol with an
// estimate: a bar per encoding (body bytes per call, its ratio to the own
// encoding beside it) under the bodies as measured.
func whatIfChart(rows []whatIfRow) Chart {
	var panels []Panel
	for _, r := range rows {
		if r.estimated == 0 {
			continue
		}
		p := Panel{Title: fmt.Sprintf("%s · measured over %s (%d estimated call%s)", r.operation, r.protocol,
			r.estimated, plural(int(r.estimated), "", "s"))}
		if !math.IsNaN(r.measured) {
			p.Bars = append(p.Bars, Bar{Label: "measured body", Color: ProtocolColor(r.protocol),
				Segments: []Segment{{Name: "measured body bytes", Value: r.measured, Color: whatIfMeasuredColor}}})
		}
		for _, e := range r.encodings {
			if !e.hasBytes() {
				continue
			}
			note := formatRatio(e)
			if e.name == OwnEncoding(r.protocol) {
				note = "own"
			}
			color := ProtocolColor(e.name)
			p.Bars = append(p.Bars, Bar{Label: e.name, Color: color, Note: note,
				Segments: []Segment{{Name: "body bytes per call", Value: e.bytes, Color: color}}})
		}
		panels = append(panels, p)
	}
	legend := []legendItem{{label: "measured body (as it crossed)", color: whatIfMeasuredColor}}
	for _, e := range whatIfEncodings {
		legend = append(legend, legendItem{label: e.name, color: ProtocolColor(e.name)})
	}
	return Chart{Title: "What if", SVG: BarPanels("What if: body bytes per call of the same messages in each encoding",
		legend, panels, "B", "body bytes per call"),
		Caption: "Per operation and the protocol its calls used: the bodies as measured, and the body bytes per call " +
			"the same messages take in each encoding (own: the measured protocol's, messages and framing only), " +
			"× the ratio to own with its 95 % bootstrap interval. Each panel has its own scale. " + WhatIfCaveat}
}

// whatIfMeasuredColor is the measured bodies' bar: grey, not an encoding's color.
const whatIfMeasuredColor = "#bab0ac"
