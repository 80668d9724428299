// Package otlpexport sends loadgen's client spans to an OTLP/gRPC endpoint
// (the Collector) with the collector's pdata client, as an SDK span exporter.
//
// Not otlptracegrpc: that exporter links grpc-go's gzip compressor, and a
// grpc-go client advertises every registered compressor on every call
// (grpc-accept-encoding: gzip), which would change the request header bytes
// of the gRPC calls loadgen measures. This exporter registers no compressor.
package otlpexport

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Exporter is an sdktrace.SpanExporter over OTLP/gRPC (plaintext).
type Exporter struct {
	conn   *grpc.ClientConn
	client ptraceotlp.GRPCClient
}

// New connects (lazily) to endpoint: host:port or http://host:port.
func New(endpoint string) (*Exporter, error) {
	target := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/")
	if target == "" || strings.Contains(target, "/") || strings.HasPrefix(endpoint, "https://") {
		return nil, fmt.Errorf("OTLP endpoint %q: want host:port or http://host:port (plaintext gRPC)", endpoint)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("OTLP endpoint %s: %w", endpoint, err)
	}
	return &Exporter{conn: conn, client: ptraceotlp.NewGRPCClient(conn)}, nil
}

// ExportSpans sends one OTLP request holding spans.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	_, err := e.client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(Traces(spans)))
	return err
}

// Shutdown closes the connection.
func (e *Exporter) Shutdown(context.Context) error { return e.conn.Close() }

// Traces converts SDK spans to OTLP: one resource and one scope per span's
// (loadgen has one of each), ids, parent, name, kind, times, attributes, status.
func Traces(spans []sdktrace.ReadOnlySpan) ptrace.Traces {
	td := ptrace.NewTraces()
	type key struct {
		res   attribute.Distinct
		scope string
	}
	scopes := map[key]ptrace.SpanSlice{}
	for _, s := range spans {
		k := key{s.Resource().Equivalent(), s.InstrumentationScope().Name}
		out, ok := scopes[k]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			putAttributes(rs.Resource().Attributes(), s.Resource().Attributes())
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(s.InstrumentationScope().Name)
			ss.Scope().SetVersion(s.InstrumentationScope().Version)
			out = ss.Spans()
			scopes[k] = out
		}
		span := out.AppendEmpty()
		sc := s.SpanContext()
		span.SetTraceID(pcommon.TraceID(sc.TraceID()))
		span.SetSpanID(pcommon.SpanID(sc.SpanID()))
		span.SetFlags(uint32(sc.TraceFlags()))
		span.TraceState().FromRaw(sc.TraceState().String())
		if p := s.Parent(); p.IsValid() {
			span.SetParentSpanID(pcommon.SpanID(p.SpanID()))
		}
		span.SetName(s.Name())
		span.SetKind(kind(s.SpanKind()))
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime()))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime()))
		putAttributes(span.Attributes(), s.Attributes())
		switch s.Status().Code {
		case codes.Error:
			span.Status().SetCode(ptrace.StatusCodeError)
			span.Status().SetMessage(s.Status().Description)
		case codes.Ok:
			span.Status().SetCode(ptrace.StatusCodeOk)
		}
	}
	return td
}

func kind(k trace.SpanKind) ptrace.SpanKind {
	switch k {
	case trace.SpanKindClient:
		return ptrace.SpanKindClient
	case trace.SpanKindServer:
		return ptrace.SpanKindServer
	case trace.SpanKindProducer:
		return ptrace.SpanKindProducer
	case trace.SpanKindConsumer:
		return ptrace.SpanKindConsumer
	case trace.SpanKindInternal:
		return ptrace.SpanKindInternal
	}
	return ptrace.SpanKindUnspecified
}

func putAttributes(m pcommon.Map, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.STRING:
			m.PutStr(k, kv.Value.AsString())
		default: // slices: their string form
			m.PutStr(k, kv.Value.Emit())
		}
	}
}
