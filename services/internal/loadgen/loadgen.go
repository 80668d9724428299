// Package loadgen drives one wirelens operation over one protocol through
// Envoy (a single listener with codec AUTO, routing by path and content
// type), with a fresh W3C traceparent on every call, and summarises the run.
package loadgen

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelens/wirelens/services/internal/ops"
)

// Protocols loadgen speaks.
const (
	ProtocolREST        = "rest"          // HTTP/1.1, the google.api.http route, JSON
	ProtocolRESTProto   = "rest-proto"    // as rest, application/protobuf body and Accept
	ProtocolGRPC        = "grpc"          // grpc-go over h2c
	ProtocolGRPCWeb     = "grpc-web"      // HTTP/1.1, application/grpc-web+proto
	ProtocolGRPCWebText = "grpc-web-text" // HTTP/1.1, application/grpc-web-text (base64)
)

// Protocols lists the supported protocol names.
func Protocols() []string {
	return []string{ProtocolREST, ProtocolRESTProto, ProtocolGRPC, ProtocolGRPCWeb, ProtocolGRPCWebText}
}

// Defaults of the operation parameters (used when the Config field is 0).
const (
	DefaultMessages = 10  // messages per client or bidi stream
	DefaultCount    = 100 // ListProducts count, ServerStream replies
)

const userAgent = "wirelens-loadgen/1"

// Config is one run.
type Config struct {
	Target      string        // host:port of Envoy's listener
	Protocol    string        // one of Protocols()
	Operation   string        // e.g. hello.SayHello
	Name        string        // HelloRequest.name
	Number      int           // FactorialRequest.number
	ID          int           // GetProductRequest.id; 0 cycles through 1..catalog.Size
	Count       int           // ListProducts count and ServerStream replies (0: DefaultCount)
	Content     string        // echo content; "" means "TestContent<index>" as in E5
	Messages    int           // messages per client or bidi stream (0: DefaultMessages)
	N           int           // number of calls (a stream is one call)
	Concurrency int           // calls in flight at once
	Timeout     time.Duration // bound on the whole run
	TraceIDs    io.Writer     // if set, gets "<protocol>\t<trace id>\n" per successful call
	RunID       string        // if set, sent as the x-wirelens-run header of every call
}

// Summary is the one-line JSON result of a run. Latencies are those of the
// successful calls, nearest-rank percentiles.
type Summary struct {
	Protocol  string  `json:"protocol"`
	Operation string  `json:"operation"`
	Calls     int     `json:"calls"`
	OK        int     `json:"ok"`
	Errors    int     `json:"errors"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	ElapsedS  float64 `json:"elapsed_s"`
	// Messages sent and received over every call, successful or not: 1 each
	// per unary call, the stream's messages for streaming calls.
	MessagesSent     int64 `json:"messages_sent"`
	MessagesReceived int64 `json:"messages_received"`
}

// Validate checks cfg, normalises the target (an http:// prefix is dropped)
// and fills in the defaults of Count and Messages.
func (cfg *Config) Validate() error {
	cfg.Target = strings.TrimPrefix(cfg.Target, "http://")
	var errs []error
	if cfg.Target == "" || strings.Contains(cfg.Target, "/") {
		errs = append(errs, fmt.Errorf("-target must be host:port, got %q", cfg.Target))
	}
	if !slices.Contains(Protocols(), cfg.Protocol) {
		errs = append(errs, fmt.Errorf("-protocol must be one of %s, got %q", strings.Join(Protocols(), "|"), cfg.Protocol))
	}
	if !slices.Contains(Operations(), cfg.Operation) {
		errs = append(errs, fmt.Errorf("-operation must be one of %s, got %q", strings.Join(Operations(), "|"), cfg.Operation))
	} else if slices.Contains(Protocols(), cfg.Protocol) {
		if err := compatible(cfg.Protocol, cfg.Operation); err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Messages == 0 {
		cfg.Messages = DefaultMessages
	}
	if cfg.Count < 0 {
		errs = append(errs, fmt.Errorf("-count must be positive, got %d", cfg.Count))
	}
	if cfg.Messages < 0 {
		errs = append(errs, fmt.Errorf("-messages must be positive, got %d", cfg.Messages))
	}
	if cfg.ID < 0 {
		errs = append(errs, fmt.Errorf("-id must be 0 (cycle) or positive, got %d", cfg.ID))
	}
	if cfg.Number < 0 {
		errs = append(errs, fmt.Errorf("-number must not be negative, got %d", cfg.Number))
	}
	if cfg.N < 1 {
		errs = append(errs, fmt.Errorf("-n must be at least 1, got %d", cfg.N))
	}
	if cfg.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("-concurrency must be at least 1, got %d", cfg.Concurrency))
	}
	if cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout must be positive, got %s", cfg.Timeout))
	}
	return errors.Join(errs...)
}

// compatible checks that protocol can carry operation: REST needs a
// google.api.http route; gRPC-Web has no client streaming.
func compatible(protocol, operation string) error {
	op, err := ops.Lookup(operation)
	if err != nil {
		return err
	}
	switch protocol {
	case ProtocolGRPC:
		return nil
	case ProtocolGRPCWeb, ProtocolGRPCWebText:
		if op.Streaming == "client" || op.Streaming == "bidi" {
			return fmt.Errorf("operation %s is %s-streaming and gRPC-Web cannot stream from the client: use -protocol grpc", op.Name, op.Streaming)
		}
	default: // rest, rest-proto
		if len(op.HTTPRules) == 0 {
			alternatives := "grpc"
			if op.Streaming == "server" {
				alternatives = "grpc, grpc-web or grpc-web-text"
			}
			return fmt.Errorf("operation %s (%s streaming) has no google.api.http route, so no REST form: use -protocol %s",
				op.Name, op.Streaming, alternatives)
		}
	}
	return nil
}

// Run performs the calls and returns the summary and the first call error
// (nil when every one of the N calls succeeded). Setup errors return a
// zero Summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	w, err := newWorkload(cfg)
	if err != nil {
		return Summary{}, err
	}
	c, err := newCaller(cfg, w)
	if err != nil {
		return Summary{}, err
	}
	defer c.close()

	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("-timeout %s reached", cfg.Timeout))
	defer cancel()

	var (
		next     atomic.Int64
		mu       sync.Mutex
		calls    int
		failures int
		sent     int64
		received int64
		firstErr error
		lat      = make([]time.Duration, 0, cfg.N)
		traces   *bufio.Writer
	)
	if cfg.TraceIDs != nil {
		traces = bufio.NewWriter(cfg.TraceIDs)
	}
	workers := min(cfg.Concurrency, cfg.N)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(cfg.N) || ctx.Err() != nil {
					return
				}
				traceparent, traceID := newTraceparent()
				t0 := time.Now()
				st, err := c.call(ctx, i-1, traceparent)
				d := time.Since(t0)

				mu.Lock()
				calls++
				sent += int64(st.sent)
				received += int64(st.received)
				if err != nil {
					failures++
					if firstErr == nil {
						firstErr = fmt.Errorf("call %d: %w", i, err)
					}
				} else {
					lat = append(lat, d)
					if traces != nil {
						fmt.Fprintf(traces, "%s\t%s\n", cfg.Protocol, traceID)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	if calls < cfg.N && firstErr == nil {
		firstErr = fmt.Errorf("stopped after %d of %d calls: %w", calls, cfg.N, context.Cause(ctx))
	}
	if traces != nil {
		if err := traces.Flush(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("writing trace ids: %w", err)
		}
	}
	slices.Sort(lat)
	return Summary{
		Protocol:  cfg.Protocol,
		Operation: cfg.Operation,
		Calls:     calls,
		OK:        calls - failures,
		Errors:    failures,
		P50Ms:     ms(percentile(lat, 50)),
		P99Ms:     ms(percentile(lat, 99)),
		ElapsedS:  math.Round(elapsed.Seconds()*1e3) / 1e3,

		MessagesSent:     sent,
		MessagesReceived: received,
	}, firstErr
}

// percentile returns the nearest-rank p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*1e3) / 1e3
}

// newTraceparent returns a W3C traceparent with random, non-zero trace and
// span ids (sampled), and the trace id alone.
func newTraceparent() (traceparent, traceID string) {
	var b [24]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
		if !allZero(b[:16]) && !allZero(b[16:]) {
			break
		}
	}
	traceID = hex.EncodeToString(b[:16])
	return "00-" + traceID + "-" + hex.EncodeToString(b[16:]) + "-01", traceID
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
