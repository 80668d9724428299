// The built-in section of the slowest calls, each with its trace link.

package report

import (
	"context"
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
	var calls []SlowCall
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
		if id != "" {
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
	return sec, calls
}
