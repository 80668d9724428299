// Command loadgen sends calls of one wirelens operation over one protocol
// through Envoy and prints a one-line JSON summary.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/wirelens/wirelens/internal/chclient"
	"github.com/wirelens/wirelens/internal/cli"
	"github.com/wirelens/wirelens/loadgen/internal/loadgen"
	"github.com/wirelens/wirelens/loadgen/internal/otlpexport"
)

const usage = `Usage: loadgen [flags]

Sends calls of one operation over one protocol to -target (Envoy's
listener, codec AUTO, which routes by path and content type) under a load
model, and prints a one-line JSON summary of the measured phase to stdout:

  {"protocol":..,"operation":..,"model":..,"run_id":..,"calls":N,"ok":N,"errors":N,
   "p50_ms":..,"p90_ms":..,"p95_ms":..,"p99_ms":..,"min_ms":..,"max_ms":..,"mean_ms":..,
   "elapsed_s":..,"rate_per_s":..,"latency_from":"send"|"intended",
   "messages_sent":N,"messages_received":N,"warmup_calls":N,"started":..,"ended":..}

Load models (-model):
  sequential  one call at a time on one connection, -n calls (the default with -concurrency 1)
  concurrent  -n calls shared by -concurrency workers, no think time (the default with -concurrency > 1)
  closed      -users virtual users started at -spawn-rate, each calling then thinking
              -think (uniform range) until -duration; one connection or gRPC channel per user
  open        calls arrive at -rate whatever the answers do, for -duration (or -n calls);
              latency counts from each call's INTENDED send time, so queueing in the
              client cannot hide (no coordinated omission); service_p50/p99 are from the
              actual send. At most -max-in-flight calls at once.
Every run is bounded by a count (-n) and a time (-duration, -timeout); the
first bound reached ends it. -warmup N (calls) or -warmup 10s runs first,
with the run id <run-id>-warmup, and is left out of the summary (and of
proxy-side queries over the run id).

A streaming call is one call: -messages messages on one client or bidi
stream, -count replies on a server stream; messages_sent/received total
them (1 and 1 per unary call). Latencies come from an HDR histogram
(1 us resolution, 3 significant digits) of the successful calls.

Trace context (-trace): every call carries a W3C traceparent, a fresh trace each.
  header     (default) 00-<trace id>-<span id>-01; the parent span is not exported
  sampled    a client span per call (service -service-name, kind CLIENT, named
             "<operation> (<protocol>)"), the root of its trace, exported over OTLP/gRPC
             to -otlp-endpoint; its context sent sampled (flags 01)
  unsampled  flags 00 (the caller decided not to sample), no span
  mix        calls 0, 2, 4, ... of each phase as sampled, 1, 3, 5, ... as unsampled
  off        no traceparent: Envoy starts the trace
-trace-ids writes "<protocol>\t<trace id>\t<flags>" per successful measured call
(no line with -trace off: the client knows no trace id). The client spans are
flushed before the summary is printed.

Progress goes to stderr: rate, p50/p99 so far, errors, ETA; redrawn twice a
second on a terminal, one line every 5 s otherwise (-progress). Ctrl-C
(SIGINT) or SIGTERM ends the run cleanly: no new calls, the calls in flight
finish, the summary is printed and the run recorded (a second Ctrl-C
aborts the calls in flight).

With -clickhouse-url (default $WIRELENS_CLICKHOUSE_URL) the run is recorded
in wirelens.runs when it starts and when it ends (run id, -scenario,
parameters, times, the summary). -compare then waits (-compare-timeout)
until wirelens.requests holds exactly as many rows for the run id as the
client completed calls, and prints client and proxy latencies side by side
on stderr, with the gap; the summary gains a "proxy" object.

Exit status: 0 when every call succeeded; 1 when a call failed or -timeout
cut the run short (the first error goes to stderr); 2 for bad flags; 3 when
-compare found a different number of rows than calls; 130 when interrupted.

Protocols:
  rest           HTTP/1.1, the operation's google.api.http route, JSON body or query string
  rest-proto     as rest, with Content-Type and Accept application/protobuf
  grpc           grpc-go over plaintext HTTP/2 (h2c); every streaming shape
  grpc-web       HTTP/1.1 POST /<service>/<method>, application/grpc-web+proto, x-grpc-web: 1
                 (unary and server streaming: gRPC-Web cannot stream from the client)
  grpc-web-text  as grpc-web, base64 body, application/grpc-web-text

Operations (REST route; streaming shape):
  catalog.GetProduct       GET /v1/products/{id}           (-id; 0 cycles 1..10000)
  catalog.ListProducts     GET /v1/products?count=N        (-count)
  echo.Unary               GET /v1/echo?content=...        (-content)
  echo.ServerStream        server streaming, gRPC and gRPC-Web only (-content, -count)
  echo.BiStream            bidi streaming, gRPC only (-content, -messages, -lockstep)
  hello.SayHello           POST /v1/hello                  (-name)
  hello.SayHelloBig        POST /v1/hello-big              (-name)
  math.CalculateFactorial  POST /v1/factorial              (-number)
  people.Register          POST /v1/person                 (E3's person, age 1+i%50)
  people.RegisterBatch     client streaming, gRPC only (-messages persons per stream)

Flags:
`

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "\nloadgen: stopping: no new calls, waiting for the calls in flight (again to abort them)")
		close(stop)
		<-sig
		cancel()
	}()
	os.Exit(run(ctx, stop, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, stop <-chan struct{}, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg loadgen.Config
	fs.StringVar(&cfg.Target, "target", "127.0.0.1:10000", "host:port of the Envoy listener to send calls to")
	fs.StringVar(&cfg.Protocol, "protocol", loadgen.ProtocolREST, "protocol: "+strings.Join(loadgen.Protocols(), " | "))
	fs.StringVar(&cfg.Operation, "operation", "hello.SayHello", "operation to call: "+strings.Join(loadgen.Operations(), " | "))
	fs.StringVar(&cfg.Model, "model", "", "load model: "+strings.Join(loadgen.Models(), " | ")+` (default: sequential, or concurrent with -concurrency > 1)`)
	fs.IntVar(&cfg.N, "n", 100, "calls to send (measured phase); with -model closed or open, a cap (default: none, -duration ends the run)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "length of the measured phase (closed and open models; optional for the others)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 1, "concurrent model: calls in flight at once (one connection each for HTTP/1.1; one shared HTTP/2 connection for grpc)")
	fs.IntVar(&cfg.Users, "users", 10, "closed model: virtual users")
	think := fs.String("think", "0", "closed model: think time after each call, uniform in MIN-MAX (e.g. 1s-2s), or one duration")
	spawn := fs.String("spawn-rate", "0", "closed model: users started per second, e.g. 10/s (0: all at once)")
	rate := fs.String("rate", "", "open model: arrival rate, e.g. 200/s (or /m, /h)")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", loadgen.DefaultMaxInFlight, "open model: calls in flight at most (one HTTP/1.1 connection each)")
	warmup := fs.String("warmup", "0", "warm-up before the measured phase: a number of calls (50) or a duration (10s); sent with run id <run-id>-warmup, left out of the summary")
	fs.IntVar(&cfg.WarmupMessages, "warmup-messages", 0, "client and bidi streams: messages per warm-up stream (default: -messages)")
	fs.StringVar(&cfg.Name, "name", "wirelens", "hello.*: the request's name field")
	fs.IntVar(&cfg.Number, "number", 10000, "math.CalculateFactorial: the number (E1 uses 10000)")
	fs.IntVar(&cfg.ID, "id", 1, "catalog.GetProduct: the product id, 1..10000; 0 cycles through every id, call i asking for 1+i%10000")
	fs.IntVar(&cfg.Count, "count", loadgen.DefaultCount, "catalog.ListProducts: products per call; echo.ServerStream: replies per stream")
	fs.StringVar(&cfg.Content, "content", "", "echo.*: the content of every message (default \"TestContent<i>\", i counting messages from 0, as in E5)")
	fs.IntVar(&cfg.Messages, "messages", loadgen.DefaultMessages, "people.RegisterBatch, echo.BiStream: messages per stream")
	fs.BoolVar(&cfg.Lockstep, "lockstep", false, "echo.BiStream: send each message only after the previous reply (ping-pong, one message in flight); default: pipelined")
	traceFile := fs.String("trace-ids", "", "if set, write one line \"<protocol>\\t<trace id>\\t<flags 01|00>\" per successful measured call to this file (truncated first)")
	fs.StringVar(&cfg.Trace, "trace", loadgen.TraceHeader, "trace context of each call: "+strings.Join(loadgen.TraceModes(), " | ")+" (above)")
	otlpEndpoint := fs.String("otlp-endpoint", cli.EnvOr("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
		"-trace sampled|mix: OTLP/gRPC endpoint the client spans go to (env OTEL_EXPORTER_OTLP_ENDPOINT)")
	serviceName := fs.String("service-name", cli.EnvOr("OTEL_SERVICE_NAME", "wirelens-loadgen"),
		"-trace sampled|mix: service.name of the client spans (env OTEL_SERVICE_NAME)")
	fs.StringVar(&cfg.Stack, "stack", "", "if set, sent as the x-wirelens-stack header of every call: the pair of services Envoy routes it to ("+strings.Join(loadgen.Stacks(), "|")+"; none: go); recorded as wirelens.stack")
	fs.StringVar(&cfg.RunID, "run-id", "", "if set, sent as the x-wirelens-run header of every call; Envoy records it as wirelens.run_id (generated when -clickhouse-url, -compare or -warmup need one)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "hard bound on the whole run, warm-up included; calls not finished by then count as errors (default 30s, or warm-up + -duration + 60s)")
	scenario := fs.String("scenario", "", "scenario name recorded with the run in wirelens.runs (e.g. e1)")
	chURL := fs.String("clickhouse-url", cli.EnvOr("WIRELENS_CLICKHOUSE_URL", ""), "ClickHouse HTTP interface for wirelens.runs and -compare (env WIRELENS_CLICKHOUSE_URL; empty: not recorded)")
	compare := fs.Bool("compare", false, "after the run, wait for the proxy's rows and print client vs proxy (needs -clickhouse-url)")
	compareTimeout := fs.Duration("compare-timeout", 60*time.Second, "-compare: how long to wait for the proxy's rows")
	progressFlag := fs.String("progress", "auto", "progress on stderr: auto (0.5s on a terminal, 5s otherwise), off, or an interval")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	flushSpans := func() error { return nil }
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var errs []error
	var err error
	if cfg.ThinkMin, cfg.ThinkMax, err = loadgen.ParseThink(*think); err != nil {
		errs = append(errs, fmt.Errorf("-think: %w", err))
	}
	if cfg.SpawnRate, err = loadgen.ParseRate(*spawn); err != nil {
		errs = append(errs, fmt.Errorf("-spawn-rate: %w", err))
	}
	if cfg.Rate, err = loadgen.ParseRate(*rate); err != nil {
		errs = append(errs, fmt.Errorf("-rate: %w", err))
	}
	if cfg.WarmupCalls, cfg.WarmupDuration, err = loadgen.ParseWarmup(*warmup); err != nil {
		errs = append(errs, fmt.Errorf("-warmup: %w", err))
	}
	if (cfg.Model == loadgen.ModelClosed || cfg.Model == loadgen.ModelOpen) && !set["n"] {
		cfg.N = 0
	}
	if !set["timeout"] && cfg.Duration > 0 {
		cfg.Timeout = max(cfg.Timeout, cfg.WarmupDuration+cfg.Duration+60*time.Second)
	}
	if cfg.Model == loadgen.ModelSequential && set["concurrency"] && cfg.Concurrency != 1 {
		errs = append(errs, fmt.Errorf("-model sequential sends one call at a time: drop -concurrency %d or use -model concurrent", cfg.Concurrency))
	}
	interval, tty, err := progressSettings(*progressFlag, stderr)
	if err != nil {
		errs = append(errs, err)
	}
	if *compare && *chURL == "" {
		errs = append(errs, errors.New("-compare needs -clickhouse-url (or WIRELENS_CLICKHOUSE_URL)"))
	}
	var ch *chclient.Client
	if *chURL != "" {
		if ch, err = chclient.New(*chURL, 0); err != nil {
			errs = append(errs, fmt.Errorf("-clickhouse-url: %w", err))
		}
	}
	if cfg.RunID == "" && (ch != nil || *compare || cfg.WarmupCalls > 0 || cfg.WarmupDuration > 0) {
		cfg.RunID = loadgen.NewRunID("loadgen")
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 2
	}

	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: opening -trace-ids file: %v\n", err)
			return 1
		}
		defer f.Close()
		cfg.TraceIDs = f
	}
	if loadgen.TraceExports(cfg.Trace) {
		exp, err := otlpexport.New(*otlpEndpoint)
		if err != nil {
			fmt.Fprintf(stderr, "loadgen: -trace %s: %v\n", cfg.Trace, err)
			return 1
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(
			resource.NewSchemaless(attribute.String("service.name", *serviceName))))
		cfg.Tracer = tp.Tracer("github.com/wirelens/wirelens/loadgen")
		defer func() { // after the run; before the summary is printed (below, flushSpans)
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = tp.Shutdown(sctx)
		}()
		flushSpans = func() error {
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer fcancel()
			return tp.ForceFlush(fctx)
		}
	}
	cfg.Stop = stop
	if interval > 0 {
		cfg.Progress, cfg.ProgressInterval, cfg.ProgressTTY = stderr, interval, tty
	}

	started := time.Now()
	if ch != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := loadgen.RegisterStart(rctx, ch, cfg, *scenario, started); err != nil {
			fmt.Fprintf(stderr, "loadgen: warning: recording the run in wirelens.runs at %s: %v\n", ch, err)
		}
		rcancel()
	}
	sum, runErr := loadgen.Run(ctx, cfg)
	ended := time.Now()
	if err := flushSpans(); err != nil {
		fmt.Fprintf(stderr, "loadgen: -trace %s: exporting the client spans to %s: %v\n", cfg.Trace, *otlpEndpoint, err)
		if runErr == nil {
			runErr = fmt.Errorf("client spans not exported: %w", err)
		}
	}
	if sum.Protocol == "" && runErr != nil { // setup failed before any call
		fmt.Fprintf(stderr, "loadgen: %v\n", runErr)
		return 1
	}
	if ch != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := loadgen.RegisterEnd(rctx, ch, cfg, *scenario, started, ended, sum); err != nil {
			fmt.Fprintf(stderr, "loadgen: warning: recording the end of the run in wirelens.runs at %s: %v\n", ch, err)
		}
		rcancel()
	}
	rc := 0
	if *compare {
		cctx, ccancel := context.WithTimeout(context.Background(), *compareTimeout+10*time.Second)
		p, err := loadgen.WaitForProxy(cctx, ch, cfg.RunID, sum.Calls, *compareTimeout)
		ccancel()
		switch {
		case err != nil && !p.CallsMatch:
			fmt.Fprintf(stderr, "loadgen: -compare: reading the proxy's rows: %v\n", err)
			rc = 3
		default:
			sum.Proxy = &p
			fmt.Fprint(stderr, loadgen.FormatComparison(sum, p))
			if !p.CallsMatch {
				rc = 3
			}
		}
	}
	line, err := json.Marshal(sum)
	if err != nil {
		fmt.Fprintf(stderr, "loadgen: encoding summary: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", line)
	if runErr != nil {
		fmt.Fprintf(stderr, "loadgen: %v\n", runErr)
		return 1
	}
	if sum.Interrupted && ctx.Err() == nil {
		select {
		case <-stop:
			return 130
		default:
		}
	}
	return rc
}

// progressSettings reads -progress: the interval (0: off) and whether stderr
// is a terminal (the line is then redrawn in place).
func progressSettings(flagValue string, stderr io.Writer) (time.Duration, bool, error) {
	tty := false
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	switch flagValue {
	case "off", "0":
		return 0, tty, nil
	case "auto", "":
		if tty {
			return 500 * time.Millisecond, true, nil
		}
		return 5 * time.Second, false, nil
	}
	d, err := time.ParseDuration(flagValue)
	if err != nil || d <= 0 {
		return 0, tty, fmt.Errorf("-progress must be auto, off or an interval like 2s, got %q", flagValue)
	}
	return d, tty, nil
}
