"""The Python pair's own tracing (issue 34): OpenTelemetry's SDK and its instrumentation of FastAPI
and grpcio, as a user of these frameworks would trace them, exporting spans over OTLP/gRPC.

    WIRELENS_SERVICE_TRACING   on | off: off imports no OpenTelemetry SDK at all. Unset: on when an
                               OTLP endpoint is set (the local stack sets both), off otherwise, so that a
                               server started by hand (tests/unit) sends nothing to 127.0.0.1:4317
                               (as the Go servers, internal/tracing)
    OTEL_SERVICE_NAME          the service's name (default: the server's, wirelens-py-rest / wirelens-py-grpc)
    OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_INSECURE, ...
                               read by the SDK's exporter as usual (http://host:port is plaintext)
    OTEL_EXPORTER_OTLP_PROTOCOL grpc (the only one installed; anything else is refused at start)

The context comes in as W3C `traceparent` (the SDK's default propagators, tracecontext and
baggage): behind Envoy, the service's server span is the child of Envoy's span. Spans leave in
batches (BatchSpanProcessor); the provider flushes them when the process exits.
"""

from __future__ import annotations

import os

SWITCH = "WIRELENS_SERVICE_TRACING"
VALUES = ("on", "off")


def mode(environ: dict[str, str] | None = None) -> str:
    """The switch's value (unset: on if an OTLP endpoint is set), or SystemExit naming a bad one."""
    environ = os.environ if environ is None else environ
    value = environ.get(SWITCH, "").strip().lower()
    if not value:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return "on" if endpoint else "off"
    if value not in VALUES:
        raise SystemExit(f"{SWITCH}={value!r}: expected one of {', '.join(VALUES)}")
    return value


def provider(default_service_name: str, environ: dict[str, str] | None = None):
    """A TracerProvider exporting to the OTLP endpoint of the environment, or None when tracing is off
    (then no OpenTelemetry SDK module is imported)."""
    environ = dict(os.environ if environ is None else environ)
    if mode(environ) == "off":
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    if protocol != "grpc":
        raise SystemExit(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: the Python pair exports OTLP over grpc only")
    # Imported here, so that tracing off loads none of it.
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    name = environ.get("OTEL_SERVICE_NAME") or default_service_name
    tracer_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return tracer_provider


def instrument_fastapi(app, default_service_name: str = "wirelens-py-rest") -> None:
    """FastAPI's own instrumentation on app (server spans named by route), readiness probes left out, and
    without its per-message `http send` / `http receive` spans: one span per call, as the other servers."""
    tracer_provider = provider(default_service_name)
    if tracer_provider is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor  # noqa: PLC0415

    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider, excluded_urls="/healthz",
                                       exclude_spans=["receive", "send"])


def grpc_interceptors(default_service_name: str = "wirelens-py-grpc") -> list:
    """grpcio's server interceptor from OpenTelemetry's instrumentation, or none when tracing is off."""
    tracer_provider = provider(default_service_name)
    if tracer_provider is None:
        return []
    from opentelemetry.instrumentation.grpc import server_interceptor  # noqa: PLC0415

    return [server_interceptor(tracer_provider=tracer_provider)]
