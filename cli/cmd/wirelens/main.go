// Command wirelens reports what the wirelens filter measured: the saved
// queries' tables and charts from ClickHouse (report), and one call's trace
// from Jaeger (trace).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	_ "time/tzdata" // ClickHouse names its time zone; read it even without system zoneinfo

	"github.com/wirelens/wirelens/cli/internal/report"
	"github.com/wirelens/wirelens/cli/internal/trace"
	"github.com/wirelens/wirelens/internal/chclient"
	"github.com/wirelens/wirelens/internal/cli"
)

const (
	defaultClickHouse = "http://127.0.0.1:8123"
	defaultJaeger     = "http://127.0.0.1:16686"
)

const mainUsage = `Usage: wirelens <command> [flags]

wirelens compares REST, gRPC and gRPC-Web on live traffic. This command reads
what the wirelens filter measured: the calls in ClickHouse (wirelens.requests)
and their spans in Jaeger.

Commands:
  report   run every saved query (queries/*.sql) for a time window or a load
           run and print one table per query; --html also writes one
           self-contained HTML page with charts and links to the traces
  query    run one saved query (queries/NAME.sql) with its parameters and
           print ClickHouse's answer in any of its output formats
  trace    print one trace from Jaeger as a tree of spans with their
           wirelens.*, rpc.* and http.* tags
  inject   add wirelens to an Envoy config you already run (or --remove it,
           --diff, --update-ecds for live changes); envoy/INJECT.md
  help     this text; "wirelens help <command>" for a command's flags

Examples:
  wirelens report --since 15m
  wirelens report --run demo-1 --html report.html
  wirelens query compare_protocols --param operation=hello.SayHello --param protocol_a=rest --param protocol_b=grpc
  wirelens trace 4bf92f3577b34da6a3ce929d0e0e4736
  wirelens inject --descriptor-set services.pb envoy.yaml > envoy-wirelens.yaml

Environment:
  WIRELENS_CLICKHOUSE_URL  ClickHouse's HTTP interface (default ` + defaultClickHouse + `)
  CLICKHOUSE_USER          ClickHouse user the report reads as (the local stack's
  CLICKHOUSE_PASSWORD      reporter and its password: .run/local/credentials.env)
  WIRELENS_JAEGER_URL      Jaeger's query API (default ` + defaultJaeger + `)
  WIRELENS_QUERIES_DIR     the saved queries (default: ../queries next to the binary)

Exit status: 0 success; 1 an error (ClickHouse or Jaeger unreachable, a query
failed, no such run or trace); 2 bad usage.
`

const reportUsage = `Usage: wirelens report [--run ID | --since DURATION] [--until TIME] [--html FILE]
                       [--format table|tsv] [--source auto|raw|rollup]
                       [--clickhouse-url URL] [--user USER] [--jaeger-url URL] [--queries DIR]

Runs every saved query in the queries directory (*.sql, each opening with a
"-- Question:" comment) against ClickHouse with the parameters since, until
and run_id, and prints one section per query, titled by its question, with
the result's own columns. The report adds its own queries: the latency
distribution of each operation per protocol, and the 20 slowest calls with
their trace ids (show one with "wirelens trace <id>").

The window is the last --since (default 1h) up to --until (default now), or
with --run the run's window: started and ended from wirelens.runs if the run
is there, widened to its first and last calls in wirelens.requests (several
clients may share a run id); the queries still select the run's calls only.

compare_protocols.sql (or any query taking an operation and two protocols) is
run once per operation for each pair (the protocol with the fastest median,
each other protocol), with 200 bootstrap resamples. A query whose only other
parameter is a number of resamples (what_if_protocol.sql) runs once over the
window with --resamples.

what_if_protocol.sql: per operation and measured protocol, the body bytes the
same messages would take as REST (JSON), REST with protobuf, gRPC, gRPC-Web
and gRPC-Web-text, from the filter's counterfactual sizes, and each one's
ratio to the measured protocol's own with a 95 % bootstrap interval
(docs/what-if.md). Body bytes only: headers, trailers, URLs and time are not
estimated. The TSV output has every column of the query.

Long windows: queries/rollup/ holds variants of six saved queries (same
names and columns) that read per-minute and per-second rollups instead of
every call. --source auto (the default) uses them when the window holds more
than 5,000,000 recorded calls, and the report names them; their percentiles
are within 1 % and their window is whole minutes. --source raw always reads
every call (exact); --source rollup always uses the variants. The rollups
are recomputed from the deduplicated calls every 10 s, so re-sent records
never count twice; when it reads them the report warns of drift it cannot
correct (rollups from before that design, a refresh stopped or failing,
calls the rollups have not counted 30 s after they arrived).

A query that fails is shown as ERROR in its section; the rest of the report
still runs, and the exit status is then 1. A missing or empty query only skips
its table or chart, with a note.

--html FILE writes one HTML page (inline CSS and SVG, no scripts, no network):
the window and run, every table, and the charts: latency CDF per protocol
(log-scale latency), mean bytes per call stacked by headers, body and framing
(bytes_by_operation), throughput over time (throughput_per_second), work per
1000 messages streaming versus unary (streaming_efficiency), body bytes per
call in each encoding (what_if_protocol), and the slowest calls with links to
Jaeger.

Flags:
`

const queryUsage = `Usage: wirelens query NAME [--since DURATION | --run ID] [--until TIME]
                      [--param NAME=VALUE ...] [--format FORMAT]
                      [--clickhouse-url URL] [--user USER] [--queries DIR]

Runs one saved query, NAME.sql in the queries directory, and prints
ClickHouse's answer as it writes it in FORMAT (PrettyCompactMonoBlock by
default; TabSeparatedWithNames, JSONEachRow, ... for other programs).
Parameters travel as ClickHouse query parameters ({name:Type} in the SQL),
never spliced into the text. since, until and run_id come from the window
(as in "wirelens report"); every other one from --param (resamples defaults
to 200); --param also overrides the window's, e.g. --param run_id=ID keeps
the --since window.

Flags:
`

const traceUsage = `Usage: wirelens trace ID [--jaeger-url URL] [--all-tags] [--clickhouse-url URL] [--user USER]

Fetches one trace from Jaeger's API (<jaeger-url>/api/traces/ID) and prints it
as an indented tree of spans: service, operation name, duration, start offset
from the trace's first span, span id; under each span its wirelens.*, rpc.*
and http.* tags, sorted by key (numbers shown as integers when whole); then
the link that opens the trace in Jaeger's UI (<jaeger-url>/trace/ID).

ID is the trace id (up to 32 hex digits), as in "wirelens report"'s slowest
calls, the trace_id column of wirelens.requests, or loadgen -trace-ids.

A trace Jaeger does not have is looked up in wirelens.requests: when its
calls are there with span_sampled = false, Envoy never sent their span (the
client's traceparent said not sampled, flags 00, or Envoy's random_sampling
left the call out) and the command says so instead of "not found yet".

Flags:
`

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage)
		return 0
	case "report":
		return runReport(ctx, args[1:], stdout, stderr)
	case "query":
		return runQuery(ctx, args[1:], stdout, stderr)
	case "trace":
		return runTrace(ctx, args[1:], stdout, stderr)
	case "inject":
		return runInject(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "wirelens: unknown command %q\n\n%s", args[0], mainUsage)
		return 2
	}
}

// runInject hands over to the Python module envoy.inject in the checkout, with
// the checkout's Python (.venv): the injector shares the operation-map code of
// proto/opmap.py and the Envoy fragments of envoy/render.py, so it is not
// written twice. The checkout root goes first on PYTHONPATH (its packages
// before site-packages); the working directory stays the user's, so relative
// paths in args mean what they say.
func runInject(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := checkoutDir()
	python := filepath.Join(root, ".venv", "bin", "python")
	for _, need := range []string{filepath.Join(root, "envoy", "__init__.py"), python} {
		if _, err := os.Stat(need); err != nil {
			fmt.Fprintf(stderr, "wirelens inject: %s is missing: run `make venv` in the wirelens checkout "+
				"(found by WIRELENS_HOME, else the directory above this binary)\n", need)
			return 1
		}
	}
	cmd := exec.CommandContext(ctx, python, append([]string{"-m", "envoy.inject"}, args...)...)
	pythonPath := root
	if extra := os.Getenv("PYTHONPATH"); extra != "" {
		pythonPath += string(os.PathListSeparator) + extra
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "wirelens inject: %v\n", err)
		return 1
	}
	return 0
}

// checkoutDir is WIRELENS_HOME, else the checkout this binary was built into.
func checkoutDir() string {
	if dir := os.Getenv("WIRELENS_HOME"); dir != "" {
		return dir
	}
	if dir := binaryCheckout(); dir != "" {
		return dir
	}
	return "."
}

// binaryCheckout is the directory above the binary (bin/wirelens in a
// checkout), or "" when the binary's path is unknown.
func binaryCheckout() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return filepath.Clean(filepath.Join(filepath.Dir(exe), ".."))
}

// usageError is bad usage: exit status 2, with the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parse parses flags anywhere among the arguments (flag stops at the first
// positional one) and returns the positional arguments. Help goes to stdout.
func parse(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) ([]string, int, bool) {
	var errBuf bytes.Buffer
	fs.SetOutput(&errBuf)
	fs.Usage = func() {}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, fs, usage)
				return nil, 0, false
			}
			fmt.Fprintf(stderr, "wirelens %s: %v\n\n", fs.Name(), err)
			printUsage(stderr, fs, usage)
			return nil, 2, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, 0, true
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), 0, true
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// printUsage writes the usage text and the flags, GNU style (--name).
func printUsage(w io.Writer, fs *flag.FlagSet, usage string) {
	var b strings.Builder
	b.WriteString(usage)
	fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(&b, "%s\n      %s", line, strings.ReplaceAll(text, "\n", "\n      "))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	fmt.Fprint(w, b.String())
}

func badUsage(stderr io.Writer, fs *flag.FlagSet, usage, format string, args ...any) int {
	fmt.Fprintf(stderr, "wirelens %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	printUsage(stderr, fs, usage)
	return 2
}

// defaultQueriesDir is WIRELENS_QUERIES_DIR, else ../queries next to the
// binary (bin/wirelens in a checkout), else ./queries.
func defaultQueriesDir() string {
	if dir := os.Getenv("WIRELENS_QUERIES_DIR"); dir != "" {
		return dir
	}
	if root := binaryCheckout(); root != "" {
		dir := filepath.Join(root, "queries")
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			return dir
		}
	}
	return "queries"
}

// readFlags are the flags of the commands that read the saved queries from
// ClickHouse (report, query): the window, the server and the login, the
// queries directory, the time allowed to each query.
type readFlags struct {
	runID, since, until, chURL, user, password, queriesDir *string
	timeout                                                *time.Duration
}

func addReadFlags(fs *flag.FlagSet, runHelp string) *readFlags {
	return &readFlags{
		runID: fs.String("run", "", runHelp),
		since: fs.String("since", "1h", "window length ending at --until: `DURATION` like 30s, 15m, 2h, 1d"),
		until: fs.String("until", "", "window end: `TIME` as RFC 3339, \"2006-01-02 15:04:05\" (UTC) or Unix seconds (default now)"),
		chURL: fs.String("clickhouse-url", cli.EnvOr("WIRELENS_CLICKHOUSE_URL", defaultClickHouse),
			"ClickHouse's HTTP interface, as a `URL` (env WIRELENS_CLICKHOUSE_URL)"),
		user: fs.String("user", cli.EnvOr("CLICKHOUSE_USER", ""),
			"ClickHouse `USER` to read as (env CLICKHOUSE_USER; the local stack's read-only reporter is in "+
				".run/local/credentials.env); default: the URL's user info, else ClickHouse's default user"),
		password: fs.String("password", os.Getenv("CLICKHOUSE_PASSWORD"),
			"the user's `PASSWORD` (env CLICKHOUSE_PASSWORD, better than the flag, which other users see in ps)"),
		queriesDir: fs.String("queries", defaultQueriesDir(),
			"the `DIR` of the saved queries, *.sql (env WIRELENS_QUERIES_DIR; else ../queries next to the binary)"),
		timeout: fs.Duration("timeout", 60*time.Second, "time allowed to each query, a `DURATION`"),
	}
}

// options checks the flags (after fs parsed them) and connects: the options'
// window, ClickHouse and queries directory; the error is a usage error.
func (f *readFlags) options(fs *flag.FlagSet) (report.Options, error) {
	var opt report.Options
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["run"] && set["since"] {
		return opt, errors.New("--run and --since exclude each other: a run has its own window")
	}
	if set["run"] && *f.runID == "" {
		return opt, errors.New("--run needs a run id")
	}
	if *f.timeout <= 0 {
		return opt, errors.New("--timeout must be positive")
	}
	endpoint, err := chclient.WithLogin(*f.chURL, *f.user, *f.password)
	if err != nil {
		return opt, fmt.Errorf("--clickhouse-url: %v", err)
	}
	if opt.ClickHouse, err = report.NewClickHouse(endpoint, *f.timeout); err != nil {
		return opt, fmt.Errorf("--clickhouse-url: %v", err)
	}
	opt.RunID, opt.QueriesDir = *f.runID, *f.queriesDir
	if opt.Since, err = report.ParseSince(*f.since); err != nil {
		return opt, fmt.Errorf("--since %v", err)
	}
	if *f.until != "" {
		if opt.Until, err = report.ParseTime(*f.until); err != nil {
			return opt, fmt.Errorf("--until %v", err)
		}
	}
	return opt, nil
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	rf := addReadFlags(fs, "report on one load run (its `ID`, as loadgen -run-id); the window is the run's")
	htmlFile := fs.String("html", "", "also write the report as one self-contained HTML `FILE` with charts")
	format := fs.String("format", "table", "terminal output, `table|tsv`: aligned columns, or tab-separated values for scripts")
	jaegerURL := fs.String("jaeger-url", cli.EnvOr("WIRELENS_JAEGER_URL", defaultJaeger),
		"Jaeger's `URL`, for the links to the traces (env WIRELENS_JAEGER_URL)")
	resamples := fs.Int("resamples", 200, "`N` bootstrap resamples for compare_protocols.sql and what_if_protocol.sql")
	source := fs.String("source", report.SourceAuto, "what the saved queries read, `auto|raw|rollup`: every call "+
		"(raw, exact), the per-minute rollups (queries/rollup/, for long windows), or auto: the rollups above "+
		"5,000,000 recorded calls in the window")
	positional, code, ok := parse(fs, reportUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(positional) > 0 {
		return badUsage(stderr, fs, reportUsage, "unexpected arguments: %s", strings.Join(positional, " "))
	}
	if *format != "table" && *format != "tsv" {
		return badUsage(stderr, fs, reportUsage, "--format %q: expected table or tsv", *format)
	}
	if *source != report.SourceAuto && *source != report.SourceRaw && *source != report.SourceRollup {
		return badUsage(stderr, fs, reportUsage, "--source %q: expected auto, raw or rollup", *source)
	}
	opt, err := rf.options(fs)
	if err != nil {
		return badUsage(stderr, fs, reportUsage, "%v", err)
	}
	opt.JaegerURL, opt.Resamples, opt.Source = *jaegerURL, *resamples, *source

	rep, err := report.Build(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	status := 0
	if err := report.WriteText(stdout, rep, *format); err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		status = 1
	}
	if *htmlFile != "" {
		if err := writeHTML(*htmlFile, rep); err != nil {
			fmt.Fprintf(stderr, "wirelens: %v\n", err)
			status = 1
		} else {
			fmt.Fprintf(stderr, "wirelens: wrote %s\n", *htmlFile)
		}
	}
	if n := rep.ErrorCount(); n > 0 {
		fmt.Fprintf(stderr, "wirelens: %d quer%s failed (shown as ERROR in the report)\n", n, map[bool]string{true: "y", false: "ies"}[n == 1])
		status = 1
	}
	return status
}

// params is a repeatable NAME=VALUE flag.
type params map[string]string

func (p params) String() string { return "" }

func (p params) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q: expected NAME=VALUE", v)
	}
	p[name] = value
	return nil
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	rf := addReadFlags(fs, "only the calls of one load run (its `ID`); the window is the run's")
	extra := params{}
	fs.Var(extra, "param", "another query parameter, `NAME=VALUE` (repeatable), e.g. operation=catalog.GetProduct")
	format := fs.String("format", "PrettyCompactMonoBlock", "ClickHouse output `FORMAT` of the answer")
	positional, code, ok := parse(fs, queryUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(positional) != 1 {
		return badUsage(stderr, fs, queryUsage, "expected one saved query NAME, got %d arguments", len(positional))
	}
	opt, err := rf.options(fs)
	if err != nil {
		return badUsage(stderr, fs, queryUsage, "%v", err)
	}
	q, err := report.FindSavedQuery(opt.QueriesDir, positional[0])
	if err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	window, err := report.ChooseWindow(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	bound, err := q.Bind(window.Params(), extra)
	if err != nil {
		return badUsage(stderr, fs, queryUsage, "%v", err)
	}
	answer, err := opt.ClickHouse.QueryAs(ctx, q.SQL, *format, bound)
	if err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(answer); err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	return 0
}

// writeHTML renders the page and replaces FILE with it in one rename.
func writeHTML(path string, rep *report.Report) error {
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, rep); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".wirelens-report-*.html")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	jaegerURL := fs.String("jaeger-url", cli.EnvOr("WIRELENS_JAEGER_URL", defaultJaeger),
		"Jaeger's query API, as a `URL` (env WIRELENS_JAEGER_URL)")
	allTags := fs.Bool("all-tags", false, "print every tag of each span, not only wirelens.*, rpc.* and http.*")
	timeout := fs.Duration("timeout", 30*time.Second, "time allowed to the request to Jaeger, a `DURATION`")
	chURL := fs.String("clickhouse-url", cli.EnvOr("WIRELENS_CLICKHOUSE_URL", defaultClickHouse),
		"ClickHouse's HTTP interface, as a `URL` (env WIRELENS_CLICKHOUSE_URL): why a trace Jaeger lacks has no span")
	user := fs.String("user", cli.EnvOr("CLICKHOUSE_USER", ""), "ClickHouse `USER` to read as (env CLICKHOUSE_USER)")
	password := fs.String("password", os.Getenv("CLICKHOUSE_PASSWORD"), "the user's `PASSWORD` (env CLICKHOUSE_PASSWORD)")
	positional, code, ok := parse(fs, traceUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(positional) != 1 {
		return badUsage(stderr, fs, traceUsage, "expected one trace id, got %d arguments", len(positional))
	}
	id := strings.ToLower(strings.TrimSpace(positional[0]))
	if err := trace.ValidID(id); err != nil {
		return badUsage(stderr, fs, traceUsage, "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := &trace.Client{URL: *jaegerURL}
	t, err := client.Fetch(ctx, id)
	var notFound *trace.NotFoundError
	if errors.As(err, &notFound) {
		if why := noSpanReason(ctx, *chURL, *user, *password, id); why != "" {
			fmt.Fprintf(stderr, "wirelens: trace %s has no span in Jaeger: %s\n", id, why)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	if err := trace.Print(stdout, t, trace.PrintOptions{AllTags: *allTags}); err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	if _, err := fmt.Fprintf(stdout, "\nIn Jaeger's UI: %s\n", trace.UIURL(*jaegerURL, id)); err != nil {
		fmt.Fprintf(stderr, "wirelens: %v\n", err)
		return 1
	}
	return 0
}

// noSpanReason says why a trace Jaeger lacks has no span, when wirelens.requests knows: its calls are
// recorded with span_sampled = false. "" when it cannot tell (no such rows, a sampled one, ClickHouse
// unreachable): then "not found" stands.
func noSpanReason(ctx context.Context, chURL, user, password, id string) string {
	endpoint, err := chclient.WithLogin(chURL, user, password)
	if err != nil {
		return ""
	}
	ch, err := report.NewClickHouse(endpoint, 10*time.Second)
	if err != nil {
		return ""
	}
	res, err := ch.Query(ctx, `SELECT count() AS calls, countIf(span_sampled) AS sampled FROM wirelens.requests FINAL
PREWHERE trace_id = leftPad({id:String}, 32, '0')`, map[string]string{"id": id})
	if err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return ""
	}
	calls, sampled := report.CellText(res.Rows[0][0]), report.CellText(res.Rows[0][1])
	if calls == "0" || sampled != "0" {
		return ""
	}
	return fmt.Sprintf("Envoy's tracer did not sample its %s call(s) in wirelens.requests (span_sampled = false): the "+
		"client's traceparent said not sampled (flags 00), or Envoy's tracing random_sampling left them out, so no span "+
		"was sent. The rows are complete; only the trace does not exist.", calls)
}
