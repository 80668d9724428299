// Package report runs the saved queries (queries/*.sql) over ClickHouse's
// HTTP interface for a time window or a load run and renders the answers:
// aligned tables or TSV for the terminal, and one self-contained HTML file
// with inline SVG charts.
package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wirelens/wirelens/services/internal/trace"
)

// Options say what to report on and where to find it.
type Options struct {
	ClickHouse *ClickHouse
	JaegerURL  string
	QueriesDir string
	RunID      string        // if set, the window is the run's
	Since      time.Duration // window length (when RunID is empty)
	Until      time.Time     // window end; zero: now (plus a second, for calls still being written)
	Resamples  int           // compare_protocols' bootstrap resamples (0: 200)
	Source     string        // SourceAuto (""), SourceRaw or SourceRollup: what the saved queries read
	Now        func() time.Time
}

// Section is one query's part of the report.
type Section struct {
	Name     string // file name without .sql
	Title    string // its question
	Path     string
	Result   *Result // nil when skipped or failed
	Table    *Result // what the tables show, when not Result itself (e.g. percentiles instead of 100 quantiles)
	Errors   []string
	Notes    []string
	Charts   []Chart
	Skipped  bool
	Params   []string // the parameters it was run with, for the reader
	Builtin  bool
	Combined string // how several runs were combined (compare_protocols)
	SlowDate string // slowest calls: the date they all share, if they do
}

// Chart is one SVG drawing with a caption.
type Chart struct {
	Title   string
	Caption string
	SVG     string
}

// SlowCall is one row of the slowest calls, with its links.
type SlowCall struct {
	Timestamp  string // as ClickHouse wrote it, in the server's time zone
	Time       string // shortened for display: milliseconds, no date when all share one
	Operation  string
	Protocol   string
	DurationUS float64
	TraceID    string
	TraceURL   string // Jaeger UI
	APIURL     string // Jaeger API (JSON)
	Command    string // wirelens trace <id>
}

// Report is everything the renderers show.
type Report struct {
	Generated     time.Time
	Window        Window
	ClickHouseURL string
	JaegerURL     string
	QueriesDir    string
	Notes         []string  // about the report as a whole (missing queries, charts skipped)
	Sampling      *Sampling // nil when the sampling query failed (a note says why)
	Drops         *Drops    // calls the pipeline dropped in the window; nil when unknown (a note says why)
	Latency       *Section
	Sections      []*Section
	Slowest       *Section
	SlowCalls     []SlowCall
}

// Shown is the table to print: Table if set, else Result.
func (s *Section) Shown() *Result {
	if s.Table != nil {
		return s.Table
	}
	return s.Result
}

// FormatDuration writes a window length briefly: 1h, 90m → 1h30m, 2d.
func FormatDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ErrorCount is the number of queries that failed.
func (r *Report) ErrorCount() int {
	n := 0
	for _, s := range r.AllSections() {
		n += len(s.Errors)
	}
	return n
}

// AllSections lists every section in reading order.
func (r *Report) AllSections() []*Section {
	var all []*Section
	if r.Latency != nil {
		all = append(all, r.Latency)
	}
	all = append(all, r.Sections...)
	if r.Slowest != nil {
		all = append(all, r.Slowest)
	}
	return all
}

// ErrNoRun means the run id matches no run and no call.
var ErrNoRun = errors.New("no such run")

// Chart names: the saved queries the report knows how to draw.
const (
	queryBytes      = "bytes_by_operation"
	queryThroughput = "throughput_per_second"
	queryStreaming  = "streaming_efficiency"
)

// Build runs every query and prepares the charts. It fails only when the
// report cannot start (ClickHouse unreachable, no queries directory, no such
// run); a failing query becomes an error in its section.
func Build(ctx context.Context, opt Options) (*Report, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	ch := opt.ClickHouse
	rep := &Report{Generated: now().UTC(), ClickHouseURL: ch.String(),
		JaegerURL: strings.TrimRight(opt.JaegerURL, "/"), QueriesDir: opt.QueriesDir}

	saved, err := LoadSavedQueries(opt.QueriesDir)
	if err != nil {
		return nil, err
	}
	if len(saved) == 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("No saved queries (*.sql) in %s.", opt.QueriesDir))
	}
	// One cheap query first: an unreachable server fails the report at once.
	if _, err := ch.Query(ctx, "SELECT 1", nil); err != nil {
		return nil, err
	}
	rep.Window, err = chooseWindow(ctx, ch, opt, now)
	if err != nil {
		return nil, err
	}
	params := rep.Window.Params()
	if rep.Sampling, err = samplingSummary(ctx, ch, params); err != nil {
		var unreachable *UnreachableError
		if errors.As(err, &unreachable) {
			return nil, err
		}
		rep.Notes = append(rep.Notes, "Could not tell whether the calls were sampled: "+err.Error())
	}
	if rep.Drops, err = dropsSummary(ctx, ch, params); err != nil {
		rep.Notes = append(rep.Notes, "Could not tell whether calls were dropped: "+err.Error())
	}

	if opt.Source == "" {
		opt.Source = SourceAuto
	}
	saved, note, err := chooseSource(ctx, ch, opt, saved, params)
	if err != nil {
		return nil, err
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}

	// Latency distribution (built in).
	lat, medians := latencySection(ctx, ch, params)
	rep.Latency = lat

	byName := map[string]bool{}
	for _, q := range saved {
		byName[q.Name] = true
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("report interrupted: %w", err)
		}
		sec := runSaved(ctx, ch, q, params, medians, lat, opt.Resamples)
		addCharts(sec)
		rep.Sections = append(rep.Sections, sec)
	}
	for _, c := range []struct{ name, what string }{
		{queryBytes, "bytes per call (stacked bars)"},
		{queryThroughput, "throughput over time"},
		{queryStreaming, "the streaming comparison"},
	} {
		if !byName[c.name] {
			rep.Notes = append(rep.Notes, fmt.Sprintf("No chart of %s: %s not found.", c.what,
				filepath.Join(opt.QueriesDir, c.name+".sql")))
		}
	}

	rep.Slowest, rep.SlowCalls = slowestSection(ctx, ch, params, rep.JaegerURL)
	if rep.Sampling.Sampled() && len(rep.SlowCalls) > 0 {
		rep.Slowest.Notes = append(rep.Slowest.Notes, "Only sampled calls are listed (sample_rate below 1): "+
			"the slowest calls of all may be among those not recorded.")
	}
	return rep, nil
}

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

func describeParams(params map[string]string, names []string) []string {
	var out []string
	for _, n := range names {
		v := params[n]
		if n == "since" || n == "until" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				v = FormatTime(time.UnixMilli(int64(math.Round(f * 1000))))
			}
		}
		out = append(out, fmt.Sprintf("%s=%s", n, strconv.Quote(v)))
	}
	return out
}

func pick(params map[string]string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = params[n]
	}
	return out
}

func queryFailed(sec *Section, err error) {
	var qe *QueryError
	if errors.As(err, &qe) {
		sec.Errors = append(sec.Errors, qe.Message)
		return
	}
	sec.Errors = append(sec.Errors, err.Error())
}

// ---------------------------------------------------------------- latency

// latencySection runs the built-in CDF query; it returns, per operation, the
// median of each protocol (µs).
func latencySection(ctx context.Context, ch *ClickHouse, params map[string]string) (*Section, map[string]map[string]float64) {
	q := mustBuiltin("latency_cdf")
	sec := &Section{Name: q.Name, Title: "Latency distribution per operation and protocol", Path: q.Path, Builtin: true}
	medians := map[string]map[string]float64{}
	res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		queryFailed(sec, err)
		return sec, nil
	}
	sec.Result = res
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

// ---------------------------------------------------------------- saved queries

var commonParams = map[string]bool{"since": true, "until": true, "run_id": true}

func runSaved(ctx context.Context, ch *ClickHouse, q SavedQuery, params map[string]string,
	medians map[string]map[string]float64, lat *Section, resamples int) *Section {
	sec := &Section{Name: q.Name, Title: q.Title(), Path: q.Path}
	var extra []string
	for _, p := range q.Params {
		if !commonParams[p] {
			extra = append(extra, p)
		}
	}
	if len(extra) == 0 {
		sec.Params = describeParams(params, q.Params)
		res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
		if err != nil {
			queryFailed(sec, err)
			return sec
		}
		sec.Result = res
		if len(res.Rows) == 0 {
			sec.Notes = append(sec.Notes, "No rows in the window.")
		}
		if note := sampledNote(res); note != "" {
			sec.Notes = append(sec.Notes, note)
		}
		return sec
	}
	pair, ok := pairParams(extra)
	if !ok {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, fmt.Sprintf("Skipped: it takes parameters the report cannot fill (%s).", strings.Join(extra, ", ")))
		return sec
	}
	runPairwise(ctx, ch, q, sec, params, pair, medians, lat, resamples)
	return sec
}

// pairing says which parameters of a pairwise query get what.
type pairing struct {
	operation, resamples string
	protocols            [2]string // the baseline (fastest median), the other
}

// pairParams recognizes a pairwise comparison: an operation, two protocols
// (the first named like a baseline: *_a, a, baseline, base*, reference,
// fastest, *1, left; else the first used in the text) and optionally a
// number of resamples.
func pairParams(extra []string) (pairing, bool) {
	var p pairing
	var protos []string
	for _, name := range extra {
		l := strings.ToLower(name)
		switch {
		case l == "operation" || l == "op":
			p.operation = name
		case strings.Contains(l, "resample") || strings.Contains(l, "bootstrap") || l == "iterations":
			p.resamples = name
		case strings.Contains(l, "protocol") || strings.Contains(l, "proto") || l == "a" || l == "b" ||
			strings.Contains(l, "baseline") || strings.Contains(l, "candidate") || strings.Contains(l, "base") || strings.Contains(l, "other"):
			protos = append(protos, name)
		default:
			return p, false
		}
	}
	if p.operation == "" || len(protos) != 2 {
		return p, false
	}
	rank := func(name string) int {
		l := strings.ToLower(name)
		for _, s := range []string{"baseline", "base", "reference", "fastest", "left", "first"} {
			if strings.Contains(l, s) {
				return 0
			}
		}
		if l == "a" || strings.HasSuffix(l, "_a") || strings.HasSuffix(l, "1") {
			return 0
		}
		return 1
	}
	sort.SliceStable(protos, func(i, j int) bool { return rank(protos[i]) < rank(protos[j]) })
	p.protocols = [2]string{protos[0], protos[1]}
	return p, true
}

// UnknownOperation is the operation of every call the filter's operation map
// does not know (filters/README.md, "Bounded dimensions"): one row or chart
// like any operation, but its calls went to unrelated paths.
const UnknownOperation = "unknown"

func runPairwise(ctx context.Context, ch *ClickHouse, q SavedQuery, sec *Section, params map[string]string,
	pair pairing, medians map[string]map[string]float64, lat *Section, resamples int) {
	if resamples <= 0 {
		resamples = 200
	}
	if lat == nil || len(lat.Errors) > 0 || medians == nil {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, "Skipped: the pairs come from the latency medians, and that query failed.")
		return
	}
	sec.Combined = fmt.Sprintf("Run once per operation and pair: %s = the protocol with the fastest median, %s = each other protocol",
		pair.protocols[0], pair.protocols[1])
	if pair.resamples != "" {
		sec.Combined += fmt.Sprintf(", %s = %d", pair.resamples, resamples)
	}
	sec.Combined += "."
	runs := 0
	for _, op := range sortedKeys(medians) {
		meds := medians[op]
		if op == UnknownOperation {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%s: calls to paths the operation map does not know, "+
				"not one operation: not compared.", op))
			continue
		}
		if len(meds) < 2 {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%s: only %s in the window, nothing to compare.", op, strings.Join(sortedKeys(meds), ", ")))
			continue
		}
		protos := sortedKeys(meds)
		fastest := protos[0]
		for _, p := range protos[1:] {
			if meds[p] < meds[fastest] {
				fastest = p
			}
		}
		for _, other := range protos {
			if other == fastest {
				continue
			}
			p := pick(params, q.Params)
			p[pair.operation] = op
			p[pair.protocols[0]] = fastest
			p[pair.protocols[1]] = other
			if pair.resamples != "" {
				p[pair.resamples] = strconv.Itoa(resamples)
			}
			runs++
			res, err := ch.Query(ctx, q.SQL, p)
			if err != nil {
				var qe *QueryError
				msg := err.Error()
				if errors.As(err, &qe) {
					msg = qe.Message
				}
				sec.Errors = append(sec.Errors, fmt.Sprintf("%s, %s vs %s: %s", op, fastest, other, msg))
				continue
			}
			if sec.Result == nil {
				sec.Result = &Result{Columns: res.Columns, Timezone: res.Timezone}
			}
			if sameColumns(sec.Result.Columns, res.Columns) {
				sec.Result.Rows = append(sec.Result.Rows, res.Rows...)
			} else {
				sec.Errors = append(sec.Errors, fmt.Sprintf("%s, %s vs %s: answered other columns than the first run", op, fastest, other))
			}
		}
	}
	if runs == 0 {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, "Skipped: no operation has two protocols in the window.")
	} else if sec.Result != nil && len(sec.Result.Rows) == 0 {
		sec.Notes = append(sec.Notes, "No rows.")
	}
	if note := sampledNote(sec.Result); note != "" {
		sec.Notes = append(sec.Notes, note)
	}
}

func sameColumns(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------- charts of known queries

func addCharts(sec *Section) {
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

// ---------------------------------------------------------------- slowest calls

func slowestSection(ctx context.Context, ch *ClickHouse, params map[string]string, jaeger string) (*Section, []SlowCall) {
	q := mustBuiltin("slowest_calls")
	sec := &Section{Name: q.Name, Title: "The slowest calls, with their traces", Path: q.Path, Builtin: true}
	res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
	if err != nil {
		queryFailed(sec, err)
		return sec, nil
	}
	sec.Result = res
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
