// Which window a report covers: the last --since, or a run's window.

package report

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ChooseWindow is the window Build reports on for opt: the last opt.Since
// (default 1h) up to opt.Until (default now), or opt.RunID's window.
func ChooseWindow(ctx context.Context, opt Options) (Window, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	return chooseWindow(ctx, opt.ClickHouse, opt, now)
}

// chooseWindow picks the report's window: the last --since (ending --until or
// now), or a run's window from wirelens.runs and its calls.
func chooseWindow(ctx context.Context, ch *ClickHouse, opt Options, now func() time.Time) (Window, error) {
	until := opt.Until
	if opt.RunID == "" {
		if until.IsZero() {
			until = now().Add(time.Second).UTC()
		}
		since := opt.Since
		if since <= 0 {
			since = time.Hour
		}
		return Window{Since: until.Add(-since), Until: until,
			Source: "the last " + FormatDuration(since)}, nil
	}
	// A run's window: its row in wirelens.runs (started, ended), widened to
	// its first and last calls (several clients may share one run id, and
	// the row keeps only the last one's times); either alone if the other is
	// missing.
	w := Window{RunID: opt.RunID}
	runParams := map[string]string{"run_id": opt.RunID}
	var haveRun, openRun bool
	res, err := ch.Query(ctx, mustBuiltin("run_window").SQL, runParams)
	var unreachable *UnreachableError
	switch {
	case errors.As(err, &unreachable):
		return w, err
	case err == nil && len(res.Rows) > 0 && len(res.Rows[0]) >= 2:
		if started, ok := cellInt(res.Rows[0][0]); ok {
			haveRun = true
			w.Since = time.UnixMilli(started).UTC()
			if ended, ok := cellInt(res.Rows[0][1]); ok {
				w.Until = time.UnixMilli(ended + 1).UTC()
			} else {
				openRun = true
				w.Until = now().Add(time.Second).UTC()
			}
		}
	}
	res, err = ch.Query(ctx, mustBuiltin("run_calls_window").SQL, runParams)
	if err != nil {
		return w, fmt.Errorf("finding the window of run %q: %w", opt.RunID, err)
	}
	var calls int64
	if len(res.Rows) > 0 && len(res.Rows[0]) >= 3 {
		calls, _ = cellInt(res.Rows[0][0])
	}
	switch {
	case calls == 0 && !haveRun:
		return w, fmt.Errorf("%w: run %q has no row in wirelens.runs and no calls in wirelens.requests", ErrNoRun, opt.RunID)
	case calls == 0:
		w.Source = "wirelens.runs (started, ended); the run has no calls"
	default:
		firstNS, _ := cellInt(res.Rows[0][1])
		lastNS, _ := cellInt(res.Rows[0][2])
		first := time.UnixMilli(firstNS / 1e6).UTC()
		last := time.UnixMilli(lastNS/1e6 + 1).UTC()
		switch {
		case !haveRun:
			w.Since, w.Until = first, last
			w.Source = "the run's first and last calls (no row in wirelens.runs)"
		default:
			w.Source = "wirelens.runs (started, ended)"
			if openRun {
				w.Source = "wirelens.runs (started; not ended: until now)"
			}
			if first.Before(w.Since) || last.After(w.Until) {
				w.Source += ", widened to the run's first and last calls"
				if first.Before(w.Since) {
					w.Since = first
				}
				if last.After(w.Until) {
					w.Until = last
				}
			}
		}
	}
	if !opt.Until.IsZero() {
		w.Until = opt.Until
		w.Source += ", ended by --until"
	}
	return w, nil
}

// cellInt reads a whole-number cell exactly (int64 nanoseconds do not fit a float64).
func cellInt(v any) (int64, bool) {
	if n, err := strconv.ParseInt(CellText(v), 10, 64); err == nil {
		return n, true
	}
	if f, ok := CellFloat(v); ok {
		return int64(f), true
	}
	return 0, false
}
