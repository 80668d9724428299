package otlpexport

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

type sink struct {
	ptraceotlp.UnimplementedGRPCServer
	mu  sync.Mutex
	got []ptrace.Traces
}

func (s *sink) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

// TestExportsWhatTheSDKRecorded: a client span and its child reach an OTLP/gRPC server with their
// ids, parent, kind, name, attributes, status and the resource's service.name.
func TestExportsWhatTheSDKRecorded(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, s := grpc.NewServer(), &sink{}
	ptraceotlp.RegisterGRPCServer(srv, s)
	go srv.Serve(lis)
	defer srv.Stop()

	exp, err := New("http://" + lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "test-client"))))
	ctx, root := tp.Tracer("t").Start(context.Background(), "call (grpc)", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("loadgen.protocol", "grpc"), attribute.Int64("loadgen.call", 7)))
	_, child := tp.Tracer("t").Start(ctx, "inner")
	child.End()
	root.SetStatus(codes.Error, "HTTP 503")
	root.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	spans := map[string]ptrace.Span{}
	for _, td := range s.got {
		rs := td.ResourceSpans()
		for i := range rs.Len() {
			if name, _ := rs.At(i).Resource().Attributes().Get("service.name"); name.Str() != "test-client" {
				t.Fatalf("resource service.name = %q", name.Str())
			}
			ss := rs.At(i).ScopeSpans()
			for j := range ss.Len() {
				for k := range ss.At(j).Spans().Len() {
					sp := ss.At(j).Spans().At(k)
					spans[sp.Name()] = sp
				}
			}
		}
	}
	r, c := spans["call (grpc)"], spans["inner"]
	if len(spans) != 2 || r.Kind() != ptrace.SpanKindClient || !r.ParentSpanID().IsEmpty() ||
		c.ParentSpanID() != r.SpanID() || c.TraceID() != r.TraceID() ||
		[16]byte(r.TraceID()) != [16]byte(root.SpanContext().TraceID()) || [8]byte(r.SpanID()) != [8]byte(root.SpanContext().SpanID()) {
		t.Fatalf("spans %v", spans)
	}
	if p, _ := r.Attributes().Get("loadgen.protocol"); p.Str() != "grpc" {
		t.Fatalf("attributes %v", r.Attributes().AsRaw())
	}
	if n, _ := r.Attributes().Get("loadgen.call"); n.Int() != 7 {
		t.Fatalf("attributes %v", r.Attributes().AsRaw())
	}
	if r.Status().Code() != ptrace.StatusCodeError || r.Status().Message() != "HTTP 503" || r.EndTimestamp() <= r.StartTimestamp() {
		t.Fatalf("status %v %q, times %v..%v", r.Status().Code(), r.Status().Message(), r.StartTimestamp(), r.EndTimestamp())
	}
}

func TestRefusesTLSAndPaths(t *testing.T) {
	for _, bad := range []string{"", "https://127.0.0.1:4317", "http://127.0.0.1:4317/v1/traces"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}
