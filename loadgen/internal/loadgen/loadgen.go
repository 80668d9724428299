// Package loadgen drives one wirelens operation over one protocol through
// Envoy (a single listener with codec AUTO, routing by path and content
// type), with a fresh W3C traceparent on every call, under one of four load
// models, and summarises the run from client-side HDR histograms.
package loadgen

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/wirelens/wirelens/internal/ops"
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

// Load models.
const (
	// ModelSequential: one call at a time on one connection, -n calls (E2, E3, E5).
	ModelSequential = "sequential"
	// ModelConcurrent: -n calls shared by -concurrency workers, each sending
	// its next call as soon as the previous one answered (no think time).
	ModelConcurrent = "concurrent"
	// ModelClosed: -users virtual users started at -spawn-rate, each calling,
	// then thinking a uniform random time in -think, until -duration (E1, E4).
	// Each user has its own connection (HTTP/1.1) or channel (gRPC).
	ModelClosed = "closed"
	// ModelOpen: calls arrive at a constant -rate whatever the answers do;
	// latency is counted from each call's intended send time, so queueing
	// in the client (coordinated omission) shows in the percentiles.
	ModelOpen = "open"
)

// Models lists the load models.
func Models() []string {
	return []string{ModelSequential, ModelConcurrent, ModelClosed, ModelOpen}
}

// Defaults of the operation parameters (used when the Config field is 0).
const (
	DefaultMessages    = 10   // messages per client or bidi stream
	DefaultCount       = 100  // ListProducts count, ServerStream replies
	DefaultMaxInFlight = 1000 // open model: calls in flight at once
)

// WarmupSuffix is appended to the run id of warm-up calls, so that
// proxy-side queries over the run id leave them out.
const WarmupSuffix = "-warmup"

// StackHeader selects the pair of services a call reaches (envoy/envoy.yaml.tmpl).
const StackHeader = "x-wirelens-stack"

// Stacks are the pairs of services behind the local Envoy: go (the default,
// no header needed), python (services/python), jvm (services/jvm: Spring
// WebFlux and grpc-java) and jvm-mvc (the same pair's Spring Web MVC REST).
func Stacks() []string { return []string{"go", "python", "jvm", "jvm-mvc"} }

// MaxRunIDLength is how much of a run id wirelens.requests keeps.
const MaxRunIDLength = 128

const userAgent = "wirelens-loadgen/1"

// Config is one run.
type Config struct {
	Target    string // host:port of Envoy's listener
	Protocol  string // one of Protocols()
	Operation string // e.g. hello.SayHello
	Name      string // HelloRequest.name
	Number    int    // FactorialRequest.number
	ID        int    // GetProductRequest.id; 0 cycles through 1..catalog.Size
	Count     int    // ListProducts count and ServerStream replies (0: DefaultCount)
	Content   string // echo content; "" means "TestContent<index>" as in E5
	Messages  int    // messages per client or bidi stream (0: DefaultMessages)
	// Lockstep makes a bidi stream send each message only after the reply
	// to the previous one (ping-pong); otherwise sending and receiving
	// overlap (pipelined).
	Lockstep bool

	// Model is one of Models(); "" means sequential when Concurrency is 1,
	// concurrent otherwise.
	Model string
	// N bounds the measured calls (a stream is one call). 0: no count bound
	// (then Duration must bound the run).
	N int
	// Duration bounds the measured phase (0: none; closed and open models
	// need N or Duration).
	Duration    time.Duration
	Concurrency int           // concurrent model: workers (sequential: 1)
	Users       int           // closed model: virtual users
	ThinkMin    time.Duration // closed model: think time after each call, uniform in [ThinkMin, ThinkMax]
	ThinkMax    time.Duration
	SpawnRate   float64 // closed model: users started per second (0: all at once)
	Rate        float64 // open model: calls per second
	MaxInFlight int     // open model: calls in flight at once (0: DefaultMaxInFlight)

	// Warm-up: the first WarmupCalls calls, or the calls started within
	// WarmupDuration (whichever ends first when both are set), are sent
	// with the run id RunID+WarmupSuffix and left out of the summary.
	WarmupCalls    int
	WarmupDuration time.Duration
	// WarmupMessages, if set, replaces Messages for warm-up streams (a
	// 100,000-message client stream needs no 50 warm-up streams as long).
	WarmupMessages int

	Timeout  time.Duration // hard bound on the whole run, warm-up included
	TraceIDs io.Writer     // if set, gets "<protocol>\t<trace id>\t<flags>\n" per successful measured call (none with Trace off)
	// Trace is the trace context each call carries (-trace): TraceHeader (default), TraceSampled,
	// TraceUnsampled, TraceMix or TraceOff. TraceSampled and TraceMix need Tracer.
	Trace string
	// Tracer starts the client span of each sampled call (TraceSampled, TraceMix).
	Tracer trace.Tracer
	RunID  string // if set, sent as the x-wirelens-run header of every measured call
	// Stack, if set, is sent as the x-wirelens-stack header of every call:
	// the local Envoy routes it to that stack's pair of services (Stacks).
	Stack string

	// Stop, when closed, ends the run gracefully: no new calls start, the
	// calls in flight finish (within Timeout).
	Stop <-chan struct{}
	// Progress, if set, gets a progress line every ProgressInterval
	// (redrawn in place when ProgressTTY).
	Progress         io.Writer
	ProgressInterval time.Duration
	ProgressTTY      bool
}

// Summary is the one-line JSON result of a run: the measured phase only.
// Latencies are those of the successful calls, from an HDR histogram
// (microsecond resolution, 3 significant digits).
type Summary struct {
	Protocol  string  `json:"protocol"`
	Operation string  `json:"operation"`
	Model     string  `json:"model"`
	RunID     string  `json:"run_id,omitempty"`
	Stack     string  `json:"stack,omitempty"`
	Calls     int     `json:"calls"`
	OK        int     `json:"ok"`
	Errors    int     `json:"errors"`
	P50Ms     float64 `json:"p50_ms"`
	P90Ms     float64 `json:"p90_ms"`
	P95Ms     float64 `json:"p95_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MinMs     float64 `json:"min_ms"`
	MaxMs     float64 `json:"max_ms"`
	MeanMs    float64 `json:"mean_ms"`
	// ElapsedS is the measured phase: from its first call's start to its
	// last call's end.
	ElapsedS   float64 `json:"elapsed_s"`
	RatePerSec float64 `json:"rate_per_s"`
	// LatencyFrom says where latency starts: "send" (when the call was
	// sent) or, in the open model, "intended" (when it was due).
	LatencyFrom string `json:"latency_from"`
	// Open model: latency from the actual send, for comparison.
	ServiceP50Ms *float64 `json:"service_p50_ms,omitempty"`
	ServiceP99Ms *float64 `json:"service_p99_ms,omitempty"`
	// Messages sent and received over every measured call, successful or
	// not: 1 each per unary call, the stream's messages for streaming calls.
	MessagesSent     int64  `json:"messages_sent"`
	MessagesReceived int64  `json:"messages_received"`
	WarmupCalls      int    `json:"warmup_calls,omitempty"`
	WarmupErrors     int    `json:"warmup_errors,omitempty"`
	WarmupRunID      string `json:"warmup_run_id,omitempty"`
	// Interrupted: Stop (Ctrl-C) or the timeout ended the run early.
	Interrupted bool `json:"interrupted,omitempty"`
	// Started and Ended bound the whole run, warm-up included (RFC 3339).
	Started string `json:"started"`
	Ended   string `json:"ended"`
	// Proxy is what the proxy recorded for the run (with -compare).
	Proxy *ProxySummary `json:"proxy,omitempty"`
}

// The trace context modes (-trace).
const (
	// TraceHeader: a fresh sampled traceparent per call whose parent span is
	// not exported (the default; Envoy's span is then the first one stored).
	TraceHeader = "header"
	// TraceSampled: a client span per call, exported, its context sent sampled (flags 01).
	TraceSampled = "sampled"
	// TraceUnsampled: a fresh traceparent per call with flags 00; no span.
	TraceUnsampled = "unsampled"
	// TraceMix: calls 0, 2, 4, ... of each phase as TraceSampled, the others as TraceUnsampled.
	TraceMix = "mix"
	// TraceOff: no traceparent at all: Envoy starts the trace.
	TraceOff = "off"
)

// TraceModes lists the -trace values.
func TraceModes() []string {
	return []string{TraceHeader, TraceSampled, TraceUnsampled, TraceMix, TraceOff}
}

// TraceExports reports whether mode exports client spans (needs a Tracer).
func TraceExports(mode string) bool { return mode == TraceSampled || mode == TraceMix }

// Validate checks cfg, normalises the target (an http:// prefix is dropped)
// and fills in the defaults of Count, Messages, Model and MaxInFlight.
func (cfg *Config) Validate() error {
	cfg.Target = strings.TrimPrefix(cfg.Target, "http://")
	var errs []error
	if cfg.Trace == "" {
		cfg.Trace = TraceHeader
	}
	if !slices.Contains(TraceModes(), cfg.Trace) {
		errs = append(errs, fmt.Errorf("-trace must be one of %s, got %q", strings.Join(TraceModes(), "|"), cfg.Trace))
	}
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
	// The warm-up phase runs as <run id>-warmup, and wirelens.requests keeps
	// only MaxRunIDLength characters of a run id (queries/schema/001_requests.sql).
	if n := utf8.RuneCountInString(cfg.RunID + WarmupSuffix); n > MaxRunIDLength {
		errs = append(errs, fmt.Errorf("-run-id must be at most %d characters (%d with %q): ClickHouse keeps the first %d, got %d",
			MaxRunIDLength-len(WarmupSuffix), MaxRunIDLength, WarmupSuffix, MaxRunIDLength, n-len(WarmupSuffix)))
	}
	if cfg.Stack != "" && !slices.Contains(Stacks(), cfg.Stack) {
		errs = append(errs, fmt.Errorf("-stack must be one of %s, got %q", strings.Join(Stacks(), "|"), cfg.Stack))
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Messages == 0 {
		cfg.Messages = DefaultMessages
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Model == "" {
		cfg.Model = ModelSequential
		if cfg.Concurrency != 1 {
			cfg.Model = ModelConcurrent
		}
	}
	if cfg.Count < 0 {
		errs = append(errs, fmt.Errorf("-count must be positive, got %d", cfg.Count))
	}
	if cfg.Messages < 0 {
		errs = append(errs, fmt.Errorf("-messages must be positive, got %d", cfg.Messages))
	}
	if cfg.WarmupMessages < 0 {
		errs = append(errs, fmt.Errorf("-warmup-messages must not be negative, got %d", cfg.WarmupMessages))
	}
	if cfg.ID < 0 {
		errs = append(errs, fmt.Errorf("-id must be 0 (cycle) or positive, got %d", cfg.ID))
	}
	if cfg.Number < 0 {
		errs = append(errs, fmt.Errorf("-number must not be negative, got %d", cfg.Number))
	}
	if cfg.N < 0 {
		errs = append(errs, fmt.Errorf("-n must not be negative, got %d", cfg.N))
	}
	if cfg.Duration < 0 {
		errs = append(errs, fmt.Errorf("-duration must not be negative, got %s", cfg.Duration))
	}
	if cfg.WarmupCalls < 0 || cfg.WarmupDuration < 0 {
		errs = append(errs, fmt.Errorf("-warmup must not be negative"))
	}
	if cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout must be positive, got %s", cfg.Timeout))
	}
	switch cfg.Model {
	case ModelSequential, ModelConcurrent:
		if cfg.N < 1 && cfg.Duration == 0 {
			errs = append(errs, fmt.Errorf("-n must be at least 1 (or set -duration), got %d", cfg.N))
		}
		if cfg.Model == ModelSequential {
			cfg.Concurrency = 1
		}
		if cfg.Concurrency < 1 {
			errs = append(errs, fmt.Errorf("-concurrency must be at least 1, got %d", cfg.Concurrency))
		}
	case ModelClosed:
		if cfg.Users < 1 {
			errs = append(errs, fmt.Errorf("-model closed: -users must be at least 1, got %d", cfg.Users))
		}
		if cfg.ThinkMin < 0 || cfg.ThinkMax < cfg.ThinkMin {
			errs = append(errs, fmt.Errorf("-think must be MIN-MAX with 0 <= MIN <= MAX, got %s-%s", cfg.ThinkMin, cfg.ThinkMax))
		}
		if cfg.SpawnRate < 0 {
			errs = append(errs, fmt.Errorf("-spawn-rate must not be negative, got %g", cfg.SpawnRate))
		}
		if cfg.N == 0 && cfg.Duration == 0 {
			errs = append(errs, errors.New("-model closed needs -duration or -n to end"))
		}
	case ModelOpen:
		if cfg.Rate <= 0 {
			errs = append(errs, fmt.Errorf("-model open: -rate must be positive, got %g", cfg.Rate))
		}
		if cfg.MaxInFlight < 1 {
			errs = append(errs, fmt.Errorf("-max-in-flight must be at least 1, got %d", cfg.MaxInFlight))
		}
		if cfg.N == 0 && cfg.Duration == 0 {
			errs = append(errs, errors.New("-model open needs -duration or -n to end"))
		}
		if cfg.Duration > 0 && cfg.Rate > 0 {
			// Exactly the arrivals due within the duration: the count is
			// the bound (a late arrival is still sent, and counted from
			// when it was due).
			due := max(1, int(cfg.Rate*cfg.Duration.Seconds()+0.5))
			if cfg.N == 0 || due < cfg.N {
				cfg.N = due
			}
		}
	default:
		errs = append(errs, fmt.Errorf("-model must be one of %s, got %q", strings.Join(Models(), "|"), cfg.Model))
	}
	return errors.Join(errs...)
}

// connections is how many connections (HTTP/1.1) the model needs at most.
func (cfg *Config) connections() int {
	switch cfg.Model {
	case ModelClosed:
		return cfg.Users
	case ModelOpen:
		return cfg.MaxInFlight
	default:
		return cfg.Concurrency
	}
}

// grpcChannels is how many gRPC client connections the model uses: one per
// user in the closed model (as Locust's and JMeter's users each hold their
// own), one shared HTTP/2 connection otherwise.
func (cfg *Config) grpcChannels() int {
	if cfg.Model == ModelClosed {
		return cfg.Users
	}
	return 1
}

// WarmupRunID is the run id of the warm-up calls ("" when RunID is "").
func (cfg *Config) WarmupRunID() string {
	if cfg.RunID == "" {
		return ""
	}
	return cfg.RunID + WarmupSuffix
}

// Parameters describes the run's settings (recorded in wirelens.runs).
func (cfg *Config) Parameters() map[string]any {
	p := map[string]any{
		"target": cfg.Target, "protocol": cfg.Protocol, "operation": cfg.Operation, "model": cfg.Model,
		"n": cfg.N, "duration_s": cfg.Duration.Seconds(), "timeout_s": cfg.Timeout.Seconds(),
	}
	if cfg.Stack != "" {
		p["stack"] = cfg.Stack
	}
	switch cfg.Model {
	case ModelConcurrent:
		p["concurrency"] = cfg.Concurrency
	case ModelClosed:
		p["users"], p["spawn_rate"] = cfg.Users, cfg.SpawnRate
		p["think_min_s"], p["think_max_s"] = cfg.ThinkMin.Seconds(), cfg.ThinkMax.Seconds()
	case ModelOpen:
		p["rate"], p["max_in_flight"] = cfg.Rate, cfg.MaxInFlight
	}
	if cfg.WarmupCalls > 0 || cfg.WarmupDuration > 0 {
		p["warmup_calls"], p["warmup_duration_s"] = cfg.WarmupCalls, cfg.WarmupDuration.Seconds()
		p["warmup_run_id"] = cfg.WarmupRunID()
	}
	op, _ := ops.Lookup(cfg.Operation)
	switch op.Name {
	case "hello.SayHello", "hello.SayHelloBig":
		p["name"] = cfg.Name
	case "math.CalculateFactorial":
		p["number"] = cfg.Number
	case "catalog.GetProduct":
		p["id"] = cfg.ID
	case "catalog.ListProducts", "echo.ServerStream":
		p["count"] = cfg.Count
	}
	switch op.Streaming {
	case "bidi":
		p["lockstep"] = cfg.Lockstep
		fallthrough
	case "client":
		p["messages"] = cfg.Messages
		if cfg.WarmupMessages > 0 {
			p["warmup_messages"] = cfg.WarmupMessages
		}
	}
	if strings.HasPrefix(op.Name, "echo.") {
		p["content"] = cfg.Content
	}
	return p
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

// NewRunID returns a fresh run id: prefix-YYYYmmddTHHMMSS-xxxxxx (UTC).
func NewRunID(prefix string) string {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%s", prefix, time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
}

// newTraceparent returns a W3C traceparent with random, non-zero trace and
// span ids (sampled), and the trace id alone.
func newTraceparent() (traceparent, traceID string) {
	return newTraceparentFlags("01")
}

// newTraceparentFlags is newTraceparent with the given trace flags (01 sampled, 00 not).
func newTraceparentFlags(flags string) (traceparent, traceID string) {
	var b [24]byte
	for {
		rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
		if !allZero(b[:16]) && !allZero(b[16:]) {
			break
		}
	}
	traceID = hex.EncodeToString(b[:16])
	return "00-" + traceID + "-" + hex.EncodeToString(b[16:]) + "-" + flags, traceID
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
