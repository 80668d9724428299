package report

import (
	"context"
	"fmt"
	"strconv"
)

// Drops are the calls the pipeline dropped in the window: access-log records
// logship dropped unshipped past its disk cap (the Collector or ClickHouse was
// down longer than the caps hold). Those calls are missing from every table.
type Drops struct {
	Records int64 // dropped in the window
	Total   int64 // dropped up to the window's end, since each logship checkpoint began
}

// Line says it in one line for the report's header; "" when nothing was dropped in the window.
func (d *Drops) Line() string {
	if d == nil || d.Records == 0 {
		return ""
	}
	return fmt.Sprintf("%s calls dropped past logship's disk cap while the Collector or ClickHouse was down "+
		"(%s in all): they are missing from every table below; `make status` shows the Collector's own drops",
		groupThousands(strconv.FormatInt(d.Records, 10)), groupThousands(strconv.FormatInt(d.Total, 10)))
}

// dropsSummary runs the built-in dropped query for the window.
func dropsSummary(ctx context.Context, ch *ClickHouse, params map[string]string) (*Drops, error) {
	q := mustBuiltin("dropped")
	res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		return nil, fmt.Errorf("built-in query dropped: %w", err)
	}
	idx, missing := indexes(res, "dropped_records", "dropped_total")
	if len(missing) > 0 {
		return nil, fmt.Errorf("built-in query dropped: the answer lacks the columns %v", missing)
	}
	d := &Drops{}
	if len(res.Rows) > 0 {
		d.Records, _ = cellInt(res.Rows[0][idx[0]])
		d.Total, _ = cellInt(res.Rows[0][idx[1]])
	}
	return d, nil
}
