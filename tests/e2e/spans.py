"""Spans by service in a trace (issue 34): the services trace themselves too, so a call's trace
holds Envoy's span (service wirelens-envoy), the service's SERVER span and, with a client span,
that one. A test about wirelens' span picks it by service name; "the trace is in Jaeger" is not
"Envoy's span is in Jaeger" (the services flush every 500 ms, Envoy on its own timer)."""

from __future__ import annotations

ENVOY = "wirelens-envoy"


def service_of(trace: dict, span: dict) -> str | None:
    """The service name of a span of a Jaeger API trace."""
    return trace.get("processes", {}).get(span.get("processID"), {}).get("serviceName")


def spans_of(trace: dict | None, service: str = ENVOY) -> list[dict]:
    """The spans of one service in a Jaeger API trace (none while the trace is missing)."""
    return [span for span in (trace or {}).get("spans", []) if service_of(trace, span) == service]


def only(trace: dict | None, service: str = ENVOY) -> dict | None:
    """The trace with only the spans of one service (None while it has none of them)."""
    spans = spans_of(trace, service)
    return {**trace, "spans": spans} if spans else None
