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
	"strings"
	"time"

	"github.com/wirelens/wirelens/services/internal/cli"
	"github.com/wirelens/wirelens/services/internal/loadgen"
)

const usage = `Usage: loadgen [flags]

Sends -n calls of one operation over one protocol to -target (Envoy's
listener, codec AUTO, which routes by path and content type) and prints a
one-line JSON summary to stdout:

  {"protocol":..,"operation":..,"calls":N,"ok":N,"errors":N,"p50_ms":..,"p99_ms":..,
   "elapsed_s":..,"messages_sent":N,"messages_received":N}

A streaming call is one call: -messages messages on one client or bidi
stream, -count replies on a server stream; messages_sent/received total
them (1 and 1 per unary call). Latency percentiles are over the successful
calls. Every call carries a fresh W3C traceparent header
(00-<trace id>-<span id>-01). The exit status is 0 when all -n calls
succeeded, 1 when any failed or -timeout stopped the run (the first error
goes to stderr), 2 for bad flags.

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
  echo.BiStream            bidi streaming, gRPC only (-content, -messages)
  hello.SayHello           POST /v1/hello                  (-name)
  hello.SayHelloBig        POST /v1/hello-big              (-name)
  math.CalculateFactorial  POST /v1/factorial              (-number)
  people.Register          POST /v1/person                 (E3's person, age 1+i%50)
  people.RegisterBatch     client streaming, gRPC only (-messages persons per stream)

Flags:
`

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg loadgen.Config
	fs.StringVar(&cfg.Target, "target", "127.0.0.1:10000", "host:port of the Envoy listener to send calls to")
	fs.StringVar(&cfg.Protocol, "protocol", loadgen.ProtocolREST, "protocol: "+strings.Join(loadgen.Protocols(), " | "))
	fs.StringVar(&cfg.Operation, "operation", "hello.SayHello", "operation to call: "+strings.Join(loadgen.Operations(), " | "))
	fs.IntVar(&cfg.N, "n", 100, "number of calls to send")
	fs.StringVar(&cfg.Name, "name", "wirelens", "hello.*: the request's name field")
	fs.IntVar(&cfg.Number, "number", 10000, "math.CalculateFactorial: the number (E1 uses 10000)")
	fs.IntVar(&cfg.ID, "id", 1, "catalog.GetProduct: the product id, 1..10000; 0 cycles through every id, call i asking for 1+i%10000")
	fs.IntVar(&cfg.Count, "count", loadgen.DefaultCount, "catalog.ListProducts: products per call; echo.ServerStream: replies per stream")
	fs.StringVar(&cfg.Content, "content", "", "echo.*: the content of every message (default \"TestContent<i>\", i counting messages from 0, as in E5)")
	fs.IntVar(&cfg.Messages, "messages", loadgen.DefaultMessages, "people.RegisterBatch, echo.BiStream: messages per stream")
	fs.IntVar(&cfg.Concurrency, "concurrency", 1, "calls in flight at once (one connection each for HTTP/1.1; one shared HTTP/2 connection for grpc)")
	traceFile := fs.String("trace-ids", "", "if set, write one line \"<protocol>\\t<trace id>\" per successful call to this file (truncated first)")
	fs.StringVar(&cfg.RunID, "run-id", "", "if set, sent as the x-wirelens-run header of every call; Envoy records it as wirelens.run_id")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "bound on the whole run; calls not finished by then count as errors")
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
	if err := cfg.Validate(); err != nil {
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

	sum, runErr := loadgen.Run(ctx, cfg)
	if sum.Protocol == "" && runErr != nil { // setup failed before any call
		fmt.Fprintf(stderr, "loadgen: %v\n", runErr)
		return 1
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
	return 0
}
