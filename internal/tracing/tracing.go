// Package tracing sets up OpenTelemetry tracing the way an application
// would: the SDK's tracer provider with a batching OTLP/gRPC exporter, the
// W3C trace-context and baggage propagators, and OpenTelemetry's own
// instrumentation of net/http (otelhttp) and grpc-go (otelgrpc).
//
// The switch is WIRELENS_SERVICE_TRACING:
//
//	on    the SDK is installed; spans go to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
//	      OTEL_EXPORTER_OTLP_ENDPOINT (the exporter's default, localhost:4317, when neither is set)
//	off   no SDK at all: no provider, no propagator, handlers left unwrapped
//	unset on when an OTLP endpoint variable is set (the local stack sets them), off otherwise,
//	      so a server started by hand or by a bench does not send spans to whatever listens on 4317
//
// The exporter reads the standard OTEL_* variables (endpoint, headers,
// timeout; an http:// endpoint is plaintext); OTEL_EXPORTER_OTLP_PROTOCOL must
// be grpc (or unset). OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// service (the program's default name otherwise); OTEL_TRACES_SAMPLER and
// OTEL_BSP_* are read by the SDK (default: parent-based, always on).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
)

// SwitchEnv is the environment variable that turns service tracing on or off.
const SwitchEnv = "WIRELENS_SERVICE_TRACING"

// Tracing is the process's tracing: Enabled false means no SDK was installed.
type Tracing struct {
	Enabled  bool
	Provider *sdktrace.TracerProvider // nil when not Enabled
	Service  string                   // the service.name spans carry
}

// Wanted reads the switch: whether tracing should be set up, from the
// environment lookup getenv (os.Getenv in Setup).
func Wanted(getenv func(string) string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(getenv(SwitchEnv))); v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("%s=%q: expected on or off", SwitchEnv, v)
	}
}

// Setup installs the SDK as the global tracer provider and the W3C
// propagators, unless the switch says off. defaultService is the
// service.name unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names
// one. Call Shutdown before exiting: it flushes the spans still queued.
func Setup(ctx context.Context, defaultService string) (*Tracing, error) {
	on, err := Wanted(os.Getenv)
	if err != nil || !on {
		return &Tracing{}, err
	}
	tp, service, err := NewProvider(ctx, defaultService, "")
	if err != nil {
		return nil, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	slog.Info("service tracing on", "service", service, "switch", SwitchEnv)
	return &Tracing{Enabled: true, Provider: tp, Service: service}, nil
}

// NewProvider builds an SDK tracer provider exporting OTLP/gRPC in batches,
// without installing it globally: to endpointURL (e.g. http://127.0.0.1:4317,
// plaintext) or, when empty, where the OTEL_EXPORTER_OTLP_* variables say.
// It returns the service.name its spans carry (OTEL_SERVICE_NAME wins over
// defaultService).
func NewProvider(ctx context.Context, defaultService, endpointURL string) (*sdktrace.TracerProvider, string, error) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(name); p != "" && p != "grpc" {
			return nil, "", fmt.Errorf("%s=%q: only grpc is built in", name, p)
		}
	}
	// Later options win: the environment overrides the program's default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", defaultService)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		return nil, "", fmt.Errorf("tracing resource: %w", err)
	}
	var opts []otlptracegrpc.Option
	if endpointURL != "" {
		opts = append(opts, otlptracegrpc.WithEndpointURL(endpointURL))
	}
	exp, err := otlptracegrpc.New(ctx, opts...) // connects lazily: a Collector that is down only delays spans
	if err != nil {
		return nil, "", fmt.Errorf("OTLP trace exporter: %w", err)
	}
	service := defaultService
	for _, kv := range res.Attributes() {
		if kv.Key == "service.name" {
			service = kv.Value.AsString()
		}
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), service, nil
}

// Shutdown flushes queued spans and stops the exporter (no-op when off).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return errors.Join(t.Provider.ForceFlush(ctx), t.Provider.Shutdown(ctx))
}

// Tracer returns a named tracer of this process's provider (a no-op tracer when off).
func (t *Tracing) Tracer(name string) trace.Tracer {
	if t == nil || t.Provider == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return t.Provider.Tracer(name)
}

// HTTPHandler wraps h in otelhttp's server instrumentation (span names
// "METHOD /route" from the ServeMux pattern); GET /healthz is not traced.
// When tracing is off, h is returned as it is.
func (t *Tracing) HTTPHandler(h http.Handler, operation string) http.Handler {
	if t == nil || !t.Enabled {
		return h
	}
	return otelhttp.NewHandler(h, operation,
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" }))
}

// GRPCServerOptions returns the grpc.Server options of otelgrpc's server
// instrumentation (the stats handler); health checks are not traced. None
// when tracing is off.
func (t *Tracing) GRPCServerOptions() []grpc.ServerOption {
	if t == nil || !t.Enabled {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))))}
}
