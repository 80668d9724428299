"""The saved queries (queries/*.sql) against a real ClickHouse, on a small hand-computed dataset.

A scratch ClickHouse (deploy/local/clickhouse_server.py, the chdb-core engine)
runs on free loopback ports for the session; the schema is applied the way
the stack applies it (after a stand-in for the Collector's otel.otel_logs).
Every number checked below is worked out by hand in the comments next to it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest

from queries import saved  # hands over to `bin/wirelens query`
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from bench.query_speed import OTEL_LOGS_STANDIN  # what the exporter creates: the columns the view reads
from deploy.local import clickhouse_server, stack

ROOT = Path(__file__).resolve().parents[2]

# Output columns of every saved query: the contract with `wirelens report`.
COLUMNS = {
    "latency_by_operation": (
        "operation protocol calls sampled_calls sample_rate mean_ms p50_ms p90_ms p95_ms p99_ms p999_ms min_ms "
        "max_ms ttfb_mean_ms ttfb_p50_ms ttfb_p90_ms ttfb_p95_ms ttfb_p99_ms ttfb_p999_ms ttfb_min_ms ttfb_max_ms"),
    "bytes_by_operation": (
        "operation protocol calls sampled_calls sample_rate req_header_b resp_header_b req_body_b resp_body_b "
        "req_framing_b resp_framing_b req_wire_b resp_wire_b total_b sum_wire_b header_ratio body_ratio wire_ratio"),
    "throughput_per_second": "second protocol calls sampled_calls sample_rate errors",
    "errors_by_status": "protocol operation http_status grpc_status calls sampled_calls sample_rate share",
    "streaming_efficiency": (
        "operation protocol streaming calls sampled_calls sample_rate req_msgs_per_call resp_msgs_per_call "
        "req_bytes_per_message resp_bytes_per_message messages_per_second work_ms_per_1000_messages"),
    "header_compression": (
        "protocol request_index calls sampled_calls sample_rate uncompressed_header_b wire_header_b ratio"),
    "cpu_per_1000_calls": "protocol calls sampled_calls sample_rate cpu_seconds cpu_ms_per_1000_calls",
    "compare_protocols": (
        "n_a n_b sample_rate median_a_ms median_b_ms median_ratio median_ci_low median_ci_high p99_a_ms p99_b_ms "
        "p99_ratio p99_ci_low p99_ci_high verdict"),
    "protocol_vs_stack": (
        "operation stack n_rest n_grpc median_rest_ms median_grpc_ms median_ratio median_ci_low median_ci_high "
        "upstream_rest_us upstream_grpc_us proxy_rest_us proxy_grpc_us resp_body_rest_b resp_body_grpc_b"),
    "latency_bytes_by_operation": (
        "operation protocol calls sampled_calls sample_rate p50_ms p95_ms p99_ms req_header_b req_body_b "
        "resp_header_b resp_body_b"),
    "what_if_protocol": (
        "operation protocol calls sampled_calls sample_rate counterfactual_rate estimated_calls measured_b rest_b "
        "rest_proto_b grpc_b grpc_web_b grpc_web_text_b rest_ratio rest_ratio_low rest_ratio_high rest_proto_ratio "
        "rest_proto_ratio_low rest_proto_ratio_high grpc_ratio grpc_ratio_low grpc_ratio_high grpc_web_ratio "
        "grpc_web_ratio_low grpc_web_ratio_high grpc_web_text_ratio grpc_web_text_ratio_low grpc_web_text_ratio_high "
        "no_estimate"),
}


# Every call of the dataset starts at T0 + offset; T0 is a whole second.
T0 = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).replace(microsecond=0, tzinfo=None)


class ScratchClickHouse(clickhouse_server.Scratch):
    """deploy/local/clickhouse_server.py's scratch server, with the schema's settings and the stack's client."""

    def __init__(self) -> None:
        super().__init__("wirelens-test-queries-")
        self.settings["WIRELENS_REQUESTS_TTL_DAYS"] = "30"

    def sql(self, statement: str) -> str:
        return stack.clickhouse_query(self.settings, statement)


# ------------------------------------------------------------------ the dataset

def ts(offset_s: float) -> str:
    return (T0 + dt.timedelta(seconds=offset_s)).strftime("%Y-%m-%d %H:%M:%S.%f")


REQUEST_COLUMNS = (
    "timestamp request_id run_id protocol operation streaming http_status grpc_status "
    "request_header_bytes response_header_bytes response_trailer_bytes request_body_bytes response_body_bytes "
    "request_messages response_messages request_message_bytes response_message_bytes "
    "request_framing_bytes response_framing_bytes ttfb_us duration_us request_headers_bytes "
    "downstream_header_bytes_received downstream_wire_bytes_received downstream_wire_bytes_sent connection_id "
    "sample_rate"
).split()

# Byte columns per protocol: header req/resp/trailer, body req/resp, framing req/resp,
# Envoy's request header bytes, wire header bytes received, wire bytes received/sent.
REST_BYTES = dict(request_header_bytes=200, response_header_bytes=100, response_trailer_bytes=0,
                  request_body_bytes=50, response_body_bytes=150, request_framing_bytes=0,
                  response_framing_bytes=0, request_headers_bytes=220, downstream_header_bytes_received=220,
                  downstream_wire_bytes_received=300, downstream_wire_bytes_sent=260)
GRPC_BYTES = dict(request_header_bytes=100, response_header_bytes=50, response_trailer_bytes=30,
                  request_body_bytes=25, response_body_bytes=75, request_framing_bytes=5,
                  response_framing_bytes=5, request_headers_bytes=200, downstream_header_bytes_received=40,
                  downstream_wire_bytes_received=140, downstream_wire_bytes_sent=130)


def call(offset_s, request_id, protocol, operation, duration_us, ttfb_us=0, run_id="r1", streaming="unary",
         http_status=200, grpc_status=None, req_msgs=None, resp_msgs=None, req_msg_bytes=None,
         resp_msg_bytes=None, connection_id=0, sample_rate=1.0, **overrides) -> dict:
    framed = protocol.startswith("grpc")
    row = dict(GRPC_BYTES if framed else REST_BYTES)
    row.update(
        timestamp=ts(offset_s), request_id=request_id, run_id=run_id, protocol=protocol, operation=operation,
        streaming=streaming, http_status=http_status,
        grpc_status=(0 if framed and grpc_status is None else grpc_status),
        request_messages=(1 if framed else 0) if req_msgs is None else req_msgs,
        response_messages=(1 if framed else 0) if resp_msgs is None else resp_msgs,
        request_message_bytes=(20 if framed else 0) if req_msg_bytes is None else req_msg_bytes,
        response_message_bytes=(70 if framed else 0) if resp_msg_bytes is None else resp_msg_bytes,
        ttfb_us=ttfb_us, duration_us=duration_us, connection_id=connection_id, sample_rate=sample_rate)
    row.update(overrides)
    return row


def dataset() -> list[list[dict]]:
    """The calls, as the batches they are inserted in (each insert is its own part)."""
    batches = []
    # op.A over REST, load run r1, on connection 9: durations 1, 2, 3, 4, 10 ms;
    # time to first byte 0.5 .. 0.9 ms; statuses 200, 200, 200, 404, 500.
    rest_a = [
        call(0.5, "a1", "rest", "op.A", 1000, 500, http_status=200, connection_id=9),
        call(0.6, "a2", "rest", "op.A", 2000, 600, http_status=200, connection_id=9),
        call(0.7, "a3", "rest", "op.A", 3000, 700, http_status=200, connection_id=9),
        call(1.5, "a4", "rest", "op.A", 4000, 800, http_status=404, connection_id=9),
        call(10.5, "a5", "rest", "op.A", 10000, 900, http_status=500, connection_id=9),
    ]
    batches.append(rest_a)
    batches.append(rest_a[3:4])  # the Collector re-sent a4: FINAL must count it once
    # op.A over gRPC, r1: 0.5, 1, 1.5, 2 ms; one UNAVAILABLE (14).
    batches.append([
        call(20.5, "g1", "grpc", "op.A", 500, 100),
        call(21.5, "g2", "grpc", "op.A", 1000, 200),
        call(22.5, "g3", "grpc", "op.A", 1500, 300, grpc_status=14),
        call(30.5, "g4", "grpc", "op.A", 2000, 400),
        # op.S: two client streams of 10 and 30 messages of 10 bytes, one 4-byte reply each
        call(25.5, "s1", "grpc", "op.S", 20000, 19000, streaming="client", req_msgs=10, resp_msgs=1,
             req_msg_bytes=100, resp_msg_bytes=4),
        call(26.5, "s2", "grpc", "op.S", 40000, 39000, streaming="client", req_msgs=30, resp_msgs=1,
             req_msg_bytes=300, resp_msg_bytes=4),
        # live traffic, no run id
        call(35.0, "w1", "grpc-web", "op.A", 3000, 1000, run_id=""),
    ])
    # op.H over gRPC, r1: 105 calls on h2 connection 42, inserted out of start order;
    # HPACK: the first request's headers take 160 bytes on the wire, the others 20.
    order = [(8 * i) % 105 for i in range(105)]
    assert sorted(order) == list(range(105))
    batches.append([
        call(27 + pos / 1000, f"h{pos}", "grpc", "op.H", 1000, 500, connection_id=42,
             downstream_header_bytes_received=160 if pos == 0 else 20)
        for pos in order])
    # op.C, run r2: 401 REST calls of 1.00 .. 5.00 ms, gRPC exactly twice as fast,
    # grpc-web the same as REST.
    rest_c = [1000 + 10 * i for i in range(401)]
    batches.append(
        [call(100 + i / 1000, f"cr{i}", "rest", "op.C", d, run_id="r2") for i, d in enumerate(rest_c)]
        + [call(101 + i / 1000, f"cg{i}", "grpc", "op.C", d // 2, run_id="r2") for i, d in enumerate(rest_c)]
        + [call(102 + i / 1000, f"cw{i}", "grpc-web", "op.C", d, run_id="r2") for i, d in enumerate(rest_c)])
    # op.W, run r3: sampled calls (the filter's sample_rate), each standing for 1/rate calls.
    # REST at 0.1 in second 32 (1, 2, 3, 4 ms; the 4 ms one a 503) and at 0.5 in seconds 35
    # and 36 (10, 20 ms, request bodies of 150 instead of 50 bytes), all on HTTP/1.1
    # connection 77. gRPC on h2 connection 78: one call at rate 1 (second 37), three at 0.5
    # (seconds 38-40, 2 ms each, the one in second 39 UNAVAILABLE), warm HPACK (20 of 200
    # header bytes). The window of each protocol lies inside the CPU points (T0 .. T0+40).
    batches.append([
        call(32.0, "w-r1", "rest", "op.W", 1000, 100, run_id="r3", connection_id=77, sample_rate=0.1),
        call(32.25, "w-r2", "rest", "op.W", 2000, 200, run_id="r3", connection_id=77, sample_rate=0.1),
        call(32.5, "w-r3", "rest", "op.W", 3000, 300, run_id="r3", connection_id=77, sample_rate=0.1),
        call(32.75, "w-r4", "rest", "op.W", 4000, 400, run_id="r3", connection_id=77, sample_rate=0.1,
             http_status=503),
        call(35.0, "w-r5", "rest", "op.W", 10000, 500, run_id="r3", connection_id=77, sample_rate=0.5,
             request_body_bytes=150),
        call(36.0, "w-r6", "rest", "op.W", 20000, 600, run_id="r3", connection_id=77, sample_rate=0.5,
             request_body_bytes=150),
        call(37.0, "w-g1", "grpc", "op.W", 2000, 100, run_id="r3", connection_id=78, sample_rate=1.0,
             downstream_header_bytes_received=20),
        call(38.0, "w-g2", "grpc", "op.W", 2000, 100, run_id="r3", connection_id=78, sample_rate=0.5,
             downstream_header_bytes_received=20),
        call(39.0, "w-g3", "grpc", "op.W", 2000, 100, run_id="r3", connection_id=78, sample_rate=0.5,
             downstream_header_bytes_received=20, grpc_status=14),
        call(40.0, "w-g4", "grpc", "op.W", 2000, 100, run_id="r3", connection_id=78, sample_rate=0.5,
             downstream_header_bytes_received=20),
    ])
    return batches


def sql_value(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def load(ch: ScratchClickHouse) -> None:
    for batch in dataset():
        values = ",\n".join("(" + ", ".join(sql_value(row[c]) for c in REQUEST_COLUMNS) + ")" for row in batch)
        ch.sql(f"INSERT INTO wirelens.requests ({', '.join(REQUEST_COLUMNS)}) VALUES\n{values}")
    # process.cpu.time, T0 .. T0+40 s, as procmetrics sends it: Envoy's user time, a
    # cumulative counter at 0.5 CPU-s/s, a point every second. A service's system
    # time as delta points of 0.5 s every 2 s (0.25 CPU-s/s: the exporter's other
    # temporality). The Collector's (wirelens's own pipeline, not counted) at 3 CPU-s/s,
    # and Envoy's memory (another metric).
    t0 = f"toDateTime('{ts(0)[:19]}')"
    ch.sql(f"""
        INSERT INTO otel.otel_metrics_sum
            (ResourceAttributes, ServiceName, MetricName, MetricUnit, Attributes, StartTimeUnix, TimeUnix,
             Value, AggregationTemporality, IsMonotonic)
        SELECT map('service.name', 'envoy', 'process.pid', '11'), 'envoy', 'process.cpu.time', 's',
               map('state', 'user'), {t0} - 100, {t0} + number, 0.5 * number, 2, true
        FROM numbers(41)
        UNION ALL
        SELECT map('service.name', 'grpc-service', 'process.pid', '12'), 'grpc-service', 'process.cpu.time', 's',
               map('state', 'system'), {t0} + 2 * number - 2, {t0} + 2 * number, 0.5, 1, true
        FROM numbers(1, 20)
        UNION ALL
        SELECT map('service.name', 'collector', 'process.pid', '13'), 'collector', 'process.cpu.time', 's',
               map('state', 'user'), {t0} - 100, {t0} + number, 3 * number, 2, true
        FROM numbers(41)
        UNION ALL
        SELECT map('service.name', 'envoy', 'process.pid', '11'), 'envoy', 'process.memory.usage', 'By', map(),
               {t0} - 100, {t0} + number, 1e9 * number, 2, false
        FROM numbers(41)
    """)


@pytest.fixture(scope="module")
def ch():
    server = ScratchClickHouse()
    try:
        server.start()
        server.sql("CREATE DATABASE IF NOT EXISTS otel")
        server.sql(OTEL_LOGS_STANDIN)
        stack.apply_schema(server.settings)
        load(server)
        yield server
    finally:
        server.stop()


WINDOW = {"since": ts(-60)[:23], "until": ts(600)[:23]}
COMPARE = {"operation": "op.C", "protocol_a": "rest", "protocol_b": "grpc", "resamples": "400"}


def query(ch, name: str, run_id: str = "r1", **extra) -> list[dict]:
    params = {**WINDOW, "run_id": run_id, **extra}
    if name == "compare_protocols":
        params = {**COMPARE, **params}
    if name in ("protocol_vs_stack", "what_if_protocol"):
        params = {"resamples": "400", **params}
    text = clickhouse.run(ch.url, clickhouse.saved_query(name), params, "TabSeparatedWithNames")
    lines = text.splitlines()
    header = lines[0].split("\t")
    assert header == COLUMNS[name].split(), name
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


def by(rows: list[dict], *keys: str) -> dict:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


# ------------------------------------------------------------------ the tests

def test_every_saved_query_is_covered_here():
    assert sorted(p.stem for p in (ROOT / "queries").glob("*.sql")) == sorted(COLUMNS)


def test_every_query_runs_on_empty_tables(ch):
    ch.sql("TRUNCATE TABLE wirelens.requests")
    ch.sql("TRUNCATE TABLE otel.otel_metrics_sum")
    try:
        for name in COLUMNS:
            for run_id in ("", "r1"):
                rows = query(ch, name, run_id)  # checks the column names too
                if name == "compare_protocols":
                    assert len(rows) == 1
                    assert rows[0]["n_a"] == rows[0]["n_b"] == "0"
                    assert rows[0]["median_ratio"] == "\\N" and rows[0]["verdict"] == ""
                    assert rows[0]["sample_rate"] == "\\N"  # no calls, no rate
                else:
                    assert rows == [], name
    finally:
        load(ch)


def test_latency_quantiles_are_exact(ch):
    rows = by(query(ch, "latency_by_operation"), "operation", "protocol")
    rest = rows[("op.A", "rest")]
    # 1, 2, 3, 4, 10 ms (a4 re-sent, counted once): mean 20/5 = 4; quantileExact(q) is
    # the element at floor(q * 5): p50 -> [2] = 3 ms, p90..p99.9 -> [4] = 10 ms.
    assert rest["calls"] == "5"
    assert (rest["mean_ms"], rest["p50_ms"], rest["p90_ms"], rest["p95_ms"], rest["p99_ms"], rest["p999_ms"]) \
        == ("4", "3", "10", "10", "10", "10")
    assert (rest["min_ms"], rest["max_ms"]) == ("1", "10")
    # ttfb 0.5 .. 0.9 ms: mean 0.7, p50 0.7, p90 0.9
    assert (rest["ttfb_mean_ms"], rest["ttfb_p50_ms"], rest["ttfb_p90_ms"], rest["ttfb_min_ms"],
            rest["ttfb_max_ms"]) == ("0.7", "0.7", "0.9", "0.5", "0.9")
    grpc = rows[("op.A", "grpc")]
    # 0.5, 1, 1.5, 2 ms: mean 1.25, p50 = [floor(2)] = 1.5
    assert (grpc["calls"], grpc["mean_ms"], grpc["p50_ms"], grpc["p99_ms"]) == ("4", "1.25", "1.5", "2")
    # grpc-web's only call has no run id: only in the all-runs answer
    assert ("op.A", "grpc-web") not in rows
    assert by(query(ch, "latency_by_operation", ""), "operation", "protocol")[("op.A", "grpc-web")]["calls"] == "1"


def test_bytes_and_ratios_to_the_leanest_protocol(ch):
    rows = by(query(ch, "bytes_by_operation"), "operation", "protocol")
    rest, grpc = rows[("op.A", "rest")], rows[("op.A", "grpc")]
    assert (rest["calls"], rest["req_header_b"], rest["resp_header_b"], rest["req_body_b"], rest["resp_body_b"],
            rest["req_framing_b"], rest["req_wire_b"], rest["resp_wire_b"], rest["total_b"]) \
        == ("5", "200", "100", "50", "150", "0", "300", "260", "560")
    assert (grpc["req_framing_b"], grpc["resp_framing_b"], grpc["total_b"]) == ("5", "5", "270")
    # headers incl. trailers: REST 200+100 = 300, gRPC 100+50+30 = 180 -> 300/180
    assert (rest["header_ratio"], grpc["header_ratio"]) == ("1.667", "1")
    # bodies 200 vs 100; wire 560 vs 270
    assert (rest["body_ratio"], grpc["body_ratio"]) == ("2", "1")
    assert (rest["wire_ratio"], grpc["wire_ratio"]) == ("2.074", "1")


def test_throughput_per_second_and_errors(ch):
    rows = by(query(ch, "throughput_per_second"), "second", "protocol")
    sec = lambda s: ts(s)[:19]  # noqa: E731
    # REST: 3 calls in second 0, the 404 in second 1, the 500 in second 10
    assert {k: (r["calls"], r["errors"]) for k, r in rows.items() if k[1] == "rest"} == {
        (sec(0), "rest"): ("3", "0"), (sec(1), "rest"): ("1", "1"), (sec(10), "rest"): ("1", "1")}
    assert (rows[(sec(22), "grpc")]["calls"], rows[(sec(22), "grpc")]["errors"]) == ("1", "1")  # grpc-status 14
    assert rows[(sec(27), "grpc")]["calls"] == "105"


def test_errors_by_status_with_shares_of_the_protocols_calls(ch):
    rows = by(query(ch, "errors_by_status"), "protocol", "operation", "http_status", "grpc_status")
    # REST has 5 calls in r1: 404 and 500 are 1/5 each; gRPC 111 calls (4 + 2 + 105), one 14
    assert {k: (r["calls"], r["share"]) for k, r in rows.items()} == {
        ("rest", "op.A", "404", "\\N"): ("1", "0.2"),
        ("rest", "op.A", "500", "\\N"): ("1", "0.2"),
        ("grpc", "op.A", "200", "14"): ("1", str(round(1 / 111, 6))),
    }


def test_streaming_efficiency_puts_calls_and_streams_on_one_scale(ch):
    rows = by(query(ch, "streaming_efficiency"), "operation", "protocol")
    s = rows[("op.S", "grpc")]
    # streams of 10 and 30 messages (10 B each), one 4-byte reply: 40 units of work in
    # 60 ms -> 666.7/s, 60 ms / 40 * 1000 = 1500 ms per 1000 messages
    assert (s["streaming"], s["calls"], s["req_msgs_per_call"], s["resp_msgs_per_call"]) == ("client", "2", "20", "1")
    assert (s["req_bytes_per_message"], s["resp_bytes_per_message"]) == ("10", "4")
    assert (s["messages_per_second"], s["work_ms_per_1000_messages"]) == ("666.7", "1500")
    rest = rows[("op.A", "rest")]
    # REST: one message each way, the bodies (50 and 150 B); 5 calls in 20 ms
    assert (rest["req_msgs_per_call"], rest["resp_msgs_per_call"]) == ("1", "1")
    assert (rest["req_bytes_per_message"], rest["resp_bytes_per_message"]) == ("50", "150")
    assert (rest["messages_per_second"], rest["work_ms_per_1000_messages"]) == ("250", "4000")
    grpc = rows[("op.A", "grpc")]
    # unary: 4 calls in 5 ms, 20 and 70 payload bytes
    assert (grpc["req_bytes_per_message"], grpc["messages_per_second"], grpc["work_ms_per_1000_messages"]) \
        == ("20", "800", "1250")


def test_header_compression_by_position_on_the_connection(ch):
    rows = query(ch, "header_compression")
    got = [(r["protocol"], r["request_index"], r["calls"], r["uncompressed_header_b"], r["wire_header_b"],
            r["ratio"]) for r in rows]
    # connection 42: 105 gRPC calls; the first (by start time, not insert order) sent
    # 160 of its 200 header bytes, the rest 20. gRPC calls without a connection id are
    # left out. Connection 9: 5 REST calls (a4 once), HTTP/1.1: 220 of 220 bytes.
    assert got == [
        ("grpc", "1", "1", "200", "160", "0.8"),
        ("grpc", "2", "1", "200", "20", "0.1"),
        ("grpc", "3", "1", "200", "20", "0.1"),
        ("grpc", "4-10", "7", "200", "20", "0.1"),
        ("grpc", "11-100", "90", "200", "20", "0.1"),
        ("grpc", ">100", "5", "200", "20", "0.1"),
        ("rest", "1", "1", "220", "220", "1"),
        ("rest", "2", "1", "220", "220", "1"),
        ("rest", "3", "1", "220", "220", "1"),
        ("rest", "4-10", "2", "220", "220", "1"),
    ]


def test_cpu_per_1000_calls_over_each_protocols_window(ch):
    rows = by(query(ch, "cpu_per_1000_calls"), "protocol")
    # REST's window T0+0.5 .. T0+10.5 (10 s), gRPC's T0+20.5 .. T0+30.5 (10 s). Rates:
    # cumulative 0.5 CPU-s/s, delta 0.25 CPU-s/s -> 0.75 * 10 s = 7.5 CPU-s each.
    # REST 5 calls: 7.5e6 ms / 5 per 1000; gRPC 111 calls. The Collector's CPU and
    # process.memory.usage are not counted.
    assert {p: (r["calls"], r["cpu_seconds"], r["cpu_ms_per_1000_calls"]) for p, r in rows.items()} == {
        "rest": ("5", "7.5", "1500000"),
        "grpc": ("111", "7.5", str(round(7.5e6 / 111, 3))),
    }
    # live calls (no run id) get no window: grpc-web never shows up
    assert "grpc-web" not in by(query(ch, "cpu_per_1000_calls", ""), "protocol")


def test_compare_protocols_bootstrap_interval_and_verdict(ch):
    row, = query(ch, "compare_protocols", "r2")
    # 401 REST durations 1.00 .. 5.00 ms; gRPC exactly half of each
    assert (row["n_a"], row["n_b"]) == ("401", "401")
    assert (row["median_a_ms"], row["median_b_ms"], row["median_ratio"]) == ("3", "1.5", "0.5")
    assert (row["p99_a_ms"], row["p99_b_ms"], row["p99_ratio"]) == ("4.96", "2.48", "0.5")
    for stat in ("median", "p99"):
        low, high = float(row[f"{stat}_ci_low"]), float(row[f"{stat}_ci_high"])
        assert low <= 0.5 <= high < 1, (stat, low, high)
    assert row["verdict"].startswith("grpc median is 2.00x faster than rest (95% CI ")
    assert "; grpc p99 is 2.00x faster than rest (95% CI " in row["verdict"]
    low, high = (float(x) for x in row["verdict"].split("(95% CI ")[1].split(")")[0].split("-"))
    assert math.isclose(low, 1 / float(row["median_ci_high"]), abs_tol=0.02)
    assert math.isclose(high, 1 / float(row["median_ci_low"]), abs_tol=0.02)

    # the other way round: 2x slower
    row, = query(ch, "compare_protocols", "r2", protocol_a="grpc", protocol_b="rest")
    assert row["median_ratio"] == "2" and row["verdict"].startswith("rest median is 2.00x slower than grpc")

    # grpc-web has the same durations as REST: the interval contains 1, no verdict
    row, = query(ch, "compare_protocols", "r2", protocol_b="grpc-web")
    assert row["median_ratio"] == "1"
    assert float(row["median_ci_low"]) <= 1 <= float(row["median_ci_high"])
    assert float(row["p99_ci_low"]) <= 1 <= float(row["p99_ci_high"])
    assert row["verdict"] == ""

    # a protocol without calls: its side is NULL, no interval, no verdict
    row, = query(ch, "compare_protocols", "r2", protocol_b="grpc-web-text")
    assert (row["n_b"], row["median_b_ms"], row["median_ratio"], row["median_ci_low"], row["verdict"]) \
        == ("0", "\\N", "\\N", "\\N", "")


def test_one_saved_query_fills_the_extra_parameters_and_names_missing_ones(ch, capfd):
    """`wirelens query` runs one saved query; queries/saved.py hands its old flags over to it."""
    sql = clickhouse.saved_query("compare_protocols")
    assert sorted(clickhouse.parameters(sql)) == ["operation", "protocol_a", "protocol_b", "resamples", "run_id",
                                                  "since", "until"]
    assert saved.main(["compare_protocols", "--clickhouse-url", ch.url]) == 2
    err = capfd.readouterr().err
    assert all(f"--param {name}=..." in err for name in ("operation", "protocol_a", "protocol_b")), err
    # resamples defaults to 200; the window ends now, so the dataset (an hour ago) is in a 2h window
    assert saved.main(["compare_protocols", "--clickhouse-url", ch.url, "--since", "2h", "--run-id", "r2",
                       "--param", "operation=op.C", "--param", "protocol_a=rest", "--param", "protocol_b=grpc",
                       "--format", "JSONEachRow"]) == 0
    row = json.loads(capfd.readouterr().out)
    assert (int(row["n_a"]), row["median_ratio"]) == (401, 0.5)


# ------------------------------------------------------------------ sampled calls (run r3)
# REST op.W: 4 calls at rate 0.1 (1, 2, 3, 4 ms) and 2 at 0.5 (10, 20 ms) stand for
# 4 * 10 + 2 * 2 = 44 calls; gRPC op.W: 1 at rate 1 and 3 at 0.5 (2 ms each) stand for 7.

def test_sampled_latency_weights_counts_and_means_and_keeps_percentiles_over_the_sample(ch):
    rows = by(query(ch, "latency_by_operation", "r3"), "operation", "protocol")
    rest = rows[("op.W", "rest")]
    assert (rest["calls"], rest["sampled_calls"], rest["sample_rate"]) == ("44", "6", "0.1")
    # weighted mean (10 * (1+2+3+4) + 2 * (10+20)) / 44 = 160 / 44 ms (unweighted: 40 / 6)
    assert rest["mean_ms"] == "3.636"
    # percentiles over the 6 sampled calls 1, 2, 3, 4, 10, 20: p50 -> [3], p90 -> [floor(5.4)]
    assert (rest["p50_ms"], rest["p90_ms"], rest["p99_ms"], rest["min_ms"], rest["max_ms"]) \
        == ("4", "20", "20", "1", "20")
    # ttfb (10 * (100+200+300+400) + 2 * (500+600)) / 44 = 277.27 µs
    assert (rest["ttfb_mean_ms"], rest["ttfb_p50_ms"]) == ("0.277", "0.4")
    grpc = rows[("op.W", "grpc")]
    assert (grpc["calls"], grpc["sampled_calls"], grpc["sample_rate"], grpc["mean_ms"], grpc["p50_ms"]) \
        == ("7", "4", "0.5", "2", "2")
    # every call recorded: calls = sampled_calls, sample_rate 1
    full = by(query(ch, "latency_by_operation"), "operation", "protocol")[("op.A", "rest")]
    assert (full["calls"], full["sampled_calls"], full["sample_rate"]) == ("5", "5", "1")


def test_sampled_bytes_weight_means_and_estimate_the_total(ch):
    rows = by(query(ch, "bytes_by_operation", "r3"), "operation", "protocol")
    rest, grpc = rows[("op.W", "rest")], rows[("op.W", "grpc")]
    assert (rest["calls"], rest["sampled_calls"], rest["sample_rate"]) == ("44", "6", "0.1")
    # request bodies: 40 calls of 50 B, 4 of 150 B -> 2600 / 44 = 59.09 (unweighted: 83.3)
    assert (rest["req_header_b"], rest["req_body_b"], rest["resp_body_b"], rest["total_b"]) \
        == ("200", "59.1", "150", "560")
    # every call moves 300 + 260 wire bytes: 560 * 44; gRPC 270 * 7
    assert (rest["sum_wire_b"], grpc["sum_wire_b"]) == ("24640", "1890")
    assert (grpc["calls"], grpc["sampled_calls"], grpc["sample_rate"]) == ("7", "4", "0.5")
    # bodies 59.09 + 150 vs 25 + 75
    assert (rest["body_ratio"], rest["wire_ratio"], grpc["wire_ratio"]) == ("2.091", "2.074", "1")
    full = by(query(ch, "bytes_by_operation"), "operation", "protocol")[("op.A", "rest")]
    assert (full["sum_wire_b"], full["sample_rate"]) == (str(5 * 560), "1")


def test_sampled_throughput_and_errors_per_second(ch):
    rows = query(ch, "throughput_per_second", "r3")
    sec = lambda s: ts(s)[:19]  # noqa: E731
    assert [(r["second"], r["protocol"], r["calls"], r["sampled_calls"], r["sample_rate"], r["errors"])
            for r in rows] == [
        (sec(32), "rest", "40", "4", "0.1", "10"),   # the 503 stands for 10
        (sec(35), "rest", "2", "1", "0.5", "0"),
        (sec(36), "rest", "2", "1", "0.5", "0"),
        (sec(37), "grpc", "1", "1", "1", "0"),
        (sec(38), "grpc", "2", "1", "0.5", "0"),
        (sec(39), "grpc", "2", "1", "0.5", "2"),
        (sec(40), "grpc", "2", "1", "0.5", "0"),
    ]


def test_sampled_errors_share_of_the_estimated_calls(ch):
    rows = query(ch, "errors_by_status", "r3")
    # gRPC: one of 3 calls at 0.5 failed -> 2 of 7; REST: the 503 at 0.1 -> 10 of 44
    assert [(r["protocol"], r["operation"], r["http_status"], r["grpc_status"], r["calls"], r["sampled_calls"],
             r["sample_rate"], r["share"]) for r in rows] == [
        ("grpc", "op.W", "200", "14", "2", "1", "0.5", str(round(2 / 7, 6))),
        ("rest", "op.W", "503", "\\N", "10", "1", "0.1", str(round(10 / 44, 6))),
    ]


def test_sampled_streaming_efficiency(ch):
    rows = by(query(ch, "streaming_efficiency", "r3"), "operation", "protocol")
    rest, grpc = rows[("op.W", "rest")], rows[("op.W", "grpc")]
    # REST: 44 units of work in 10 * 10 ms + 2 * 30 ms = 160 ms -> 275/s, 3636.364 ms per 1000
    assert (rest["calls"], rest["sampled_calls"], rest["sample_rate"]) == ("44", "6", "0.1")
    assert (rest["req_bytes_per_message"], rest["messages_per_second"], rest["work_ms_per_1000_messages"]) \
        == ("59.1", "275", "3636.364")
    # gRPC: 7 units in 14 ms
    assert (grpc["calls"], grpc["sampled_calls"], grpc["messages_per_second"], grpc["work_ms_per_1000_messages"]) \
        == ("7", "4", "500", "2000")


def test_sampled_connections_have_no_positions(ch):
    rows = query(ch, "header_compression", "r3")
    # connection 77 (rates 0.1, 0.5) and 78 (1 and 0.5): calls between the recorded ones
    # are unknown, so no position; bytes weighted
    assert [(r["protocol"], r["request_index"], r["calls"], r["sampled_calls"], r["sample_rate"],
             r["uncompressed_header_b"], r["wire_header_b"], r["ratio"]) for r in rows] == [
        ("grpc", "sampled", "7", "4", "0.5", "200", "20", "0.1"),
        ("rest", "sampled", "44", "6", "0.1", "220", "220", "1"),
    ]


def test_sampled_cpu_per_1000_estimated_calls(ch):
    rows = by(query(ch, "cpu_per_1000_calls", "r3"), "protocol")
    # REST's window T0+32 .. T0+36 (4 s), gRPC's T0+37 .. T0+40 (3 s), at 0.75 CPU-s/s:
    # 3 and 2.25 CPU-s, per 1000 of 44 and 7 estimated calls
    assert {p: (r["calls"], r["sampled_calls"], r["sample_rate"], r["cpu_seconds"], r["cpu_ms_per_1000_calls"])
            for p, r in rows.items()} == {
        "rest": ("44", "6", "0.1", "3", str(round(3e6 / 44, 3))),
        "grpc": ("7", "4", "0.5", "2.25", str(round(2.25e6 / 7, 3))),
    }


def test_sampled_compare_protocols_counts_the_sample(ch):
    row, = query(ch, "compare_protocols", "r3", operation="op.W")
    # medians over the sampled calls: REST 1, 2, 3, 4, 10, 20 -> rank floor(3) + 1 = 4 ms; gRPC 2 ms
    assert (row["n_a"], row["n_b"], row["sample_rate"], row["median_a_ms"], row["median_b_ms"],
            row["median_ratio"]) == ("6", "4", "0.1", "4", "2", "0.5")
    row, = query(ch, "compare_protocols", "r2")
    assert row["sample_rate"] == "1"


def test_sampled_latency_and_bytes(ch):
    rows = by(query(ch, "latency_bytes_by_operation", "r3"), "operation", "protocol")
    rest = rows[("op.W", "rest")]
    assert (rest["calls"], rest["sampled_calls"], rest["sample_rate"], rest["p50_ms"], rest["p95_ms"],
            rest["req_body_b"], rest["resp_body_b"]) == ("44", "6", "0.1", "4", "20", "59.1", "150")
    grpc = rows[("op.W", "grpc")]
    assert (grpc["calls"], grpc["sampled_calls"], grpc["sample_rate"], grpc["p50_ms"]) == ("7", "4", "0.5", "2")


def test_a_row_without_a_known_rate_counts_once(ch):
    # Rows written without sample_rate (the column's default 0, e.g. bench/query_speed.py's
    # synthetic calls) stand for one call each, like a recorded call at rate 1.
    ch.sql(f"INSERT INTO wirelens.requests (timestamp, request_id, run_id, protocol, operation, duration_us) "
           f"VALUES ('{ts(50)}', 'z1', 'r4', 'rest', 'op.Z', 1000)")
    try:
        row, = query(ch, "latency_by_operation", "r4")
        assert (row["calls"], row["sampled_calls"], row["sample_rate"], row["mean_ms"]) == ("1", "1", "1", "1")
    finally:
        ch.sql("ALTER TABLE wirelens.requests DELETE WHERE run_id = 'r4' SETTINGS mutations_sync = 1")


def test_the_ingest_view_keeps_client_chosen_values_bounded(ch):
    # Records as the Collector writes them: an unknown call (operation 'unknown' and its url.path
    # from the filter), an invented method, a 200-character run id; a known call; a record Envoy
    # wrote without the filter's fields ('-').
    long_run = "r5" + "x" * 198
    ch.sql(f"""INSERT INTO otel.otel_logs (Timestamp, LogAttributes) VALUES
        ('{ts(70)}', map('wirelens.protocol', 'rest', 'wirelens.request_id', 'v1', 'wirelens.run_id', '{long_run}',
                         'wirelens.operation', 'unknown', 'url.path', '/no/such/path', 'http.request.method', 'BREW')),
        ('{ts(71)}', map('wirelens.protocol', 'grpc', 'wirelens.request_id', 'v2', 'wirelens.run_id', '{long_run}',
                         'wirelens.operation', 'op.A', 'http.request.method', 'POST')),
        ('{ts(72)}', map('wirelens.protocol', '-', 'wirelens.request_id', 'v3', 'wirelens.run_id', '{long_run}',
                         'http.request.method', 'get'))""")
    run = long_run[:128]
    try:
        rows = ch.sql(f"SELECT request_id, run_id, protocol, operation, url_path, http_method FROM wirelens.requests "
                      f"FINAL WHERE run_id = '{run}' ORDER BY request_id FORMAT TSV").splitlines()
        assert [r.split("\t") for r in rows] == [
            ["v1", run, "rest", "unknown", "/no/such/path", "_OTHER"],
            ["v2", run, "grpc", "op.A", "", "POST"],
            # methods are case-sensitive (OpenTelemetry): 'get' is not GET
            ["v3", run, "unknown", "", "", "_OTHER"],
        ]
    finally:
        ch.sql(f"ALTER TABLE wirelens.requests DELETE WHERE run_id = '{run}' SETTINGS mutations_sync = 1")
        ch.sql("TRUNCATE TABLE otel.otel_logs")


def test_protocol_vs_stack_ratio_per_stack_with_an_interval(ch):
    # go: rest 10 ms, grpc 5 ms (x0.5); python: rest 4 ms, grpc 8 ms (x2), 30 calls each,
    # a little spread so the bootstrap has something to resample. Rows without a stack are left out.
    values = []
    for i in range(30):
        for stack_name, protocol, ms in (("go", "rest", 10), ("go", "grpc", 5), ("python", "rest", 4),
                                         ("python", "grpc", 8), ("", "grpc", 1)):
            us = ms * 1000 + (i % 5) * 10
            # Envoy's µs split: the call at Envoy 137 µs longer than the filter's, the upstream 50 µs shorter
            values.append(f"('{ts(60 + i / 100)}', 's-{stack_name}-{protocol}-{i}', 'rs', '{protocol}', 'op.S', "
                          f"'{stack_name}', {us}, {ms + 1}, {ms}, {us + 137}, {us - 50}, "
                          f"{100 if protocol == 'rest' else 40})")
    # and one call no upstream served (a local reply): no upstream time, left out of the split
    values.append(f"('{ts(61)}', 's-local', 'rs', 'rest', 'op.S', 'go', 10000, 0, NULL, 55, NULL, 100)")
    ch.sql("INSERT INTO wirelens.requests (timestamp, request_id, run_id, protocol, operation, stack, duration_us, "
           "envoy_duration_ms, upstream_service_ms, envoy_duration_us, upstream_duration_us, response_body_bytes) VALUES "
           + ",".join(values))
    try:
        rows = by(query(ch, "protocol_vs_stack", "rs"), "operation", "stack")
        assert sorted(rows) == [("op.S", "go"), ("op.S", "python")]
        go, python = rows[("op.S", "go")], rows[("op.S", "python")]
        assert (go["n_rest"], go["n_grpc"], go["median_rest_ms"], go["median_grpc_ms"]) == ("31", "30", "10.02", "5.02")
        assert float(go["median_ratio"]) == round(5020 / 10020, 3)
        assert float(python["median_ratio"]) == round(8020 / 4020, 3)
        for row in (go, python):
            assert float(row["median_ci_low"]) <= float(row["median_ratio"]) <= float(row["median_ci_high"])
        assert float(go["median_ci_high"]) < 1 < float(python["median_ci_low"])  # the protocol flips with the stack
        # medians of 30 calls (0, 10, 20, 30, 40 µs of spread, 6 each): the 16th is the spread's 20
        assert (python["upstream_rest_us"], python["proxy_rest_us"], python["resp_body_rest_b"],
                python["resp_body_grpc_b"]) == ("3970", "187", "100", "40")
        assert (go["upstream_rest_us"], go["upstream_grpc_us"], go["proxy_rest_us"], go["proxy_grpc_us"]) == \
            ("9970", "4970", "187", "187")
    finally:
        ch.sql("ALTER TABLE wirelens.requests DELETE WHERE run_id = 'rs' SETTINGS mutations_sync = 1")


# ------------------------------------------------------------------ what if (run rw)
# Calls with the filter's counterfactual sizes (docs/what-if.md). Per call: body bytes
# (request, response), gRPC message bytes and counts, the counterfactual sizes, reason,
# sample rate and counterfactual rate. Every number below is worked out from these rows.
WHAT_IF_COLUMNS = (
    "timestamp request_id run_id protocol operation streaming request_body_bytes response_body_bytes "
    "request_message_bytes response_message_bytes request_messages response_messages sample_rate "
    "counterfactual_reason counterfactual_rate counterfactual_request_proto_bytes "
    "counterfactual_response_proto_bytes counterfactual_request_json_bytes counterfactual_response_json_bytes"
).split()


def what_if_call(offset_s, request_id, protocol, operation, bodies=(0, 0), messages=(0, 0), counts=(0, 0),
                 reason="", cf_rate=1.0, proto=(None, None), json_=(None, None), sample_rate=1.0,
                 streaming="unary") -> tuple:
    return (ts(offset_s), request_id, "rw", protocol, operation, streaming, *bodies, *messages, *counts,
            sample_rate, reason, cf_rate, *proto, *json_)


WHAT_IF_CALLS = [
    # op.F over REST: two estimates, sampled for the counterfactual at 0.5 and 0.25 (weights 2
    # and 4): JSON 19+29 = 48 and 25+35 = 60 bytes, protobuf 10+17 = 27 and 14+21 = 35.
    what_if_call(80.0, "f-r1", "rest", "op.F", (19, 29), reason="ok", cf_rate=0.5, proto=(10, 17)),
    what_if_call(80.1, "f-r2", "rest", "op.F", (25, 35), reason="ok", cf_rate=0.25, proto=(14, 21)),
    # sampled, no estimate: too large, failed, marked ok without its sizes; one call not sampled
    # for it at all, recorded at sample rate 0.5 (it stands for 2 calls)
    what_if_call(80.2, "f-r3", "rest", "op.F", (70000, 10), reason="too_large"),
    what_if_call(80.3, "f-r4", "rest", "op.F", (19, 80), reason="not_ok"),
    what_if_call(80.4, "f-r5", "rest", "op.F", (19, 29), sample_rate=0.5),
    what_if_call(80.5, "f-r6", "rest", "op.F", (19, 29), reason="ok", proto=(10, None)),
    # op.F over gRPC: messages 10 and 17 bytes (bodies 15 and 22 with their prefixes), JSON 19 and 29
    what_if_call(81.0, "f-g1", "grpc", "op.F", (15, 22), (10, 17), (1, 1), reason="ok", json_=(19, 29)),
    what_if_call(81.1, "f-g2", "grpc", "op.F", (15, 22), (10, 17), (1, 1), reason="mismatch"),
    # over gRPC-Web-text: base64 bodies as sent (the response with its trailer frame)
    what_if_call(81.2, "f-t1", "grpc-web-text", "op.F", (20, 80), (10, 17), (1, 1), reason="ok", json_=(19, 29)),
    # over REST with protobuf: a protobuf request (10 bytes; its JSON 19), a JSON response (29; its protobuf 17)
    what_if_call(81.3, "f-p1", "rest-proto", "op.F", (10, 29), reason="ok", proto=(None, 17), json_=(19, None)),
    # a server stream over gRPC: one 3-byte request (JSON 8), 4 responses of 40 bytes in all (JSON 100)
    what_if_call(82.0, "s-g1", "grpc", "op.S2", (8, 60), (3, 40), (1, 4), reason="ok", json_=(8, 100),
                 streaming="server"),
    # nothing sampled for it
    what_if_call(83.0, "n-r1", "rest", "op.N", (19, 29)),
    # op.G, a GET (the rule binds no request body): its request message (3 bytes) is in the URL.
    # REST: no request body, the message sized from the path; gRPC: the message; REST with
    # protobuf: no request body and, the URL not sized, no gRPC size
    what_if_call(84.0, "g-r1", "rest", "op.G", (0, 29), reason="ok", proto=(3, 17)),
    what_if_call(84.1, "g-g1", "grpc", "op.G", (8, 22), (3, 17), (1, 1), reason="ok", json_=(0, 29)),
    what_if_call(84.2, "g-p1", "rest-proto", "op.G", (0, 17), reason="ok", json_=(0, 29)),
]


@pytest.fixture
def what_if_calls(ch):
    values = ",\n".join("(" + ", ".join(sql_value(v) for v in row) + ")" for row in WHAT_IF_CALLS)
    ch.sql(f"INSERT INTO wirelens.requests ({', '.join(WHAT_IF_COLUMNS)}) VALUES\n{values}")
    try:
        yield
    finally:
        ch.sql("ALTER TABLE wirelens.requests DELETE WHERE run_id = 'rw' SETTINGS mutations_sync = 1")


def test_what_if_protocol_bytes_in_each_encoding_and_ratios_to_the_own(ch, what_if_calls):
    rows = by(query(ch, "what_if_protocol", "rw"), "operation", "protocol")
    assert sorted(rows) == [("op.F", "grpc"), ("op.F", "grpc-web-text"), ("op.F", "rest"), ("op.F", "rest-proto"),
                            ("op.G", "grpc"), ("op.G", "rest"), ("op.G", "rest-proto"), ("op.N", "rest"),
                            ("op.S2", "grpc")]
    rest = rows[("op.F", "rest")]
    # 5 calls at rate 1 and f-r5 at 0.5; two estimates; the lowest rate among the sampled: 0.25
    assert (rest["calls"], rest["sampled_calls"], rest["sample_rate"], rest["counterfactual_rate"],
            rest["estimated_calls"]) == ("7", "6", "0.5", "0.25", "2")
    # weighted by 1/(sample_rate * counterfactual_rate) = 2 and 4:
    #   rest (JSON)     (2 * 48 + 4 * 60) / 6 = 56        (measured: the same bodies)
    #   rest-proto      (2 * 27 + 4 * 35) / 6 = 32.33
    #   grpc, grpc-web  (2 * 37 + 4 * 45) / 6 = 42.33     (+ 5 per message each way)
    #   grpc-web-text   (2 * (20 + 32) + 4 * (28 + 36)) / 6 = 60   (4 * ceil(n / 3) per direction)
    assert (rest["measured_b"], rest["rest_b"], rest["rest_proto_b"], rest["grpc_b"], rest["grpc_web_b"],
            rest["grpc_web_text_b"]) == ("56", "56", "32.3", "42.3", "42.3", "60")
    assert (rest["rest_ratio"], rest["rest_proto_ratio"], rest["grpc_ratio"], rest["grpc_web_ratio"],
            rest["grpc_web_text_ratio"]) == ("1", str(round(97 / 168, 3)), str(round(127 / 168, 3)),
                                             str(round(127 / 168, 3)), str(round(60 / 56, 3)))
    # the reasons, most frequent first, then by name
    assert rest["no_estimate"] == "incomplete: 1, not_ok: 1, too_large: 1"
    # every resample's ratio lies between the two calls' own ratios (37/48 and 45/60)
    low, high = float(rest["grpc_ratio_low"]), float(rest["grpc_ratio_high"])
    assert 0.75 <= low <= float(rest["grpc_ratio"]) <= high <= round(37 / 48, 3) and low < high
    assert (rest["rest_ratio_low"], rest["rest_ratio_high"]) == ("1", "1")

    grpc = rows[("op.F", "grpc")]
    # one estimate: the same message as f-r1; own = grpc = measured body 37
    assert (grpc["calls"], grpc["estimated_calls"], grpc["counterfactual_rate"], grpc["no_estimate"]) \
        == ("2", "1", "1", "mismatch: 1")
    assert (grpc["measured_b"], grpc["rest_b"], grpc["rest_proto_b"], grpc["grpc_b"], grpc["grpc_web_text_b"]) \
        == ("37", "48", "27", "37", "52")
    assert (grpc["rest_ratio"], grpc["rest_ratio_low"], grpc["rest_ratio_high"]) == ("1.297", "1.297", "1.297")
    assert (grpc["grpc_ratio"], grpc["grpc_web_ratio"], grpc["grpc_web_text_ratio"]) == ("1", "1", "1.405")

    text = rows[("op.F", "grpc-web-text")]
    # measured 100 (base64 as sent, with the trailer frame); own: the frames' base64, 20 + 32
    assert (text["measured_b"], text["grpc_web_text_b"], text["grpc_web_text_ratio"], text["grpc_ratio"]) \
        == ("100", "52", "1", str(round(37 / 52, 3)))

    proto = rows[("op.F", "rest-proto")]
    # protobuf 10 + 17 (own, as measured: 10 + 29 with the JSON response), JSON 19 + 29
    assert (proto["measured_b"], proto["rest_proto_b"], proto["rest_b"], proto["grpc_b"], proto["rest_proto_ratio"],
            proto["rest_ratio"]) == ("39", "27", "48", "37", "1", str(round(48 / 27, 3)))

    stream = rows[("op.S2", "grpc")]
    # 1 + 4 messages: gRPC 3 + 5 + 40 + 20 = 68 (= measured); no REST-with-protobuf for a stream;
    # base64 4 * ceil(8 / 3) + 4 * ceil(60 / 3) = 12 + 80
    assert (stream["measured_b"], stream["rest_b"], stream["rest_proto_b"], stream["grpc_b"],
            stream["grpc_web_text_b"]) == ("68", "108", "\\N", "68", "92")
    assert (stream["rest_proto_ratio"], stream["rest_proto_ratio_low"], stream["rest_ratio"]) \
        == ("\\N", "\\N", str(round(108 / 68, 3)))

    # the GET: REST with protobuf has no request body either (0 + 17); gRPC 3 + 5 + 17 + 5 = 30,
    # its base64 12 + 32 = 44; the protobuf REST call cannot say what gRPC would carry
    for protocol in ("rest", "grpc"):
        get = rows[("op.G", protocol)]
        assert (get["rest_b"], get["rest_proto_b"], get["grpc_b"], get["grpc_web_b"], get["grpc_web_text_b"],
                get["estimated_calls"]) == ("29", "17", "30", "30", "44", "1"), protocol
    get = rows[("op.G", "rest-proto")]
    assert (get["estimated_calls"], get["measured_b"], get["rest_b"], get["rest_proto_b"], get["grpc_b"],
            get["grpc_web_b"], get["grpc_web_text_b"]) == ("1", "17", "29", "17", "\\N", "\\N", "\\N")
    assert (get["rest_ratio"], get["rest_proto_ratio"], get["grpc_ratio"], get["grpc_ratio_low"],
            get["grpc_web_text_ratio"], get["no_estimate"]) == (str(round(29 / 17, 3)), "1", "\\N", "\\N", "\\N", "")

    none = rows[("op.N", "rest")]
    # recorded, never sampled for the counterfactual: counted, no estimate, no reason
    assert (none["calls"], none["counterfactual_rate"], none["estimated_calls"], none["measured_b"],
            none["rest_ratio"], none["no_estimate"]) == ("1", "\\N", "0", "\\N", "\\N", "")


def test_what_if_protocol_interval_is_deterministic_and_optional(ch, what_if_calls):
    first = query(ch, "what_if_protocol", "rw")
    assert query(ch, "what_if_protocol", "rw") == first  # the resamples are drawn from hashes
    rows = by(query(ch, "what_if_protocol", "rw", resamples="0"), "operation", "protocol")
    rest = rows[("op.F", "rest")]
    assert (rest["grpc_ratio"], rest["grpc_ratio_low"], rest["grpc_ratio_high"]) == (str(round(127 / 168, 3)),
                                                                                      "\\N", "\\N")
    # other calls of the window (runs r1 .. r3) have no counterfactual: counted, no estimate
    everything = by(query(ch, "what_if_protocol", ""), "operation", "protocol")
    assert (everything[("op.A", "rest")]["calls"], everything[("op.A", "rest")]["estimated_calls"]) == ("5", "0")
    assert everything[("op.F", "rest")] == by(first, "operation", "protocol")[("op.F", "rest")]


def test_the_demo_prints_what_if_for_every_operation(ch, what_if_calls):
    """deploy/local/demo.py's what-if table, from the query's own answer."""
    from deploy.local import demo
    table = demo.what_if_table(query(ch, "what_if_protocol", "rw")).splitlines()
    assert table[0].split() == ["operation", "measured", "over", "calls", "estimated", "measured", "rest",
                                "rest-proto", "grpc", "grpc-web", "grpc-web-text"]
    rows = {tuple(line.split()[:2]): " ".join(line.split()[2:]) for line in table[2:] if line.startswith("  op.")}
    assert rows[("op.F", "rest")].startswith("7 2 56 B 56 B (own) 32.3 B ×0.58 (")
    assert rows[("op.F", "grpc")] == "2 1 37 B 48 B ×1.30 27 B ×0.73 37 B (own) 37 B ×1.00 52 B ×1.41"
    assert rows[("op.S2", "grpc")] == "1 1 68 B 108 B ×1.59 - 68 B (own) 68 B ×1.00 92 B ×1.35"
    assert rows[("op.N", "rest")] == "1 0 - - - - -"
    assert "  no estimate: op.F over rest: incomplete: 1, not_ok: 1, too_large: 1" in table
    assert "  no estimate: op.F over grpc: mismatch: 1" in table


# ------------------------------------------------------------------ the experiments' per-run summary (runs pr-*)
# experiments/scenarios/per_run.sql, the proxy's view of each E1-E5 step, through the code that reads it
# (experiments/scenario_runs.per_run) into the report's cells (experiment_sections). The split of a call's time
# at Envoy is Envoy's µs one (upstream_duration_us, envoy_duration_us), as queries/protocol_vs_stack.sql
# defines it; x-envoy-upstream-service-time (upstream_service_ms, whole ms) reads 0 here, as it does for most
# real calls, so an answer from it cannot pass.

def test_per_run_splits_the_time_at_envoy_in_microseconds(ch):
    from experiments import experiment_sections, scenario_runs
    # pr-u: four unary calls, upstream 100, 150, 200, 410 µs, at Envoy 80, 80, 100, 120 µs longer; and a local
    # reply (no upstream: NULL), counted as a call, left out of the split.
    # pr-s: one stream, upstream 5 s, 300 µs more at Envoy.
    calls = [("u1", "pr-u", 400, 180, 100), ("u2", "pr-u", 450, 230, 150), ("u3", "pr-u", 500, 300, 200),
             ("u4", "pr-u", 700, 530, 410), ("u5", "pr-u", 90, 55, None), ("s1", "pr-s", 5000400, 5000300, 5000000)]
    values = [f"('{ts(90 + i / 10)}', 'pr-{rid}', '{run}', 'rest', 'op.P', 'HTTP/1.1', {filter_us}, 0, "
              f"{'NULL' if up is None else 0}, {envoy}, {'NULL' if up is None else up})"
              for i, (rid, run, filter_us, envoy, up) in enumerate(calls)]
    ch.sql("INSERT INTO wirelens.requests (timestamp, request_id, run_id, protocol, operation, http_version, "
           "duration_us, envoy_duration_ms, upstream_service_ms, envoy_duration_us, upstream_duration_us) VALUES "
           + ",".join(values))
    try:
        got = scenario_runs.per_run(ch.settings, ["pr-u", "pr-s", "pr-none"])
        assert sorted(got) == ["pr-s", "pr-u"]
        u, s = got["pr-u"], got["pr-s"]
        # quantileExact(0.5) of 4 values is the 3rd smallest (200; in Envoy 100), nearest-rank the 2nd (150)
        assert (u["calls"], u["split_calls"], u["upstream_p50_us"], u["upstream_p50_rank_us"], u["upstream_avg_us"],
                u["in_envoy_p50_us"], u["in_envoy_avg_us"]) == (5, 4, 200, 150, 215, 100, 95)
        assert (s["upstream_p50_us"], s["in_envoy_p50_us"], s["in_envoy_avg_us"]) == (5000000, 300, 300)
        steps = [{"name": "u", "proxy": u}, {"name": "s", "proxy": s}]
        table = experiment_sections.proxy_only({"steps": steps}).splitlines()
        assert table[0].endswith("| upstream µs (median / avg) | in Envoy µs (median / avg) | connections |")
        assert table[2].endswith("| 200 / 215 | 100 / 95 | 1 (HTTP/1.1) |"), table[2]
        assert table[3].endswith("| 5,000,000 / 5,000,000 | 300 / 300 | 1 (HTTP/1.1) |"), table[3]
        assert experiment_sections.where_time("u over REST", u, "over gRPC", s) == (
            "u over REST: median 0.45 ms at the proxy (200 µs upstream, 100 µs in Envoy); over gRPC: median "
            "5,000.40 ms (5,000,000 µs upstream, 300 µs in Envoy), medians: gRPC's calls spend 4,999,800 µs more "
            "upstream and 200 µs more in Envoy")
    finally:
        ch.sql("ALTER TABLE wirelens.requests DELETE WHERE run_id LIKE 'pr-%' SETTINGS mutations_sync = 1")
