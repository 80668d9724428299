package report

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Drift the report cannot correct when it answers from the rollups
// (issue 30): the rollups are exact only when refreshable views recompute
// them from wirelens.requests FINAL (queries/schema/004_rollups.sql). The
// report warns when
//   - a rollup is the old insert-fed form (a view fills it at insert, or its
//     table is an AggregatingMergeTree): it counts every re-sent record again;
//   - nothing refreshes a rollup, or its refresh fails, is stopped, or last
//     succeeded long ago;
//   - rows of the window reached wirelens.requests more than 30 s before
//     the report and after the rollups' watermark (overdue): the rollups do
//     not count them, and should have. Rows of the last seconds only
//     (pending, not overdue) are a note, not a warning: a window ending now
//     always has some (queries/rollup.py TRUST_SQL, the same rule).
// Three cheap queries: system tables (rollup_objects.sql,
// rollup_refreshes.sql) and one count over the window by inserted_at
// (rollup_late.sql); no raw FINAL scan.

// rollupDatabase holds the rollups, rollupTables are the tables the rollup
// variants read (queries/rollup/*.sql).
const rollupDatabase = "wirelens"

var rollupTables = []string{"requests_by_minute", "requests_by_second"}

// staleAfter is how many refresh periods may pass without a successful
// refresh before the rollups count as lagging; minStale is its floor.
const (
	staleAfter = 3
	minStale   = time.Minute
)

// rollupObject is one row of rollup_objects.sql: a rollup table or a view.
type rollupObject struct {
	Name          string
	Engine        string
	CreateQuery   string
	RefreshStatus string     // system.view_refreshes.status; "" when not refreshable
	LastSuccess   *time.Time // start of the latest successful refresh; nil: none since the server started
	Exception     string     // the last failed refresh's error
	Retry         int64
}

// rollupHealth is what the report learned about the rollups before reading them.
type rollupHealth struct {
	Objects   []rollupObject
	Now       time.Time // the server's clock
	Late      int64     // rows of the window inserted after Watermark (pending); -1: unknown
	Overdue   int64     // of those, inserted more than 30 s before the report
	Watermark time.Time // the lower of the rollups' newest as_of
	LateErr   string    // why Late is unknown
	// RefreshErr: why system.view_refreshes could not be read (e.g. no grant); the
	// refreshes' state is then unknown, and only overdue rows show that they fail.
	RefreshErr string
}

var (
	toTableRE = regexp.MustCompile("(?i)\\bTO\\s+`?(\\w+)`?\\.`?(\\w+)`?")
	refreshRE = regexp.MustCompile(`(?i)\bREFRESH\s+(EVERY|AFTER)\s+(\d+)\s+(SECOND|MINUTE|HOUR|DAY)S?\b`)
)

// target is the table of the rollups' database a materialized view writes
// to ("" when none or another database's).
func (o rollupObject) target() string {
	m := toTableRE.FindStringSubmatch(o.CreateQuery)
	if m == nil || m[1] != rollupDatabase {
		return ""
	}
	return m[2]
}

// layout: the rollups' tables by name, and for each rollup the table that
// holds its rows: itself, or on a ClickHouse cluster (a Distributed table
// over <name>_local, queries/schema/cluster) its _local table on this node,
// which the views write to.
func (h rollupHealth) layout() (tables map[string]rollupObject, physical map[string]string) {
	tables, physical = map[string]rollupObject{}, map[string]string{}
	for _, o := range h.Objects {
		if o.Engine != "MaterializedView" {
			tables[o.Name] = o
		}
	}
	for _, t := range rollupTables {
		physical[t] = t
		if o, ok := tables[t]; ok && o.Engine == "Distributed" {
			if _, ok := tables[t+"_local"]; ok {
				physical[t] = t + "_local"
			}
		}
	}
	return tables, physical
}

// oldTables names the rollups in the insert-fed form and how: the engine of
// the table holding their rows, the views filling it at insert.
func (h rollupHealth) oldTables() []string {
	tables, physical := h.layout()
	var old []string
	for _, t := range rollupTables {
		o, ok := tables[physical[t]]
		if !ok {
			continue
		}
		var how []string
		if o.Engine != "ReplacingMergeTree" {
			how = append(how, o.Engine)
		}
		for _, v := range h.Objects {
			if v.Engine == "MaterializedView" && v.target() == physical[t] {
				if ok, _ := v.refreshable(); !ok {
					how = append(how, "fed at insert by "+rollupDatabase+"."+v.Name)
				}
			}
		}
		if len(how) > 0 {
			old = append(old, fmt.Sprintf("%s.%s (%s)", rollupDatabase, physical[t], strings.Join(how, ", ")))
		}
	}
	return old
}

// refreshable reports whether a view is refreshable (REFRESH EVERY/AFTER)
// and its period (0 when it could not be read).
func (o rollupObject) refreshable() (bool, time.Duration) {
	m := refreshRE.FindStringSubmatch(o.CreateQuery)
	if m == nil {
		return o.RefreshStatus != "", 0
	}
	n, _ := strconv.Atoi(m[2])
	unit := map[string]time.Duration{"SECOND": time.Second, "MINUTE": time.Minute, "HOUR": time.Hour,
		"DAY": 24 * time.Hour}[strings.ToUpper(m[3])]
	return true, time.Duration(n) * unit
}

// oldForm reports whether the rollups are (partly) the insert-fed form.
func (h rollupHealth) oldForm() bool { return len(h.oldTables()) > 0 }

// warnings says what of the rollups' answers for the window cannot be
// trusted, most serious first; none when they are exact. notes says what
// they do not hold yet but will by the next refresh. source is the --source
// the report ran with (auto or rollup).
func (h rollupHealth) warnings(source string) (out, notes []string) {
	tables, physical := h.layout()
	var missing []string
	for _, t := range rollupTables {
		if _, ok := tables[t]; !ok {
			missing = append(missing, rollupDatabase+"."+t)
		}
	}
	if len(missing) > 0 {
		out = append(out, fmt.Sprintf("%s missing: the rollup variants cannot answer; apply the schema "+
			"(make up, or python -m deploy.local.stack apply-schema), or read with --source raw.",
			strings.Join(missing, " and ")+map[bool]string{true: " is", false: " are"}[len(missing) == 1]))
	}

	// The old form: fed at insert, or merged by summing.
	old := h.oldTables()
	if len(old) > 0 {
		out = append(out, fmt.Sprintf("The rollups are the old insert-fed form: %s. They count every record "+
			"the pipeline re-sent after a fault (logship or Collector restarts, retried inserts) again, so this "+
			"report's counts and sums may be too high, by an amount it cannot tell. Apply the schema, which "+
			"migrates them to the refreshed form (make up, or python -m deploy.local.stack apply-schema; elsewhere "+
			"python -m queries.migrate --clickhouse-url URL); until then --source raw is exact and "+
			"python -m queries.rollup check shows the drift per day.", strings.Join(old, "; ")))
	}

	// The refreshes: one per rollup table, working and recent.
	for _, t := range rollupTables {
		o, ok := tables[physical[t]]
		if !ok || o.Engine != "ReplacingMergeTree" {
			continue
		}
		var views []rollupObject
		for _, v := range h.Objects {
			if v.Engine == "MaterializedView" && v.target() == physical[t] {
				if ok, _ := v.refreshable(); ok {
					views = append(views, v)
				}
			}
		}
		if len(views) == 0 {
			out = append(out, fmt.Sprintf("Nothing refreshes %s.%s (no refreshable view writes to it): it "+
				"holds only what was computed before, newer calls are missing. Apply the schema "+
				"(make up, or python -m deploy.local.stack apply-schema), or read with --source raw.",
				rollupDatabase, physical[t]))
			continue
		}
		// A rollup's slower refreshable view beside a faster one is its settle pass (004: hourly, the
		// minutes of the hour that closed two hours ago); the fastest is its refresh.
		fastest := time.Duration(0)
		for _, v := range views {
			if _, p := v.refreshable(); p > 0 && (fastest == 0 || p < fastest) {
				fastest = p
			}
		}
		for _, v := range views {
			_, p := v.refreshable()
			out = append(out, v.refreshWarnings(physical[t], h.Now, len(views) > 1 && p > fastest)...)
		}
	}

	// Rows the rollups do not count yet: overdue ones are drift, the last seconds' a note.
	wm := "none yet"
	if h.Watermark.Unix() > 0 {
		wm = fmt.Sprintf("%s, %s before the report", FormatTime(h.Watermark), ago(h.Now.Sub(h.Watermark)))
	}
	stayed := ""
	if source == SourceAuto {
		stayed = " (--source auto still read the rollups, for the window's size.)"
	}
	rowsText := func(n int64) string { return groupThousands(strconv.FormatInt(n, 10)) }
	why := ""
	if h.RefreshErr != "" {
		why = " Why the refreshes do not run could not be read: " + h.RefreshErr + "."
	}
	switch {
	case h.Overdue > 0:
		out = append(out, fmt.Sprintf("%s rows of this window reached wirelens.requests after the rollups' last "+
			"refresh (watermark: %s), %s of them more than 30 s ago: no refresh has counted them, so the rollups "+
			"under-count this window by up to %s rows; --source raw includes them.%s%s",
			rowsText(h.Late), wm, rowsText(h.Overdue), rowsText(h.Late), stayed, why))
	case h.Late > 0:
		notes = append(notes, fmt.Sprintf("%s rows of this window arrived in the last seconds, after the rollups' "+
			"last refresh (watermark: %s): the next refresh (every 10 s) counts them; --source raw includes them.%s",
			rowsText(h.Late), wm, stayed))
	case h.Late < 0 && h.LateErr != "" && len(old) == 0 && len(missing) == 0:
		out = append(out, "Could not tell whether calls of this window arrived after the rollups' last refresh: "+
			h.LateErr)
	}
	return out, notes
}

// refreshWarnings: a refresh that fails, is stopped, or last succeeded more
// than a few periods ago. settle: the view is the rollup's settle pass, which
// recomputes older minutes (what the refresh missed) rather than new ones. One
// that has not run since the server started is no warning (it runs hourly).
func (v rollupObject) refreshWarnings(table string, now time.Time, settle bool) []string {
	name := rollupDatabase + "." + v.Name
	_, period := v.refreshable()
	what, misses := "refresh", "The rollup misses what arrived since"
	if settle {
		what, misses = "settle pass", "Calls committed too late for the refresh (more than 60 s after their stamp) "+
			"stay uncounted until it runs again"
	}
	var out []string
	if strings.EqualFold(v.RefreshStatus, "Disabled") {
		// Stopping cancels a refresh under way: its "cancelled" error is not the story.
		return []string{fmt.Sprintf("The %s of %s.%s is stopped (%s is Disabled: SYSTEM STOP VIEW); "+
			"SYSTEM START VIEW %s resumes it. %s.", what, rollupDatabase, table, name, name, misses)}
	}
	if v.Exception != "" {
		since := " its last successful refresh"
		if settle {
			since = ""
		}
		out = append(out, fmt.Sprintf("The %s of %s.%s fails (%s, %d %s in a row): %s. %s%s; --source raw is exact.",
			what, rollupDatabase, table, name, v.Retry, plural(int(v.Retry), "failure", "failures"),
			firstLine(v.Exception, 300), misses, since))
	}
	if v.LastSuccess != nil && v.Exception == "" {
		limit := staleAfter * period
		if limit < minStale {
			limit = minStale
		}
		if late := now.Sub(*v.LastSuccess); late > limit {
			every := ""
			if period > 0 {
				every = fmt.Sprintf("; it runs every %s", FormatDuration(period))
			}
			out = append(out, fmt.Sprintf("The last successful %s of %s.%s (%s) started %s ago, at %s%s: "+
				"the rollup lags.", what, rollupDatabase, table, name, ago(late), FormatTime(*v.LastSuccess), every))
		}
	}
	return out
}

func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return FormatDuration(d.Round(time.Second))
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// rollupDrift asks ClickHouse about the rollups (rollup_objects.sql) and,
// unless they are the old form or missing, how many rows of the window they
// lack (rollup_late.sql). An unreachable server is an error; a failing
// query becomes part of the health (what could not be told).
func rollupDrift(ctx context.Context, ch *ClickHouse, params map[string]string) (rollupHealth, error) {
	h := rollupHealth{Late: -1}
	q := mustBuiltin("rollup_objects")
	res, err := ch.Query(ctx, q.SQL, map[string]string{"database": rollupDatabase})
	if err != nil {
		return h, fmt.Errorf("reading the rollups' tables and refreshes: %w", err)
	}
	if h.Objects, h.Now, err = decodeRollupObjects(res); err != nil {
		return h, fmt.Errorf("reading the rollups' tables and refreshes: %w", err)
	}
	q = mustBuiltin("rollup_refreshes")
	if res, err = ch.Query(ctx, q.SQL, map[string]string{"database": rollupDatabase}); err == nil {
		err = addRefreshes(h.Objects, res)
	}
	if err != nil {
		var unreachable *UnreachableError
		if errors.As(err, &unreachable) {
			return h, fmt.Errorf("reading the rollups' refreshes: %w", err)
		}
		h.RefreshErr = err.Error()
		var qe *QueryError
		if errors.As(err, &qe) {
			h.RefreshErr = firstLine(qe.Message, 300)
		}
	}
	if h.oldForm() || len(h.Objects) == 0 {
		return h, nil
	}
	q = mustBuiltin("rollup_late")
	res, err = ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		var unreachable *UnreachableError
		if errors.As(err, &unreachable) {
			return h, fmt.Errorf("counting the window's rows the rollups lack: %w", err)
		}
		var qe *QueryError
		if errors.As(err, &qe) {
			h.LateErr = firstLine(qe.Message, 300)
			if strings.Contains(qe.Message, "as_of") && strings.Contains(qe.Message, "UNKNOWN_IDENTIFIER") {
				h.LateErr += " (rollups without as_of: the form before issue 30; apply the schema to migrate)"
			}
		} else {
			h.LateErr = err.Error()
		}
		return h, nil
	}
	iw, ip, io := res.Index("watermark_ms"), res.Index("pending_rows"), res.Index("overdue_rows")
	if len(res.Rows) != 1 || iw < 0 || ip < 0 || io < 0 {
		h.LateErr = fmt.Sprintf("rollup_late answered %d rows of columns %v", len(res.Rows), res.Columns)
		return h, nil
	}
	ms, ok1 := cellInt(res.Rows[0][iw])
	late, ok2 := cellInt(res.Rows[0][ip])
	overdue, ok3 := cellInt(res.Rows[0][io])
	if !ok1 || !ok2 || !ok3 {
		h.LateErr = fmt.Sprintf("rollup_late answered %v", res.Rows[0])
		return h, nil
	}
	h.Watermark, h.Late, h.Overdue = time.UnixMilli(ms).UTC(), late, overdue
	return h, nil
}

func decodeRollupObjects(res *Result) ([]rollupObject, time.Time, error) {
	cols := map[string]int{}
	for _, name := range []string{"name", "engine", "create_query", "server_now"} {
		i := res.Index(name)
		if i < 0 {
			return nil, time.Time{}, fmt.Errorf("rollup_objects: no column %s", name)
		}
		cols[name] = i
	}
	var objs []rollupObject
	now := time.Now().UTC()
	for _, row := range res.Rows {
		o := rollupObject{Name: CellText(row[cols["name"]]), Engine: CellText(row[cols["engine"]]),
			CreateQuery: CellText(row[cols["create_query"]])}
		if s, ok := cellInt(row[cols["server_now"]]); ok && s > 0 {
			now = time.Unix(s, 0).UTC()
		}
		objs = append(objs, o)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	return objs, now, nil
}

// addRefreshes puts rollup_refreshes.sql's answer on the views it names.
func addRefreshes(objs []rollupObject, res *Result) error {
	cols := map[string]int{}
	for _, name := range []string{"view", "status", "last_success", "exception", "retry"} {
		i := res.Index(name)
		if i < 0 {
			return fmt.Errorf("rollup_refreshes: no column %s", name)
		}
		cols[name] = i
	}
	for _, row := range res.Rows {
		for i := range objs {
			if objs[i].Name != CellText(row[cols["view"]]) {
				continue
			}
			o := &objs[i]
			o.RefreshStatus, o.Exception = CellText(row[cols["status"]]), CellText(row[cols["exception"]])
			o.Retry, _ = cellInt(row[cols["retry"]])
			if s, ok := cellInt(row[cols["last_success"]]); ok && row[cols["last_success"]] != nil && s > 0 {
				t := time.Unix(s, 0).UTC()
				o.LastSuccess = &t
			}
		}
	}
	return nil
}
