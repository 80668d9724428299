package report

import (
	"context"
	"fmt"
	"strconv"
)

// Sampling says whether the window's calls were sampled (the filter's
// sample_rate: each call is recorded with that probability) and how the
// report's numbers relate to every call. A call recorded at rate r stands for
// 1/r calls: the saved queries weight counts, throughput and byte totals by
// 1/sample_rate and compute percentiles over the recorded calls.
type Sampling struct {
	SampledCalls int64   // calls recorded in the window
	Calls        int64   // the calls they stand for (estimated when sampled)
	MinRate      float64 // lowest sample rate among the recorded calls
	MaxRate      float64 // highest
}

// Sampled reports whether some recorded call stands for more than itself.
func (s *Sampling) Sampled() bool {
	return s != nil && s.SampledCalls > 0 && s.MinRate < 1
}

// Line says it in one line for the report's header; "" when there were no calls.
func (s *Sampling) Line() string {
	switch {
	case s == nil || s.SampledCalls == 0:
		return ""
	case !s.Sampled():
		return fmt.Sprintf("none: every call was recorded (sample_rate 1), counts are exact (%s calls)",
			groupThousands(strconv.FormatInt(s.Calls, 10)))
	}
	rates, weights := formatRate(s.MinRate), "×"+FormatNumber(1/s.MinRate, false)
	if s.MaxRate != s.MinRate {
		rates += " to " + formatRate(s.MaxRate)
		weights = "each call ×" + FormatNumber(1/s.MaxRate, false) + " to ×" + FormatNumber(1/s.MinRate, false) + " by its rate"
	}
	return fmt.Sprintf("sampled at %s: counts, throughput and byte totals are estimates (%s); "+
		"percentiles over %s sampled calls (of ~%s)", rates, weights,
		groupThousands(strconv.FormatInt(s.SampledCalls, 10)), groupThousands(strconv.FormatInt(s.Calls, 10)))
}

func formatRate(r float64) string {
	return strconv.FormatFloat(r, 'g', 6, 64)
}

// samplingSummary runs the built-in sampling query for the window.
func samplingSummary(ctx context.Context, ch *ClickHouse, params map[string]string) (*Sampling, error) {
	q := mustBuiltin("sampling")
	res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		return nil, fmt.Errorf("built-in query sampling: %w", err)
	}
	idx, missing := indexes(res, "sampled_calls", "calls", "min_sample_rate", "max_sample_rate")
	if len(missing) > 0 {
		return nil, fmt.Errorf("built-in query sampling: the answer lacks the columns %v", missing)
	}
	s := &Sampling{MinRate: 1, MaxRate: 1}
	if len(res.Rows) == 0 {
		return s, nil
	}
	row := res.Rows[0]
	s.SampledCalls, _ = cellInt(row[idx[0]])
	s.Calls, _ = cellInt(row[idx[1]])
	if f, ok := CellFloat(row[idx[2]]); ok {
		s.MinRate = f
	}
	if f, ok := CellFloat(row[idx[3]]); ok {
		s.MaxRate = f
	}
	return s, nil
}

// sampledNote explains a table some of whose rows come from sampled calls
// (a sample_rate column with a value below 1); "" otherwise.
func sampledNote(res *Result) string {
	if res == nil {
		return ""
	}
	i := res.Index("sample_rate")
	if i < 0 {
		return ""
	}
	lowest := 1.0
	for _, row := range res.Rows {
		if f, ok := CellFloat(row[i]); ok && f > 0 && f < lowest {
			lowest = f
		}
	}
	if lowest >= 1 {
		return ""
	}
	if res.Index("sampled_calls") >= 0 {
		return fmt.Sprintf("Sampled (sample_rate down to %s): calls, errors and byte totals are estimates, each recorded "+
			"call weighted by 1/sample_rate, and means are weighted; percentiles, minima and maxima are over the "+
			"sampled_calls.", formatRate(lowest))
	}
	return fmt.Sprintf("Sampled (sample_rate down to %s): the counts here are of the calls recorded, and every "+
		"quantile and interval is computed over them.", formatRate(lowest))
}
