// The built-in latency section: the CDF per operation and protocol, and the
// medians the pairwise comparisons choose their baseline by.

package report

import (
	"context"
	"math"
	"strings"
)

// latencySection runs the built-in CDF query; it returns, per operation, the
// median of each protocol (µs).
func latencySection(ctx context.Context, ch *ClickHouse, params map[string]string) (*Section, map[string]map[string]float64) {
	sec, res := builtinSection(ctx, ch, "latency_cdf", "Latency distribution per operation and protocol", params)
	if res == nil {
		return sec, nil
	}
	medians := map[string]map[string]float64{}
	if len(res.Rows) == 0 {
		sec.Notes = append(sec.Notes, "No calls in the window: no latency chart.")
		return sec, medians
	}
	idx, missing := indexes(res, "operation", "protocol", "calls", "sampled_calls", "sample_rate", "median_us", "quantiles_us")
	if len(missing) > 0 {
		sec.Errors = append(sec.Errors, "the answer lacks the columns "+strings.Join(missing, ", "))
		return sec, nil
	}
	iOp, iProto, iCalls, iSampled, iRate, iMed, iQ := idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6]
	levels := cdfLevels()
	series := map[string][]CDFSeries{}
	table := &Result{Columns: []Column{{"operation", "String"}, {"protocol", "String"}, {"calls", "UInt64"},
		{"sampled_calls", "UInt64"}, {"sample_rate", "Float64"},
		{"p50_ms", "Float64"}, {"p90_ms", "Float64"}, {"p99_ms", "Float64"}, {"p99.9_ms", "Float64"}}}
	for _, row := range res.Rows {
		op, proto := CellText(row[iOp]), CellText(row[iProto])
		calls, _ := cellInt(row[iCalls])
		sampled, _ := cellInt(row[iSampled])
		rate, _ := CellFloat(row[iRate])
		if med, ok := CellFloat(row[iMed]); ok {
			if medians[op] == nil {
				medians[op] = map[string]float64{}
			}
			medians[op][proto] = med
		}
		qs, _ := row[iQ].([]any)
		sr := CDFSeries{Name: proto, Calls: calls, SampledCalls: sampled, Levels: levels, Median: math.NaN()}
		if m, ok := medians[op][proto]; ok {
			sr.Median = m / 1000
		}
		for _, v := range qs {
			f, _ := CellFloat(v)
			sr.Values = append(sr.Values, f/1000)
		}
		series[op] = append(series[op], sr)
		med := math.NaN()
		if m, ok := medians[op][proto]; ok {
			med = m / 1000
		}
		trow := []any{op, proto, calls, sampled, rate, roundMS(med)}
		for _, l := range []float64{0.9, 0.99, 0.999} {
			trow = append(trow, roundMS(quantileAt(sr, l)))
		}
		table.Rows = append(table.Rows, trow)
	}
	sec.Table = table
	caption := "Share of calls (y) completed within a latency (x, log scale), per protocol."
	if note := sampledNote(table); note != "" {
		sec.Notes = append(sec.Notes, note)
		caption += " Sampled: the curves are over the calls recorded."
	}
	for _, op := range sortedKeys(series) {
		sec.Charts = append(sec.Charts, Chart{Title: op, SVG: CDFChart(op, series[op]), Caption: caption})
	}
	return sec, medians
}

func roundMS(ms float64) any {
	if math.IsNaN(ms) {
		return nil
	}
	return math.Round(ms*1000) / 1000
}

func cdfLevels() []float64 {
	levels := make([]float64, 0, 100)
	for i := 1; i <= 99; i++ {
		levels = append(levels, float64(i)/100)
	}
	return append(levels, 0.999)
}
