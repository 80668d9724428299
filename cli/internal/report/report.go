// Package report runs the saved queries (queries/*.sql) over ClickHouse's
// HTTP interface for a time window or a load run and renders the answers:
// aligned tables or TSV for the terminal, and one self-contained HTML file
// with inline SVG charts.
//
// Build (this file) puts a report together; choosewindow.go picks its window,
// sections.go runs each saved query into its section, latency.go and
// slowest.go are the built-in sections, querycharts.go draws the charts of
// known queries; chart.go, html.go, text.go and table.go render.
package report

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Options say what to report on and where to find it.
type Options struct {
	ClickHouse *ClickHouse
	JaegerURL  string
	QueriesDir string
	RunID      string        // if set, the window is the run's
	Since      time.Duration // window length (when RunID is empty)
	Until      time.Time     // window end; zero: now (plus a second, for calls still being written)
	Resamples  int           // bootstrap resamples of compare_protocols and what_if_protocol (0: 200)
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
	Caveat   string // said before the table: what its numbers do not cover
	// TextTable: Table's cells are text for reading (what_if_protocol's
	// "48 B ×1.30"); TSV, for programs, prints Result instead.
	TextTable bool
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
	// NoSpan says why a call with a trace id has no trace in Jaeger (span_sampled false); then the
	// links and the command are empty.
	NoSpan string
}

// NoSpanReason is what the report says of a call whose span Envoy did not send.
const NoSpanReason = "no span: not sampled (client traceparent flags 00, or Envoy's random_sampling)"

// Report is everything the renderers show.
type Report struct {
	Generated     time.Time
	Window        Window
	ClickHouseURL string
	JaegerURL     string
	QueriesDir    string
	Notes         []string  // about the report as a whole (missing queries, charts skipped)
	Warnings      []string  // numbers the report cannot vouch for (rollup drift), said before everything else
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

// ShownTSV is the table TSV prints: Result when Table is text for reading, else Shown.
func (s *Section) ShownTSV() *Result {
	if s.TextTable && s.Result != nil {
		return s.Result
	}
	return s.Shown()
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
	saved, note, warnings, err := chooseSource(ctx, ch, opt, saved, params)
	if err != nil {
		return nil, err
	}
	if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	rep.Warnings = append(rep.Warnings, warnings...)

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
		{queryWhatIf, "what the other encodings would take (what if)"},
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
