"""The Python and JVM pairs trace themselves as users trace such services (issue 34 item 1):
OpenTelemetry's FastAPI and grpcio instrumentation (services/python/wirelens_py/tracing.py), the
OpenTelemetry Java agent in the JVMs (WebFlux, Web MVC, grpc-java), all exporting to the stack's
Collector. One call per server, each with a sampled W3C `traceparent` of the test's own: in Jaeger's
API and in otel.otel_traces the call's trace holds Envoy's span (wirelens-envoy, a child of the
test's context) and the service's SERVER span as its child. With WIRELENS_SERVICE_TRACING=off (a
stack of this module's own) no service sends a span at all, and no JVM runs the agent.

The Go pair and the six protocols: tests/e2e/test_traces.py.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
from pathlib import Path

import grpc
import pytest

from deploy.local import lifecycle
from deploy.local.components import SERVICE_NAMES
from deploy.local.settings import read_pid
from tests.e2e.conftest import ARTIFACTS, jaeger_trace, rows, stack_on_free_ports
from tests.e2e.test_local_stack import HELLO_REPLY, HELLO_REQUEST, REST_REPLY, REST_REQUEST, STACK_HEADER
from wirelens_helpers.wait import wait_for

ENVOY = "wirelens-envoy"
# (x-wirelens-stack, transport, the component serving it): one call each.
CALLS = [
    ("python", "rest", "python-rest-service"),
    ("python", "grpc", "python-grpc-service"),
    ("jvm", "rest", "jvm-rest-service"),
    ("jvm-mvc", "rest", "jvm-mvc-rest-service"),
    ("jvm", "grpc", "jvm-grpc-service"),
]
SERVICES = [SERVICE_NAMES[component] for _, _, component in CALLS]
DEADLINE_S = 60


def call(settings: dict[str, str], stack_name: str, transport: str) -> tuple[str, str]:
    """One hello through Envoy with a sampled client context of its own: (trace id, client span id)."""
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": f"00-{trace_id}-{parent}-01", STACK_HEADER: stack_name}
    port = int(settings["WIRELENS_ENVOY_PORT"])
    if transport == "rest":
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("POST", "/v1/hello", body=REST_REQUEST, headers={"content-type": "application/json", **headers})
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, REST_REPLY), stack_name
        finally:
            conn.close()
    else:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply, rpc = channel.unary_unary("/wirelens.v1.Hello/SayHello").with_call(
                HELLO_REQUEST, timeout=30, metadata=list(headers.items()))
        assert rpc.code() == grpc.StatusCode.OK and reply == HELLO_REPLY, stack_name
    return trace_id, parent


def jaeger_spans(settings: dict[str, str], trace_id: str) -> list[dict]:
    """The trace's spans from Jaeger's API as {service, id, parent, kind, tags}."""
    trace = jaeger_trace(f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}", trace_id) or {}
    processes = trace.get("processes", {})
    out = []
    for span in trace.get("spans", []):
        tags = {t["key"]: t["value"] for t in span.get("tags", [])}
        parents = [r["spanID"] for r in span.get("references", []) if r.get("refType") == "CHILD_OF"]
        out.append({"service": processes[span["processID"]]["serviceName"], "id": span["spanID"],
                    "parent": parents[0] if parents else "", "kind": tags.get("span.kind", ""), "tags": tags,
                    "name": span["operationName"]})
    return out


def table_spans(settings: dict[str, str], trace_id: str) -> list[dict]:
    """The trace's spans from otel.otel_traces as {service, id, parent, kind, name}."""
    return [{"service": s, "id": i, "parent": p, "kind": k.lower(), "name": n} for s, i, p, k, n in rows(
        settings, "SELECT ServiceName, SpanId, ParentSpanId, SpanKind, SpanName FROM otel.otel_traces "
                  f"WHERE TraceId = '{trace_id}' ORDER BY Timestamp")]


def has_envoy_span(spans: list[dict]) -> bool:
    return any(s["service"] == ENVOY for s in spans)


def has_service_server_span(service: str):
    return lambda spans: any(s["service"] == ENVOY for s in spans) and \
        any(s["service"] == service and s["kind"].endswith("server") for s in spans)


def check_tree(spans: list[dict], parent: str, service: str, where: str) -> None:
    """Envoy's one span is the client context's child; the service's one SERVER span is Envoy's child,
    and every other span of the service descends from it."""
    envoy = [s for s in spans if s["service"] == ENVOY]
    assert len(envoy) == 1, f"{where}: {len(envoy)} spans of {ENVOY}: {spans}"
    assert envoy[0]["parent"] == parent, f"{where}: Envoy's span's parent is {envoy[0]['parent']!r}, not {parent}"
    mine = [s for s in spans if s["service"] == service]
    servers = [s for s in mine if s["kind"].endswith("server")]
    assert len(servers) == 1, f"{where}: {len(servers)} SERVER spans of {service}: {mine}"
    assert servers[0]["parent"] == envoy[0]["id"], \
        f"{where}: {service}'s server span's parent is {servers[0]['parent']!r}, not Envoy's span {envoy[0]['id']}"
    by_id = {s["id"]: s for s in mine}
    for span in mine:
        node = span
        while node["id"] != servers[0]["id"]:
            assert node["parent"] in by_id, f"{where}: {service} span {span['name']!r} is not under its server span"
            node = by_id[node["parent"]]
    others = {s["service"] for s in spans} - {ENVOY, service}
    assert not others, f"{where}: spans of other services {others} in the trace"


def test_python_and_jvm_server_spans_are_children_of_envoys(local_stack):
    settings = local_stack
    assert settings["WIRELENS_SERVICE_TRACING"] == "on"
    sent = [(stack_name, transport, SERVICE_NAMES[component], *call(settings, stack_name, transport))
            for stack_name, transport, component in CALLS]
    trees = {}
    for stack_name, transport, service, trace_id, parent in sent:
        where = f"{stack_name} {transport} call, trace {trace_id}"
        spans = wait_for(f"Envoy's and {service}'s server span of the {where} in Jaeger",
                         lambda: jaeger_spans(settings, trace_id), has_service_server_span(service),
                         timeout_s=DEADLINE_S, interval_s=0.5)
        check_tree(spans, parent, service, f"Jaeger, {where}")
        envoy = next(s for s in spans if s["service"] == ENVOY)
        assert envoy["tags"].get("wirelens.operation") == "hello.SayHello", envoy["tags"]
        spans = wait_for(f"Envoy's and {service}'s server span of the {where} in otel.otel_traces",
                         lambda: table_spans(settings, trace_id), has_service_server_span(service),
                         timeout_s=DEADLINE_S, interval_s=0.5)
        check_tree(spans, parent, service, f"otel.otel_traces, {where}")
        trees[where] = spans
    # For whoever reads a run: each call's spans (service, id, parent, kind, name), from otel.otel_traces.
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "service-traces.json").write_text(json.dumps(trees, indent=1) + "\n")


@pytest.fixture(scope="module")
def untraced_stack(tmp_path_factory):
    """The Python and JVM pairs (and the Go pair) with WIRELENS_SERVICE_TRACING=off."""
    with stack_on_free_ports(tmp_path_factory.mktemp("untraced-stack"), "e2e-untraced",
                             WIRELENS_STACKS="go,python,jvm", WIRELENS_SERVICE_TRACING="off") as settings:
        yield settings
    os.environ.pop("WIRELENS_STATE_DIR", None)


def test_tracing_off_sends_no_service_span(untraced_stack):
    settings = untraced_stack
    # No JVM runs the agent.
    for component in ("jvm-rest-service", "jvm-mvc-rest-service", "jvm-grpc-service"):
        pid = read_pid(settings, component)
        assert pid, f"{component} is not running"
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert not any(a.startswith(b"-javaagent") for a in argv), f"{component} runs with an agent: {argv}"
    sent = [(stack_name, transport, *call(settings, stack_name, transport)) for stack_name, transport, _ in CALLS]
    # Each call's span from Envoy arrives: the trace pipeline works on this stack.
    for stack_name, transport, trace_id, parent in sent:
        spans = wait_for(f"Envoy's span of the {stack_name} {transport} call (trace {trace_id}) in Jaeger",
                         lambda: jaeger_spans(settings, trace_id), has_envoy_span, timeout_s=DEADLINE_S, interval_s=0.5)
        assert [s["parent"] for s in spans if s["service"] == ENVOY] == [parent], spans
    # Stop the services: a traced one would flush what it holds as it exits. Then a marker call
    # (to the Go pair, also untraced): once its Envoy span is in Jaeger and in otel.otel_traces,
    # whatever the services sent before they exited has been through the Collector too.
    for _, _, component in CALLS:
        lifecycle.stop(component, settings)
    marker, _ = call(settings, "go", "rest")
    wait_for(f"the marker call's span (trace {marker}) in Jaeger", lambda: jaeger_spans(settings, marker),
             has_envoy_span, timeout_s=DEADLINE_S, interval_s=0.5)
    wait_for(f"the marker call's span (trace {marker}) in otel.otel_traces", lambda: table_spans(settings, marker),
             has_envoy_span, timeout_s=DEADLINE_S, interval_s=0.5)
    for stack_name, transport, trace_id, _ in sent:
        services = {s["service"] for s in jaeger_spans(settings, trace_id)} | \
                   {s["service"] for s in table_spans(settings, trace_id)}
        assert services == {ENVOY}, f"{stack_name} {transport} call, trace {trace_id}: spans of {services}"
    everything = dict(rows(settings, "SELECT ServiceName, toString(count()) FROM otel.otel_traces GROUP BY ServiceName"))
    assert set(everything) == {ENVOY}, f"otel.otel_traces holds spans of {everything}"
