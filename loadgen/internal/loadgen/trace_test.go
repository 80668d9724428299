package loadgen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wirelens/wirelens/internal/restserver"
)

// traceparents records the traceparent header of every call (none: "").
type traceparents struct {
	mu  sync.Mutex
	got []string
	h   http.Handler
}

func (tp *traceparents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tp.mu.Lock()
	tp.got = append(tp.got, r.Header.Get("Traceparent"))
	tp.mu.Unlock()
	tp.h.ServeHTTP(w, r)
}

func runTraced(t *testing.T, mode string, n int, tracer trace.Tracer) (sent []string, idLines []string) {
	t.Helper()
	h, err := restserver.NewHandler(services)
	if err != nil {
		t.Fatal(err)
	}
	rec := &traceparents{h: h}
	ts := httptest.NewServer(rec)
	defer ts.Close()
	var ids bytes.Buffer
	_, err = Run(context.Background(), Config{Target: strings.TrimPrefix(ts.URL, "http://"), Protocol: ProtocolREST,
		Operation: "hello.SayHello", N: n, Concurrency: 1, Timeout: 10 * time.Second, TraceIDs: &ids, Trace: mode, Tracer: tracer})
	if err != nil {
		t.Fatalf("-trace %s: %v", mode, err)
	}
	if s := strings.TrimSpace(ids.String()); s != "" {
		idLines = strings.Split(s, "\n")
	}
	return rec.got, idLines
}

// TestTraceMix: calls alternate sampled (a client span, exported, its
// context sent with flags 01) and unsampled (flags 00, no span).
func TestTraceMix(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	sent, lines := runTraced(t, TraceMix, 4, tp.Tracer("test"))
	if len(sent) != 4 || len(lines) != 4 {
		t.Fatalf("traceparents %q, trace id lines %q", sent, lines)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d client spans exported, want 2 (calls 0 and 2)", len(spans))
	}
	var sampledSent, sampledSpans []string
	for i, tpHeader := range sent { // sequential: the order of the calls
		f := strings.Split(tpHeader, "-")
		want := []string{"01", "00"}[i%2]
		if len(f) != 4 || f[0] != "00" || len(f[1]) != 32 || len(f[2]) != 16 || f[3] != want {
			t.Fatalf("call %d sent traceparent %q, want flags %s", i, tpHeader, want)
		}
		if lines[i] != "rest\t"+f[1]+"\t"+want {
			t.Fatalf("trace id line %d = %q, want rest, %s, %s", i, lines[i], f[1], want)
		}
		if want == "01" {
			sampledSent = append(sampledSent, f[1]+"-"+f[2])
		}
	}
	for _, s := range spans {
		if s.SpanKind != trace.SpanKindClient || s.Parent.IsValid() || s.Name != "hello.SayHello (rest)" {
			t.Fatalf("client span %q kind %v parent %v", s.Name, s.SpanKind, s.Parent)
		}
		sampledSpans = append(sampledSpans, s.SpanContext.TraceID().String()+"-"+s.SpanContext.SpanID().String())
	}
	slices.Sort(sampledSent)
	slices.Sort(sampledSpans)
	if !slices.Equal(sampledSent, sampledSpans) {
		t.Fatalf("sampled traceparents %q are not the client spans %q", sampledSent, sampledSpans)
	}
}

// TestTraceOffAndUnsampled: -trace off sends no traceparent (and writes no
// trace id); unsampled sends flags 00 on every call.
func TestTraceOffAndUnsampled(t *testing.T) {
	sent, lines := runTraced(t, TraceOff, 2, nil)
	if !slices.Equal(sent, []string{"", ""}) || len(lines) != 0 {
		t.Fatalf("-trace off: traceparents %q, trace id lines %q", sent, lines)
	}
	sent, lines = runTraced(t, TraceUnsampled, 2, nil)
	if len(sent) != 2 || len(lines) != 2 || !strings.HasSuffix(sent[0], "-00") || !strings.HasSuffix(sent[1], "-00") {
		t.Fatalf("-trace unsampled: traceparents %q, trace id lines %q", sent, lines)
	}
	if _, err := Run(context.Background(), Config{Target: "127.0.0.1:1", Protocol: ProtocolREST,
		Operation: "hello.SayHello", N: 1, Concurrency: 1, Timeout: time.Second, Trace: TraceSampled}); err == nil || !strings.Contains(err.Error(), "tracer") {
		t.Fatalf("-trace sampled without a tracer: %v", err)
	}
	cfg := Config{Target: "127.0.0.1:1", Protocol: ProtocolREST, Operation: "hello.SayHello", N: 1, Trace: "maybe"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-trace must be one of") {
		t.Fatalf("-trace maybe: %v", err)
	}
}
