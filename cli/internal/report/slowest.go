// The built-in section of the slowest calls, each with its trace link.

package report

import (
	"context"
	"fmt"
	"strings"

	"github.com/wirelens/wirelens/cli/internal/trace"
)

func slowestSection(ctx context.Context, ch *ClickHouse, params map[string]string, jaeger string) (*Section, []SlowCall) {
	sec, res := builtinSection(ctx, ch, "slowest_calls", "The slowest calls, with their traces", params)
	if res == nil {
		return sec, nil
	}
	if len(res.Rows) == 0 {
		sec.Notes = append(sec.Notes, "No calls in the window.")
		return sec, nil
	}
	idx, missing := indexes(res, "timestamp", "operation", "protocol", "duration_us", "trace_id")
	if len(missing) > 0 {
		sec.Errors = append(sec.Errors, "the built-in query lacks columns "+strings.Join(missing, ", "))
		return sec, nil
	}
	// span_sampled: whether Envoy sent the call's span. A query without it (an older copy) links every trace id.
	sampledIdx := res.Index("span_sampled")
	var calls []SlowCall
	noSpan := 0
	// Times as "YYYY-MM-DD hh:mm:ss[.fraction]": drop the date when every call shares it.
	sameDate := true
	firstTS := CellText(res.Rows[0][idx[0]])
	for _, row := range res.Rows {
		ts := CellText(row[idx[0]])
		sameDate = sameDate && len(ts) >= 19 && len(firstTS) >= 19 && ts[:10] == firstTS[:10]
	}
	for _, row := range res.Rows {
		id := CellText(row[idx[4]])
		c := SlowCall{Timestamp: CellText(row[idx[0]]), Operation: CellText(row[idx[1]]), Protocol: CellText(row[idx[2]]),
			DurationUS: cellF(row, idx[3]), TraceID: id}
		if id != "" && sampledIdx >= 0 && !cellTrue(row[sampledIdx]) {
			c.NoSpan = NoSpanReason
			noSpan++
		} else if id != "" {
			c.TraceURL = trace.UIURL(jaeger, id)
			c.APIURL = jaeger + "/api/traces/" + id
			c.Command = "wirelens trace " + id
		}
		c.Time = c.Timestamp
		if len(c.Time) > 23 && c.Time[19] == '.' {
			c.Time = c.Time[:23] // milliseconds
		}
		if sameDate && len(c.Time) > 11 {
			c.Time = c.Time[11:]
		}
		calls = append(calls, c)
	}
	if sameDate {
		sec.SlowDate = firstTS[:10]
	}
	if noSpan > 0 {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%d of these %d calls have no span (span_sampled = false): Envoy's tracer "+
			"did not sample them, because the client's traceparent said not sampled (flags 00) or Envoy's "+
			"tracing random_sampling left them out, so no trace exists for their trace_id; only calls with a span are linked. "+
			"Their rows are complete: the filter records every call whatever the trace's sampling.", noSpan, len(calls)))
	}
	return sec, calls
}

// cellTrue reads a Bool cell as ClickHouse's JSON writes it (true/false; 1/0 from older servers or as text).
func cellTrue(v any) bool {
	switch CellText(v) {
	case "true", "1":
		return true
	}
	return false
}
