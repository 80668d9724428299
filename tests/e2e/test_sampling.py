"""Sampling that stays honest: a known mix at sample_rate 0.1, weighted back to the truth.

The stack's Envoy is restarted with WIRELENS_SAMPLE_RATE=0.1 (the rest of the
stack keeps running) and 2,000 calls of a known mix go through it: REST and
gRPC, hello.SayHello and catalog.GetProduct, 10 % of the product lookups for
a product that does not exist (HTTP 404, gRPC NOT_FOUND). Once everything
Envoy logged is in ClickHouse (a chain of known points, not a pause: Envoy's
completed requests, its access-log buffer empty, logship's file drained, the
Collector's ClickHouse exporter past every record logship shipped):

- no line of an unsampled call left Envoy: every record of the run in
  otel.otel_logs carries the filter's record (the access log's CEL filter),
  and no 'unknown' row appeared;
- the weighted counts of the saved queries (calls per protocol, per
  operation, errors) lie inside the exact binomial interval of the truth:
  each is 10·X with X ~ Binomial(n, 0.1) for the n calls the test sent;
- the weighted response-body bytes lie inside a normal interval around the
  bytes the clients received; sum_wire_b agrees with the weighted calls;
- `wirelens report` names the sampling and the sample size.

The filter seeds its sampler from the host clock, so the counts differ run to
run. Every interval is two-sided at 0.001 / CHECKS (Bonferroni over the
CHECKS statistical checks): a correct implementation fails this test less
than once in 1000 runs. Envoy is restarted at rate 1 afterwards.
"""

from __future__ import annotations

import http.client
import math
import random
import re
import subprocess
import time
import urllib.request
import uuid
from collections import Counter, defaultdict

import grpc
import pytest

from tests.e2e.conftest import ROOT, rows, stack
from wirelens_helpers.wait import wait_for

from wirelens_helpers import clickhouse  # ClickHouse over HTTP


RATE = 0.1
CHECKS = 11                # the statistical checks below: 2 protocols, 4 operation cells, 2 error cells,
ALPHA = 0.001 / CHECKS     # all recorded calls, 2 byte totals
DEADLINE_S = 120.0
WIRELENS = ROOT / "bin" / "wirelens"

HELLO_REQUEST = b"\x0a\x08wirelens"  # HelloRequest{name: "wirelens"}
PRODUCT_1 = b"\x08\x01"              # GetProductRequest{id: 1}
PRODUCT_0 = b""                      # GetProductRequest{id: 0}: no such product
# (protocol, operation, outcome): calls sent. REST and gRPC 1,000 each.
MIX = {
    ("rest", "hello.SayHello", "ok"): 500,
    ("rest", "catalog.GetProduct", "ok"): 400,
    ("rest", "catalog.GetProduct", "not found"): 100,
    ("grpc", "hello.SayHello", "ok"): 500,
    ("grpc", "catalog.GetProduct", "ok"): 400,
    ("grpc", "catalog.GetProduct", "not found"): 100,
}


# -- the exact binomial interval ---------------------------------------------------------


def binomial_interval(n: int, p: float, alpha: float) -> tuple[int, int]:
    """[lo, hi] with P(X < lo) <= alpha/2 and P(X > hi) <= alpha/2 for X ~ Binomial(n, p) (exact pmf)."""
    log_pmf = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
               + k * math.log(p) + (n - k) * math.log1p(-p) for k in range(n + 1)]
    pmf = [math.exp(v) for v in log_pmf]
    lo, below = 0, 0.0
    while below + pmf[lo] <= alpha / 2:
        below += pmf[lo]
        lo += 1
    hi, above = n, 0.0
    while above + pmf[hi] <= alpha / 2:
        above += pmf[hi]
        hi -= 1
    return lo, hi


def test_binomial_interval_is_exact():
    # Binomial(10, 0.5): P(X <= 1) = 11/1024 = 0.0107, P(X = 0) = 0.00098
    assert binomial_interval(10, 0.5, 0.02) == (1, 9)
    assert binomial_interval(10, 0.5, 0.03) == (2, 8)
    lo, hi = binomial_interval(1000, 0.1, ALPHA)
    assert 55 < lo < 70 and 130 < hi < 145, (lo, hi)


def within_binomial(what: str, weighted: float, n: int) -> str | None:
    lo, hi = binomial_interval(n, RATE, ALPHA)
    if lo / RATE <= weighted <= hi / RATE:
        return None
    return (f"{what}: weighted {weighted:g}, truth {n}; outside the exact binomial interval "
            f"[{lo / RATE:g}, {hi / RATE:g}] (10 x the {1 - ALPHA:.5f} interval of Binomial({n}, {RATE}))")


# -- the stack ---------------------------------------------------------------------------


def envoy_stat(settings, name: str) -> int | None:
    url = f"http://127.0.0.1:{settings['WIRELENS_ENVOY_ADMIN_PORT']}/stats?filter=^{re.escape(name)}$"
    with urllib.request.urlopen(url, timeout=5) as response:
        for line in response.read().decode().splitlines():
            key, _, value = line.partition(": ")
            if key == name:
                return int(value)
    return None


def collector_sent_logs(settings) -> float:
    """Log records the Collector's ClickHouse exporter has written (its own metrics)."""
    _, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("otelcol_exporter_sent_log_records") and 'exporter="clickhouse/logs"' in line)


def shipped(settings) -> int:
    progress = stack.logship_progress(settings)
    assert progress is not None, "logship does not answer on /progress"
    return int(progress["records_shipped"])


@pytest.fixture()
def sampled_envoy(local_stack):
    """The stack's Envoy restarted at RATE; restarted at the stack's own rate afterwards."""
    settings = local_stack
    sampled = {**settings, "WIRELENS_SAMPLE_RATE": str(RATE)}
    stack.stop("envoy", settings)
    try:
        stack.start(stack.BY_NAME["envoy"], sampled)
        yield sampled
    finally:
        stack.stop("envoy", sampled)
        stack.start(stack.BY_NAME["envoy"], settings)


# -- the traffic -------------------------------------------------------------------------


def send_mix(settings, run_id: str) -> tuple[Counter, dict[str, list[int]]]:
    """MIX in a shuffled order; what was sent (checked outcomes) and each call's response body bytes by protocol."""
    calls = [key for key, n in MIX.items() for _ in range(n)]
    random.Random(run_id).shuffle(calls)
    port = int(settings["WIRELENS_ENVOY_PORT"])
    rest = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc_methods = {"hello.SayHello": channel.unary_unary("/wirelens.v1.Hello/SayHello"),
                    "catalog.GetProduct": channel.unary_unary("/wirelens.v1.Catalog/GetProduct")}
    sent: Counter = Counter()
    body_bytes: dict[str, list[int]] = defaultdict(list)
    headers = {"x-wirelens-run": run_id}
    try:
        for protocol, operation, outcome in calls:
            if protocol == "rest":
                if operation == "hello.SayHello":
                    rest.request("POST", "/v1/hello", body=b'{"name":"wirelens"}',
                                 headers={**headers, "content-type": "application/json"})
                else:
                    rest.request("GET", "/v1/products/1" if outcome == "ok" else "/v1/products/0", headers=headers)
                response = rest.getresponse()
                body = response.read()
                assert response.status == (200 if outcome == "ok" else 404), (operation, outcome, response.status)
                body_bytes["rest"].append(len(body))
            else:
                request = HELLO_REQUEST if operation == "hello.SayHello" else \
                    PRODUCT_1 if outcome == "ok" else PRODUCT_0
                try:
                    reply, call = grpc_methods[operation].with_call(request, timeout=10, metadata=[("x-wirelens-run", run_id)])
                    assert outcome == "ok" and call.code() == grpc.StatusCode.OK
                    body_bytes["grpc"].append(5 + len(reply))  # one length-prefixed message
                except grpc.RpcError as exc:
                    assert outcome == "not found" and exc.code() == grpc.StatusCode.NOT_FOUND, exc
                    body_bytes["grpc"].append(0)  # trailers only
            sent[(protocol, operation, outcome)] += 1
    finally:
        rest.close()
        channel.close()
    return sent, body_bytes


def saved_query(settings, name: str, run_id: str, **extra) -> list[dict[str, str]]:
    url = f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}"
    params = {**clickhouse.window(clickhouse.parse_duration("1h")), "run_id": run_id, **extra}
    text = clickhouse.run(url, clickhouse.saved_query(name), params)
    header, *lines = text.splitlines()
    return [dict(zip(header.split("\t"), line.split("\t"))) for line in lines]


# -- the test ----------------------------------------------------------------------------


def test_a_known_mix_at_rate_0_1_weighs_back_to_the_truth(sampled_envoy):
    settings = sampled_envoy
    # This Envoy build has the CEL access-log filter the sampled config relies on.
    with urllib.request.urlopen(f"http://127.0.0.1:{settings['WIRELENS_ENVOY_ADMIN_PORT']}/server_info",
                                timeout=5) as response:
        assert "envoy.access_loggers.extension_filters.cel" in response.read().decode()
    assert "'wasm.wirelens.record' in filter_state" in (stack.state_dir(settings) / "envoy.yaml").read_text()

    run_id = f"sampling-{uuid.uuid4().hex[:8]}"
    shipped_before, exported_before = shipped(settings), collector_sent_logs(settings)
    t0 = time.monotonic()
    sent, body_bytes = send_mix(settings, run_id)
    sent_s = time.monotonic() - t0
    total = sum(MIX.values())
    assert sum(sent.values()) == total

    # Known points, in pipeline order: Envoy finished every stream (so it has logged it) and
    # wrote its buffer; logship shipped the file; the Collector exported what logship shipped.
    wait_for("Envoy to complete every request", lambda: envoy_stat(settings, "http.wirelens_ingress.downstream_rq_completed"),
             lambda n: n is not None and n >= total, timeout_s=DEADLINE_S, interval_s=0.1)
    wait_for("Envoy's access-log buffer to be written", lambda: envoy_stat(settings, "filesystem.write_total_buffered"),
             lambda n: n == 0, timeout_s=DEADLINE_S, interval_s=0.1)
    wait_for("logship to ship the whole file", lambda: stack.logship_progress(settings),
             lambda p: p is not None and p["pending_bytes"] == 0, timeout_s=DEADLINE_S, interval_s=0.1)
    lines = shipped(settings) - shipped_before
    wait_for(f"the Collector to write the {lines} records logship shipped",
             lambda: collector_sent_logs(settings) - exported_before, lambda n: n >= lines,
             timeout_s=DEADLINE_S, interval_s=0.1)
    drained_s = time.monotonic() - t0 - sent_s

    # Only sampled calls left Envoy: each shipped line is a recorded call of the run.
    (logged, distinct, without_record), = rows(settings, (
        "SELECT count(), uniqExact(LogAttributes['wirelens.request_id']), "
        "countIf(NOT mapContains(LogAttributes, 'wirelens.protocol')) FROM otel.otel_logs "
        f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'"))

    def recorded_calls() -> dict[tuple[str, str], int]:
        return {(p, o): int(n) for p, o, n in rows(settings, (
            f"SELECT protocol, operation, count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}' "
            "GROUP BY protocol, operation"))}
    # The view's insert commits after otel.otel_logs' own part: a read in between finds fewer rows.
    recorded = wait_for(f"the view's rows for the {distinct} request ids in otel.otel_logs", recorded_calls,
                        lambda seen: sum(seen.values()) >= int(distinct), timeout_s=DEADLINE_S, interval_s=0.1)
    n_recorded = sum(recorded.values())
    print(f"\n{total} calls sent in {sent_s:.1f}s, pipeline drained {drained_s:.1f}s later; "
          f"{lines} lines shipped, {n_recorded} calls recorded: {recorded}")
    assert without_record == "0", f"{without_record} lines of unsampled calls reached otel.otel_logs"
    assert int(distinct) == n_recorded == lines, (logged, distinct, n_recorded, lines)
    assert not [k for k in recorded if k[0] not in ("rest", "grpc")], f"unexpected protocols: {recorded}"
    assert rows(settings, f"SELECT DISTINCT sample_rate FROM wirelens.requests FINAL WHERE run_id = '{run_id}'") \
        == [[str(RATE)]]

    failures = [within_binomial("recorded calls (unweighted, x10)", n_recorded / RATE, total)]

    # Weighted counts per protocol and per (protocol, operation): latency_by_operation.
    latency = saved_query(settings, "latency_by_operation", run_id)
    truth_by_cell = Counter()
    for (protocol, operation, _), n in MIX.items():
        truth_by_cell[(protocol, operation)] += n
    by_protocol = Counter()
    for row in latency:
        key = (row["protocol"], row["operation"])
        assert row["sample_rate"] == str(RATE), row
        assert int(row["sampled_calls"]) == recorded[key], (row, recorded)
        assert int(row["calls"]) == int(row["sampled_calls"]) * 10, row  # one rate: exactly x10
        by_protocol[row["protocol"]] += int(row["calls"])
        failures.append(within_binomial(f"latency_by_operation calls {key}", int(row["calls"]), truth_by_cell[key]))
    for protocol in ("rest", "grpc"):
        truth = sum(n for (p, _, _), n in MIX.items() if p == protocol)
        failures.append(within_binomial(f"{protocol} calls", by_protocol[protocol], truth))
    # throughput_per_second adds up to the same estimates, second by second
    per_second = Counter()
    for row in saved_query(settings, "throughput_per_second", run_id):
        per_second[row["protocol"]] += int(row["calls"])
    assert per_second == by_protocol, (per_second, by_protocol)

    # Weighted errors: errors_by_status
    errors = {(r["protocol"], r["operation"], r["http_status"], r["grpc_status"]): r
              for r in saved_query(settings, "errors_by_status", run_id)}
    for key, truth in ((("rest", "catalog.GetProduct", "404", "\\N"), MIX[("rest", "catalog.GetProduct", "not found")]),
                       (("grpc", "catalog.GetProduct", "200", "5"), MIX[("grpc", "catalog.GetProduct", "not found")])):
        weighted = int(errors[key]["calls"]) if key in errors else 0
        failures.append(within_binomial(f"errors_by_status {key}", weighted, truth))
    assert set(errors) <= {("rest", "catalog.GetProduct", "404", "\\N"), ("grpc", "catalog.GetProduct", "200", "5")}, errors

    # Byte totals: the weighted response bodies against what the clients received. The
    # estimate sum(b_i / p) over the recorded calls has variance sum(b_i^2) (1 - p) / p;
    # a normal interval at z = 4.5 (two-sided 7e-6, room for the skew of small cells).
    recorded_sizes = {(p, o): sorted({int(b) for b in bs.split(",")}) for p, o, bs in rows(settings, (
        "SELECT protocol, operation, arrayStringConcat(groupUniqArray(toString(response_body_bytes)), ',') "
        f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol, operation"))}
    client_sizes = {p: sorted(set(sizes)) for p, sizes in body_bytes.items()}
    for (protocol, _), sizes in recorded_sizes.items():
        assert set(sizes) <= set(client_sizes[protocol]), (protocol, sizes, client_sizes)
    byte_rows = saved_query(settings, "bytes_by_operation", run_id)
    for protocol in ("rest", "grpc"):
        truth = sum(body_bytes[protocol])
        estimate = sum(float(r["resp_body_b"]) * int(r["calls"]) for r in byte_rows if r["protocol"] == protocol)
        rounding = sum(0.05 * int(r["calls"]) for r in byte_rows if r["protocol"] == protocol)  # resp_body_b: 0.1 B
        half_width = 4.5 * math.sqrt(sum(b * b for b in body_bytes[protocol]) * (1 - RATE) / RATE) + rounding
        if abs(estimate - truth) > half_width:
            failures.append(f"{protocol} response body bytes: weighted {estimate:.0f}, truth {truth}, "
                            f"allowed ±{half_width:.0f}")
    for r in byte_rows:
        # the estimated wire total is the weighted mean per call times the weighted calls
        assert abs(int(r["sum_wire_b"]) - float(r["total_b"]) * int(r["calls"])) <= 0.05 * int(r["calls"]) + 1, r
        assert int(r["sum_wire_b"]) > 0 and r["sample_rate"] == str(RATE), r

    failures = [f for f in failures if f]
    assert len([f for f in failures if f]) == 0, "\n".join(failures)

    # The report says it: the header line and the sample size.
    report = subprocess.run([str(WIRELENS), "report", "--run", run_id, "--clickhouse-url",
                             f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
                             "--queries", str(ROOT / "queries"), "--format", "tsv"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    line = (f"# sampling: sampled at 0.1: counts, throughput and byte totals are estimates (×10); "
            f"percentiles over {n_recorded:,} sampled calls (of ~{n_recorded * 10:,})")
    assert line in report.stdout.splitlines(), report.stdout[:2000]
    assert "# note: Sampled (sample_rate down to 0.1)" in report.stdout
