"""One trace per call, parent and child right (issue 34 item 2), for the six protocols.

loadgen -trace sampled starts a CLIENT span per call (service wirelens-loadgen) and sends its
context; Envoy's span (wirelens-envoy, with the wirelens tags) is that span's child; the Go
service's SERVER span (wirelens-rest-server for rest and rest-proto, wirelens-grpc-server for
grpc, grpc-web, grpc-web-text and rest-transcoded: Envoy translates those to gRPC) is the proxy
span's child; nothing else is in the trace. Checked in Jaeger's API and in otel.otel_traces.
With no client context (loadgen -trace off) Envoy's span is the root and the service joins it.

Runs on the session's local stack (its Go services trace themselves: WIRELENS_SERVICE_TRACING
defaults to on). 2 sampled calls and 1 call without context per protocol.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, jaeger_trace, rows
from wirelens_helpers.wait import wait_for

CLIENT, ENVOY = "wirelens-loadgen", "wirelens-envoy"
REST_SERVER, GRPC_SERVER = "wirelens-rest-server", "wirelens-grpc-server"
# recorded protocol: (loadgen -protocol, Envoy port setting, the service that answers, its span's name)
PROTOCOLS = {
    "rest": ("rest", "WIRELENS_ENVOY_PORT", REST_SERVER, "POST /v1/hello"),
    "rest-proto": ("rest-proto", "WIRELENS_ENVOY_PORT", REST_SERVER, "POST /v1/hello"),
    "grpc": ("grpc", "WIRELENS_ENVOY_PORT", GRPC_SERVER, "wirelens.v1.Hello/SayHello"),
    "grpc-web": ("grpc-web", "WIRELENS_ENVOY_PORT", GRPC_SERVER, "wirelens.v1.Hello/SayHello"),
    "grpc-web-text": ("grpc-web-text", "WIRELENS_ENVOY_PORT", GRPC_SERVER, "wirelens.v1.Hello/SayHello"),
    "rest-transcoded": ("rest", "WIRELENS_ENVOY_TRANSCODE_PORT", GRPC_SERVER, "wirelens.v1.Hello/SayHello"),
}
SAMPLED_CALLS = 2  # per protocol
OPERATION = "hello.SayHello"
DEADLINE_S = 90


def loadgen(settings, protocol: str, mode: str, calls: int, run_id: str, ids: Path) -> list[list[str]]:
    """calls of OPERATION over protocol with -trace mode; the -trace-ids lines (protocol, trace id, flags)."""
    flag, port, _, _ = PROTOCOLS[protocol]
    result = subprocess.run(
        [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port]}", "-protocol", flag,
         "-operation", OPERATION, "-n", str(calls), "-run-id", run_id, "-trace", mode, "-trace-ids", str(ids),
         "-otlp-endpoint", f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}", "-progress", "off"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"loadgen -protocol {flag} -trace {mode}: {result.stderr}"
    return [line.split("\t") for line in ids.read_text().splitlines()]


def jaeger_spans(trace: dict | None) -> list[dict]:
    """A Jaeger API trace's spans as {service, id, parent, kind, name, tags} (parent: the CHILD_OF span, or None)."""
    if not trace:
        return []
    processes = trace.get("processes", {})
    out = []
    for span in trace.get("spans", []):
        tags = {t["key"]: t["value"] for t in span.get("tags", [])}
        parents = [r["spanID"] for r in span.get("references", []) if r.get("refType") == "CHILD_OF"]
        out.append({"service": processes.get(span["processID"], {}).get("serviceName"), "id": span["spanID"],
                    "parent": parents[0] if parents else None, "kind": tags.get("span.kind"),
                    "name": span["operationName"], "tags": tags})
    return out


def table_spans(settings, trace_id: str) -> list[dict]:
    """The trace's spans in otel.otel_traces, in the same shape (kind lower case, parent None for a root)."""
    found = rows(settings, "SELECT ServiceName, SpanId, ParentSpanId, SpanKind, SpanName, "
                           "SpanAttributes['wirelens.protocol'], SpanAttributes['wirelens.operation'], "
                           "SpanAttributes['wirelens.run_id'] "
                           f"FROM otel.otel_traces WHERE TraceId = '{trace_id}'")
    return [{"service": s, "id": i, "parent": p or None, "kind": k.lower().removeprefix("span_kind_"), "name": n,
             "tags": {k2: v for k2, v in (("wirelens.protocol", proto), ("wirelens.operation", op),
                                          ("wirelens.run_id", run)) if v}}
            for s, i, p, k, n, proto, op, run in found]


def spans_of(where: str, fetch, settings, trace_id: str, count: int) -> list[dict]:
    """Poll until the trace has count spans there (under a deadline that names what was missing)."""
    return wait_for(f"{count} spans of trace {trace_id} in {where}", lambda: fetch(settings, trace_id),
                    lambda spans: len(spans) >= count, timeout_s=DEADLINE_S, interval_s=0.5)


def fetch_jaeger(settings, trace_id: str) -> list[dict]:
    return jaeger_spans(jaeger_trace(f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}", trace_id))


def check_tree(spans: list[dict], protocol: str, run_id: str, client: bool, where: str) -> dict[str, dict]:
    """The call's trace is exactly [client →] Envoy → service, with the wirelens tags on Envoy's span."""
    _, _, service, service_span = PROTOCOLS[protocol]
    shape = sorted((s["service"], s["kind"]) for s in spans)
    want = sorted([*([(CLIENT, "client")] if client else []), (ENVOY, "server"), (service, "server")])
    assert shape == want, f"{where}, {protocol}: spans {shape}, want {want}: {spans}"
    by = {s["service"]: s for s in spans}
    proxy, server = by[ENVOY], by[service]
    if client:
        root = by[CLIENT]
        assert root["parent"] is None, f"{where}, {protocol}: the client span has a parent: {root}"
        assert root["name"] == f"{OPERATION} ({PROTOCOLS[protocol][0]})", root
        assert proxy["parent"] == root["id"], f"{where}, {protocol}: Envoy's span is not the client span's child: {spans}"
    else:
        assert proxy["parent"] is None, f"{where}, {protocol}: without client context Envoy's span has a parent: {proxy}"
    assert server["parent"] == proxy["id"], f"{where}, {protocol}: the service span is not Envoy's child: {spans}"
    assert server["name"] == service_span, server
    for key, value in (("wirelens.protocol", protocol), ("wirelens.operation", OPERATION), ("wirelens.run_id", run_id)):
        assert str(proxy["tags"].get(key)) == value, f"{where}, {protocol}: Envoy's span {key}={proxy['tags'].get(key)!r}"
        assert key not in server["tags"], f"{where}: the service span carries {key}"
    return by


@pytest.fixture(scope="module")
def traced(local_stack, tmp_path_factory):
    """SAMPLED_CALLS calls per protocol with a client span each, and one per protocol without
    client context; {"sampled": {protocol: [trace ids]}, "off": {protocol: trace id}, run ids}."""
    settings, tmp = local_stack, tmp_path_factory.mktemp("traces")
    suffix = uuid.uuid4().hex[:8]
    sampled_run, off_run = f"e2e-traces-{suffix}", f"e2e-traces-off-{suffix}"
    sampled: dict[str, list[str]] = {}
    for protocol in PROTOCOLS:
        lines = loadgen(settings, protocol, "sampled", SAMPLED_CALLS, sampled_run, tmp / f"{protocol}.ids")
        assert len(lines) == SAMPLED_CALLS and all(f[2] == "01" for f in lines), lines
        sampled[protocol] = [f[1] for f in lines]
        assert loadgen(settings, protocol, "off", 1, off_run, tmp / f"{protocol}.off.ids") == [], \
            "-trace off wrote a trace id: the client has none"
    # Without client context the trace id is Envoy's: the call's row has it.
    found = wait_for(f"the {len(PROTOCOLS)} rows of run {off_run} in wirelens.requests",
                     lambda: rows(settings, "SELECT protocol, trace_id FROM wirelens.requests FINAL "
                                            f"WHERE run_id = '{off_run}'"),
                     lambda r: len(r) >= len(PROTOCOLS), timeout_s=DEADLINE_S, interval_s=0.5)
    off = dict(found)
    assert sorted(off) == sorted(PROTOCOLS) and len(found) == len(PROTOCOLS), found
    return {"settings": settings, "sampled": sampled, "off": off, "sampled_run": sampled_run, "off_run": off_run}


@pytest.mark.parametrize("where", ["jaeger", "otel_traces"])
def test_client_span_is_the_root_envoy_its_child_the_service_envoys_child(traced, where):
    fetch = fetch_jaeger if where == "jaeger" else table_spans
    trees = {}
    for protocol, trace_ids in traced["sampled"].items():
        for trace_id in trace_ids:
            spans = spans_of(where, fetch, traced["settings"], trace_id, 3)
            check_tree(spans, protocol, traced["sampled_run"], client=True, where=f"{where}, trace {trace_id}")
            trees[trace_id] = {"protocol": protocol, "spans": [{k: span[k] for k in ("service", "id", "parent", "kind",
                                                                                      "name")} for span in spans]}
    # For the record (the closing note): each trace's spans, and one gRPC-Web and one transcoded REST
    # trace as `wirelens trace` prints them from Jaeger's API.
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"traces-six-protocols-{where}.json").write_text(json.dumps(trees, indent=1) + "\n")
    if where == "jaeger":
        jaeger = f"http://127.0.0.1:{traced['settings']['WIRELENS_JAEGER_QUERY_PORT']}"
        for protocol in ("grpc-web", "rest-transcoded"):
            printed = subprocess.run([str(ROOT / "bin" / "wirelens"), "trace", traced["sampled"][protocol][0],
                                      "--jaeger-url", jaeger], capture_output=True, text=True, timeout=60)
            assert printed.returncode == 0, printed.stderr
            (ARTIFACTS / f"traces-{protocol}.txt").write_text(printed.stdout)


@pytest.mark.parametrize("where", ["jaeger", "otel_traces"])
def test_without_client_context_envoy_starts_the_trace_and_the_service_joins(traced, where):
    fetch = fetch_jaeger if where == "jaeger" else table_spans
    for protocol, trace_id in traced["off"].items():
        spans = spans_of(where, fetch, traced["settings"], trace_id, 2)
        check_tree(spans, protocol, traced["off_run"], client=False, where=f"{where}, trace {trace_id}")
