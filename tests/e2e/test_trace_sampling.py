"""End to end (issue 34 items 3 and 5): rows that know whether their trace exists, and the time split in µs.

Clients send W3C `traceparent` headers by hand, sampled (flags 01) and not (flags 00), over REST and
gRPC-Web through the local stack's Envoy (tracing random_sampling 100 %, so the client's flag decides).
Every call is a row; `span_sampled` is exactly the flag the client sent; Envoy's span reaches
otel.otel_traces and Jaeger for the sampled calls only; `wirelens report`, `wirelens trace` and the
demo's link picker (deploy/local/demo.py traces_to_link) link only calls whose span exists and say why
the others have none. The same rows carry the upstream/Envoy split in microseconds
(envoy_duration_us, upstream_duration_us) from Envoy's %COMMON_DURATION%.

Envoy's own random_sampling is the other way a call loses its span: a bare Envoy (tests/e2e/bare_envoy.py) with
the stack's access-log attributes and tracer at random_sampling 0 and 100 shows what the column is read from.

Reuses the session's local_stack (no stack of its own): a few seconds in `make test`.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import uuid

import pytest

from deploy.local import demo
from envoy import wiring
from tests.e2e import bare_envoy
from tests.e2e.conftest import ROOT, free_ports, jaeger_trace, rows
from wirelens_helpers.wait import wait_for

WIRELENS = ROOT / "bin" / "wirelens"
ENVOY_SERVICE = "wirelens-envoy"
# (protocol, client's sampled flag) per call, interleaved; the last call is sampled: once its span is in
# ClickHouse, every span Envoy sent before it is too (one Envoy worker exports in order).
CALLS = [("rest", "01"), ("rest", "00"), ("grpc-web", "00"), ("grpc-web", "01"), ("rest", "00"), ("rest", "01"),
         ("grpc-web", "01"), ("rest", "00"), ("grpc-web", "00"), ("rest", "01"), ("rest", "00"), ("rest", "01")]


def call(settings, protocol: str, run_id: str, traceparent: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=30)
    headers = {"x-wirelens-run": run_id, "traceparent": traceparent}
    if protocol == "rest":
        conn.request("POST", "/v1/hello", body=b'{"name":"h5"}', headers={**headers, "content-type": "application/json"})
    else:
        message = b"\x0a\x02h5"  # HelloRequest{name: "h5"}
        conn.request("POST", "/wirelens.v1.Hello/SayHello", body=b"\x00" + len(message).to_bytes(4, "big") + message,
                     headers={**headers, "content-type": "application/grpc-web+proto", "x-grpc-web": "1"})
    response = conn.getresponse()
    body = response.read()
    conn.close()
    assert response.status == 200, (protocol, response.status, body[:200])


@pytest.fixture(scope="module")
def sampled_mix(local_stack):
    settings = local_stack
    run_id = f"e2e-trace-sampling-{uuid.uuid4().hex[:8]}"
    sent: dict[str, tuple[str, bool]] = {}  # trace id -> (protocol, sampled by the client)
    for protocol, flags in CALLS:
        trace_id = uuid.uuid4().hex
        call(settings, protocol, run_id, f"00-{trace_id}-{uuid.uuid4().hex[:16]}-{flags}")
        sent[trace_id] = (protocol, flags == "01")
    wait_for(f"{len(CALLS)} rows of run {run_id} in wirelens.requests",
             lambda: rows(settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'"),
             lambda r: int(r[0][0]) >= len(CALLS), timeout_s=120)
    return {"settings": settings, "run_id": run_id, "sent": sent,
            "sampled": {t for t, (_, s) in sent.items() if s}, "unsampled": {t for t, (_, s) in sent.items() if not s},
            "clickhouse": f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
            "jaeger": f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"}


def test_span_sampled_is_the_clients_flag_and_the_split_is_in_microseconds(sampled_mix):
    settings, run_id, sent = sampled_mix["settings"], sampled_mix["run_id"], sampled_mix["sent"]
    got = rows(settings, "SELECT trace_id, protocol, span_sampled, envoy_duration_us, upstream_duration_us, duration_us, "
                         f"envoy_duration_ms FROM wirelens.requests FINAL WHERE run_id = '{run_id}'")
    assert len(got) == len(CALLS), got
    # Exactly the client's flag, per call, and the trace id Envoy continued is the client's.
    assert {r[0]: (r[1], r[2] == "true") for r in got} == sent, got
    for trace_id, protocol, _, envoy_us, upstream_us, filter_us, envoy_ms in got:
        # Microseconds from Envoy's clock: both present, the upstream exchange inside the call at Envoy,
        # and Envoy's own part (their difference) a positive number of µs.
        assert envoy_us != "\\N" and upstream_us != "\\N", (trace_id, envoy_us, upstream_us)
        assert 0 < int(upstream_us) < int(envoy_us), (trace_id, protocol, envoy_us, upstream_us)
        # The same span of time as the millisecond column (%DURATION%, whole ms, rounded its own way).
        assert abs(int(envoy_us) / 1000 - int(envoy_ms)) <= 1, (trace_id, envoy_us, envoy_ms)


def test_only_sampled_calls_have_a_span(sampled_mix):
    settings, sampled, unsampled = sampled_mix["settings"], sampled_mix["sampled"], sampled_mix["unsampled"]
    ids = ", ".join(f"'{t}'" for t in sampled | unsampled)

    def spans() -> dict[str, int]:
        return {t: int(n) for t, n in rows(settings, f"SELECT TraceId, count() FROM otel.otel_traces WHERE "
                                                     f"ServiceName = '{ENVOY_SERVICE}' AND TraceId IN ({ids}) GROUP BY TraceId")}
    seen = wait_for(f"Envoy's spans of the {len(sampled)} sampled calls in otel.otel_traces", spans,
                    lambda s: sampled <= set(s), timeout_s=120)
    # The last call sent was sampled and its span is in: the spans of the unsampled calls, sent before it, would be too.
    assert set(seen) == sampled and all(n == 1 for n in seen.values()), seen
    jaeger = sampled_mix["jaeger"]
    for trace_id in sampled:
        trace = wait_for(f"trace {trace_id} in Jaeger", lambda t=trace_id: jaeger_trace(jaeger, t), timeout_s=60)
        assert any(p["serviceName"] == ENVOY_SERVICE for p in trace["processes"].values()), trace
    for trace_id in unsampled:
        assert jaeger_trace(jaeger, trace_id) is None, f"trace {trace_id} (client flag 00) is in Jaeger"


def wirelens(*args: str) -> subprocess.CompletedProcess:
    if not WIRELENS.exists():
        pytest.fail(f"{WIRELENS} is missing: run `make services` (go build -trimpath -o bin/ ./cli/cmd/wirelens)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WIRELENS_", "CLICKHOUSE_"))}
    return subprocess.run([str(WIRELENS), *args], capture_output=True, text=True, timeout=120, env=env)


def test_report_trace_and_demo_link_only_calls_with_a_span(sampled_mix, tmp_path):
    sampled, unsampled, run_id = sampled_mix["sampled"], sampled_mix["unsampled"], sampled_mix["run_id"]
    jaeger, clickhouse = sampled_mix["jaeger"], sampled_mix["clickhouse"]
    html = tmp_path / "report.html"
    report = wirelens("report", "--run", run_id, "--clickhouse-url", clickhouse, "--jaeger-url", jaeger,
                      "--html", str(html))
    assert report.returncode == 0, report.stdout + report.stderr
    page = html.read_text()
    linked = set(re.findall(rf'href="{re.escape(jaeger)}/trace/([0-9a-f]{{32}})"', page))
    assert linked == sampled, (sorted(linked), sorted(sampled))
    assert page.count('class="null no-span"') == len(unsampled), page
    assert f"{len(unsampled)} of these {len(CALLS)} calls have no span" in report.stdout, report.stdout
    assert f"Not linked ({len(unsampled)} of {len(CALLS)})" in report.stdout, report.stdout
    printed_links = set(re.findall(rf"{re.escape(jaeger)}/trace/([0-9a-f]{{32}})", report.stdout))
    assert printed_links and printed_links <= sampled, report.stdout

    no_span = wirelens("trace", next(iter(unsampled)), "--jaeger-url", jaeger, "--clickhouse-url", clickhouse)
    assert no_span.returncode == 1 and "has no span in Jaeger" in no_span.stderr \
        and "span_sampled = false" in no_span.stderr, no_span.stdout + no_span.stderr
    one = next(iter(sampled))
    found = wirelens("trace", one, "--jaeger-url", jaeger, "--clickhouse-url", clickhouse)
    assert found.returncode == 0 and found.stdout.endswith(f"\nIn Jaeger's UI: {jaeger}/trace/{one}\n"), \
        found.stdout + found.stderr

    # The demo links, per protocol, one call whose span exists, and counts the others.
    picked = demo.traces_to_link(sampled_mix["settings"], run_id)
    by_protocol = {p: sum(1 for t, (q, s) in sampled_mix["sent"].items() if q == p and not s) for p in ("rest", "grpc-web")}
    assert {p: n for p, (_, n) in picked.items()} == by_protocol, picked
    assert all(t in sampled and sampled_mix["sent"][t][0] == p for p, (t, _) in picked.items()), picked
    print(json.dumps({"run": run_id, "sampled": len(sampled), "unsampled": len(unsampled), "demo": picked}))


CORS = {"name": "envoy.filters.http.cors",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}}


@pytest.mark.parametrize("sampling", [0, 100])
def test_envoys_random_sampling_shows_in_the_traceparent_it_logs(local_stack, tmp_path, sampling):
    """What span_sampled is read from, at Envoy's random_sampling 0 and 100 %: Envoy logs a trace id for every
    call, sampled or not (%TRACE_ID% cannot tell), and the traceparent it injected upstream carries its final
    decision in the flags: at 0 % none is sampled, the client's 01 included; at 100 % the client's flag decides,
    and a call without a context is sampled. Measured on Envoy 1.40."""
    port, admin, dead = free_ports(3)
    log = tmp_path / "access.jsonl"
    config = bare_envoy.config(port=port, admin=admin, http_filter=CORS, routes=[("/", "rest")],
                               clusters={"rest": (int(local_stack["WIRELENS_REST_PORT"]), False),
                                         wiring.OTEL_COLLECTOR_CLUSTER: (dead, True)},  # no Collector: spans go nowhere
                               access_log=log, log_format={"trace_id": "%TRACE_ID%",
                                                           **{k: v for k, v in wiring.access_log_attributes().items()
                                                              if k.startswith("envoy.")}})
    config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]["tracing"] = \
        wiring.tracing(sampling=sampling)
    envoy = bare_envoy.start(f"Envoy at random_sampling {sampling}", config, tmp_path)
    clients = {"none": None, "01": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01",
               "00": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00"}
    try:
        for client, traceparent in clients.items():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            # No x-request-id of the client's: Envoy keeps its trace decision in the UUID it generates (a
            # client's non-UUID x-request-id, kept on this internal listener, turned every call unsampled).
            conn.request("POST", "/v1/hello", body=b'{"name":"h5"}', headers={
                "content-type": "application/json", **({"traceparent": traceparent} if traceparent else {})})
            response = conn.getresponse()
            response.read()
            conn.close()
            assert response.status == 200, (client, response.status)
    finally:
        envoy.stop(grace_s=10)
    # Envoy writes its buffered access log out when it stops (its file flush interval is 10 s by default).
    lines = bare_envoy.logged(log)
    assert len(lines) == 3, f"{len(lines)} access-log lines after Envoy stopped, want 3: {lines}"
    flags = {}
    for line in lines:
        tp = line["envoy.traceparent"]
        assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]", tp) and tp[3:35] == line["trace_id"], line
        client = next((c for c, t in clients.items() if t and t[3:35] == line["trace_id"]), "none")
        flags[client] = tp[-2:]
        assert int(line["envoy.duration_us"]) > int(line["envoy.upstream_duration_us"]) > 0, line
    assert flags == ({"none": "00", "01": "00", "00": "00"} if sampling == 0 else {"none": "01", "01": "01", "00": "00"})
