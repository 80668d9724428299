"""What does one call cost the pipeline behind Envoy? Ingest CPU at steady rates, in bulk, and disk per call.

(`make bench`, section `ingest`; also `make bench-ingest`.)

Every run starts the pipeline exactly as the local stack ships it, on free
loopback ports in a temporary directory: ClickHouse (the chdb-core engine),
the Collector (`collector/config.yaml`, `bin/otelcol-wirelens`), the schema
(`queries/schema`), the agent that ships Envoy's file, and for the rate axis
Jaeger. The agents (`--agents logship,filelog`, both by default, issue 32):
logship, or the filelog log agent (WIRELENS_LOG_SHIPPER=filelog: our
Collector with `collector/filelog-agent.yaml`); each axis runs once per
agent, each on its own stack, and the tables put them side by side. The calls are
synthetic lines in Envoy's access-log format (`envoy/wiring.py`'s
`access_log_line_format`: the same attributes, the filter's packed record).

- rate axis (`--rates 0,60,600,3000`, `--seconds`, `--warmup`; issue 30): one
  stack; at each rate in turn a driver appends that many calls a second to
  the access log (every 200 ms, as Envoy flushes its file) and sends the same
  calls' spans to the Collector over OTLP (the local stack traces every
  call; `--no-spans` leaves them out). After the warm-up, over the window:
  each process's cores (utime+stime from /proc), the engine's cores above
  rate 0's (its idle cost), rows per engine CPU second, the engine's CPU by
  thread name (ClickHouse names its threads after their job: TCPHandler runs
  an insert and its materialized views, MergeMutate the merges, RefreshTask
  the refreshable views) and its counters (system.events: inserts, parts
  written, merges), and where calls written but not yet rows wait (logship,
  the Collector's queue);
- bulk (`--mixes mixed,rest,grpc`, `--calls N`): a file of N calls written
  beforehand, shipped at once: from logship's start until every call is a
  row in `wirelens.requests` (and background merges have settled), the CPU
  time of each process: records per CPU second = records per second one core
  of that component sustains on the insert path as shipped (the agent → OTLP →
  memory_limiter → transform → clickhouse exporter's persistent queue and
  batch → `otel.otel_logs` → materialized view → `wirelens.requests`); and
  the agent's disk, the largest seen while it ships, per call: Envoy's
  access-log file(s), the agent's own storage (logship: its checkpoint;
  filelog: `file_storage`, its offsets and its exporter's persistent queue,
  which holds a second copy of what it read and has not delivered) and the
  Collector's persistent queues;
- storage: after `OPTIMIZE ... FINAL`, the bytes on disk per call of
  `wirelens.requests` and of the exporter's `otel.otel_logs` (the raw copy
  the view reads), and the columns that weigh most.

Prints the tables and the per-day disk at 10^4, 10^5 and 10^6 calls/s with
the retention of each table; writes build/bench/ingest.json. Exit 0 whatever
the numbers, 1 when something broke (a call that never became a row).
The default run (rates 0, 60, 600, 3000 for 30 s each, then 200,000 calls of
the mixed mix, each for both agents) takes about 12 minutes.

    python -m bench.ingest [--rates 0,60,600,3000] [--seconds 30] [--warmup 10] [--no-spans]
                           [--calls N] [--mixes mixed,rest,grpc] [--without-rollups] [--quick]
                           [--agents logship,filelog]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from bench import benchlib
from bench.benchlib import ROOT
from envoy import wiring  # the access-log line format
from deploy.local import stack  # the components as shipped
from queries import rollup  # the views that fill the rollups
from wirelens_helpers.protowire import varint  # the OTLP spans are hand-encoded
from wirelens_helpers.wait import WaitTimeout, wait_for


SHORT = wiring.record_short_names()  # the names the filter publishes the record under

OUT_DIR = ROOT / "build" / "bench"
JSON_OUT = OUT_DIR / "ingest.json"
DEFAULT_CALLS = 200_000
MIXES = {
    "mixed": ("rest", "rest-proto", "grpc", "grpc-web", "grpc-web-text", "rest-transcoded"),
    "rest": ("rest",),
    "grpc": ("grpc",),
}
RATES = (10_000, 100_000, 1_000_000)  # calls per second, for the per-day table
RAW_LOGS_TTL_DAYS = 3  # collector/config.yaml: WIRELENS_RAW_LOGS_TTL's default, 72h
# The views that fill the rollups: the refreshable ones (issue 30, queries/schema/004_rollups.sql: the 10 s
# refreshes and the hourly settles, queries.rollup.VIEWS) and, on an older schema, the insert-time ones;
# --without-rollups drops whichever exist.
ROLLUP_VIEWS = (*rollup.VIEWS, *rollup.OLD_VIEWS)
DRAIN_TIMEOUT_S = 900.0
# What ships Envoy's access-log file (issue 32; deploy/local WIRELENS_LOG_SHIPPER): the agent's name in the
# tables and its stack component. filelog: our Collector with collector/filelog-agent.yaml.
AGENTS = {"logship": "logship", "filelog": "log-agent"}


class Broken(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ------------------------------------------------------------------ synthetic calls

# operation, streaming, REST route, REST method, request and response payload
# (protobuf bytes per message; JSON bodies are ~2.2x)
OPERATIONS = [
    ("catalog.GetProduct", "unary", "/v1/products/{id}", "GET", 8, 850),
    ("catalog.ListProducts", "unary", "/v1/products", "GET", 6, 7000),
    ("echo.BiStream", "bidi", "", "POST", 20, 20),
    ("echo.ServerStream", "server", "", "POST", 12, 20),
    ("echo.Unary", "unary", "/v1/echo", "POST", 20, 20),
    ("hello.SayHello", "unary", "/v1/hello", "POST", 8, 18),
    ("math.CalculateFactorial", "unary", "/v1/factorial", "POST", 6, 12),
    ("people.Register", "unary", "/v1/people", "POST", 60, 2),
]


def record(rng: random.Random, protocol: str, op: tuple) -> tuple[dict, dict]:
    """The filter's packed record and Envoy's own fields for one call of `protocol`."""
    name, shape, route, method, req_payload, resp_payload = op
    service, rpc = name.split(".")
    framed = protocol in ("grpc", "grpc-web", "grpc-web-text")
    if not framed and shape != "unary":
        shape, route = "unary", "/v1/echo"
    req_msgs = 1 + rng.randrange(50) if framed and shape in ("client", "bidi") else 1
    resp_msgs = (req_msgs if shape == "bidi" else 1 + rng.randrange(20)) if framed and shape != "unary" else 1
    json_body = protocol in ("rest", "rest-transcoded")
    req_body = int(req_payload * req_msgs * (2.2 if json_body else 1)) + (5 * req_msgs if framed else 0)
    resp_body = int(resp_payload * resp_msgs * (2.2 if json_body else 1)) + (5 * resp_msgs if framed else 0)
    duration = int(rng.lognormvariate(7, 0.6))
    failed = rng.random() < 0.01
    rec = {
        "wirelens.protocol": protocol, "wirelens.operation": name,
        "rpc.service": f"wirelens.v1.{service.capitalize()}", "rpc.method": rpc, "wirelens.streaming": shape,
    }
    if not framed:
        rec["http.route"] = route
    if framed:
        rec["rpc.grpc.status_code"] = 14 if failed else 0
    rec.update({
        "wirelens.request.header.size": 200 + rng.randrange(150),
        "wirelens.response.header.size": 68 if framed else 117,
        "wirelens.response.trailer.size": 24 if protocol == "grpc" else 0,
        "http.request.body.size": req_body, "http.response.body.size": resp_body,
        "wirelens.request.messages": req_msgs if framed else 0,
        "wirelens.response.messages": resp_msgs if framed else 0,
        "wirelens.time_to_first_byte_us": int(duration * 0.8), "wirelens.duration_us": duration,
        "wirelens.request.duration_us": int(duration * 0.2), "wirelens.malformed": 0,
    })
    http1 = protocol in ("rest", "rest-proto", "rest-transcoded")
    envoy = {
        "envoy.bytes_received": req_body, "envoy.bytes_sent": resp_body,
        "envoy.duration_ms": duration // 1000, "envoy.request_duration_ms": 0,
        "envoy.response_duration_ms": duration // 1000, "envoy.response_tx_duration_ms": 0,
        "envoy.duration_us": duration, "envoy.upstream_duration_us": int(duration * 0.7),
        "envoy.request_headers_bytes": 300 + rng.randrange(150),
        "envoy.response_headers_bytes": 112 if framed else 128,
        "envoy.downstream_header_bytes_received": 137 if http1 else 40 + rng.randrange(40),
        "envoy.downstream_header_bytes_sent": 138 if http1 else 15,
        "envoy.downstream_wire_bytes_received": req_body + 150,
        "envoy.downstream_wire_bytes_sent": resp_body + 140,
        "envoy.response_flags": "-", "envoy.upstream_host": f"127.0.0.1:{18080 if http1 else 18090}",
        "envoy.upstream_protocol": "HTTP/1.1" if protocol in ("rest", "rest-proto") else "HTTP/2",
        "envoy.upstream_service_time_ms": str(duration // 1000),
        "http.request.method": method if not framed else "POST",
        "http.response.status_code": 503 if failed and not framed else 200,
        "network.protocol.version": "HTTP/1.1" if http1 else "HTTP/2",
        "envoy.grpc_status": str(rec["rpc.grpc.status_code"]) if framed else "-",
        "wirelens.stack": "go",
    }
    return rec, envoy


def write_access_log(path: Path, calls: int, protocols: tuple[str, ...], seed: int = 1) -> int:
    """`calls` lines in the file access logger's format, one second of calls per 1/rate."""
    rng = random.Random(seed)
    attribute_names = set(wiring.access_log_attributes())
    start = time.time() - 600
    connection = 1000
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        for n in range(calls):
            protocol = protocols[n % len(protocols)]
            rec, envoy = record(rng, protocol, OPERATIONS[rng.randrange(len(OPERATIONS))])
            if n % 100 == 0:
                connection += 1
            attributes = {**envoy, "envoy.connection_id": connection,
                          "wirelens.record": json.dumps({SHORT[k]: v for k, v in rec.items()},
                                                        separators=(",", ":")),
                          "wirelens.request_id": str(uuid.UUID(int=rng.getrandbits(128))),
                          "wirelens.run_id": "bench-ingest"}
            if n == 0:
                missing = attribute_names - set(attributes) - {"envoy.traceparent"}  # set below
                if missing:
                    raise Broken(f"the synthetic line lacks access-log attributes {sorted(missing)}: "
                                 "update bench/ingest.py with envoy/wiring.py's RECORD_FIELDS")
            line = {"attributes": attributes,
                    "body": f"POST /{rec['rpc.service']}/{rec['rpc.method']} HTTP/2 200",
                    "span_id": f"{rng.getrandbits(64):016x}",
                    "time": f"{start + n * 0.0005:.9f}",
                    "trace_id": f"{rng.getrandbits(128):032x}"}
            # Envoy's injected traceparent: this call's span, sampled
            attributes["envoy.traceparent"] = f"00-{line['trace_id']}-{line['span_id']}-01"
            written += out.write(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n")
    return written


# ------------------------------------------------------------------ one run


def engine_pid(supervisor_pid: int) -> int:
    children = Path(f"/proc/{supervisor_pid}/task/{supervisor_pid}/children").read_text().split()
    if not children:
        raise Broken("the ClickHouse supervisor has no engine process")
    return int(children[0])


def cpu_s(pids: dict[str, int]) -> dict[str, float]:
    return {name: benchlib.process_cpu_ticks_ns(pid) / 1e9 for name, pid in pids.items()}


def count(settings: dict[str, str], sql: str) -> int:
    return int(stack.clickhouse_query(settings, sql).strip() or 0)


def table_storage(settings: dict[str, str], database: str, table: str) -> dict:
    rows, on_disk, compressed, uncompressed = stack.clickhouse_query(
        settings,
        "SELECT sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes) "
        f"FROM system.parts WHERE database = '{database}' AND table = '{table}' AND active "
        "FORMAT TabSeparated").split()
    heaviest = stack.clickhouse_query(
        settings,
        "SELECT name, data_compressed_bytes FROM system.columns "
        f"WHERE database = '{database}' AND table = '{table}' "
        "ORDER BY data_compressed_bytes DESC LIMIT 5 FORMAT TabSeparated")
    rows = int(rows)
    return {"rows": rows, "bytes_on_disk": int(on_disk), "compressed": int(compressed),
            "uncompressed": int(uncompressed),
            "bytes_per_call": int(on_disk) / rows if rows else None,
            "heaviest_columns": {name: int(size) for name, size in
                                 (line.split("\t") for line in heaviest.splitlines() if line)}}


def stack_settings(base: Path, agent: str) -> dict[str, str]:
    """The local stack's settings on free ports, state in `base`, Envoy's file shipped by `agent`."""
    defaults = stack.load_settings({})
    ports = [name for name in defaults if name.endswith("_PORT")]
    environ = dict(zip(ports, map(str, benchlib.free_ports(len(ports)))))
    environ["WIRELENS_STATE_DIR"] = str(base)
    environ["WIRELENS_LOG_SHIPPER"] = agent
    settings = stack.load_settings(environ)
    if AGENTS[agent] not in stack.BY_NAME or settings.get("WIRELENS_LOG_SHIPPER", "logship") != agent:
        raise Broken(f"agent {agent}: the local stack has no component {AGENTS[agent]!r} for "
                     f"WIRELENS_LOG_SHIPPER={agent} (deploy/local/components.py)")
    return settings


def tree_bytes(*paths: Path) -> int:
    """Bytes on disk (allocated blocks) of these files and everything under these directories."""
    total = 0
    for path in paths:
        for p in ([path] if path.is_file() else path.rglob("*") if path.is_dir() else []):
            try:
                total += p.stat().st_blocks * 512 if p.is_file() else 0
            except FileNotFoundError:
                continue  # rotated or deleted meanwhile
    return total


def access_log_files(settings: dict[str, str]) -> list[Path]:
    log = Path(settings["WIRELENS_ACCESS_LOG"])
    return [log, *sorted(log.parent.glob(log.name + ".*"))]


def agent_storage(settings: dict[str, str], agent: str) -> Path:
    """Where the agent keeps its place (and, for filelog, its persistent queue)."""
    return (Path(settings["WIRELENS_LOG_AGENT_STORAGE_DIR"]) if agent == "filelog"
            else stack.state_dir(settings) / "logship")


class DiskPeaks:
    """The largest bytes on disk seen of: Envoy's access-log file(s), the agent's storage, the Collector's queue."""

    def __init__(self, settings: dict[str, str], agent: str) -> None:
        self.settings, self.agent = settings, agent
        self.peak = {"access_log": 0, "agent_storage": 0, "collector_queue": 0}

    def sample(self) -> None:
        now = {"access_log": tree_bytes(*access_log_files(self.settings)),
               "agent_storage": tree_bytes(agent_storage(self.settings, self.agent)),
               "collector_queue": tree_bytes(Path(self.settings["WIRELENS_COLLECTOR_STORAGE_DIR"]))}
        self.peak = {k: max(v, now[k]) for k, v in self.peak.items()}


def run_mix(mix: str, calls: int, rollups: bool = True, agent: str = "logship") -> dict:
    base = Path(tempfile.mkdtemp(prefix=f"wirelens-ingest-{mix}-{agent}-"))
    settings = stack_settings(base, agent)
    result: dict = {"mix": mix, "agent": agent, "protocols": list(MIXES[mix]), "calls": calls, "rollups": rollups}
    try:
        log(f"{mix}: writing {calls:,} calls to {settings['WIRELENS_ACCESS_LOG']}")
        result["access_log_bytes"] = write_access_log(Path(settings["WIRELENS_ACCESS_LOG"]), calls, MIXES[mix])
        for name in ("clickhouse", "collector"):
            log(f"{mix}: {name} {stack.start_one(name, settings)}")
        if not rollups:
            for view in ROLLUP_VIEWS:
                stack.clickhouse_query(settings, f"DROP VIEW IF EXISTS {view}")
        pids = {"clickhouse": engine_pid(stack.read_pid(settings, "clickhouse")),
                "collector": stack.read_pid(settings, "collector")}
        before = cpu_s(pids)
        disk = DiskPeaks(settings, agent)
        t0 = time.monotonic()
        log(f"{mix}: {agent} {stack.start_one(AGENTS[agent], settings)}")
        pids[agent] = stack.read_pid(settings, AGENTS[agent])
        before[agent] = 0.0  # from its start
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        next_report = [time.monotonic() + 10]

        def rows() -> int:  # and a progress line every 10 s
            disk.sample()
            seen = count(settings, "SELECT count() FROM wirelens.requests")
            if time.monotonic() > next_report[0]:
                log(f"{mix}:   {seen:,} rows ({seen / (time.monotonic() - t0):,.0f}/s)")
                next_report[0] += 10
            return seen
        try:
            wait_for("every call in wirelens.requests", rows, lambda seen: seen >= calls, timeout_s=DRAIN_TIMEOUT_S,
                     interval_s=0.2)
        except WaitTimeout as short:
            raise Broken(f"{mix}: {short.last_seen:,} of {calls:,} calls in wirelens.requests after "
                         f"{DRAIN_TIMEOUT_S:.0f} s; logs in {base / 'logs'}") from None
        wall = time.monotonic() - t0
        disk.sample()
        # The inserts' background merges belong to the insert path's cost (within the same deadline).
        try:
            wait_for("the merges", lambda: count(settings, "SELECT count() FROM system.merges") == 0,
                     timeout_s=max(0.0, deadline - time.monotonic()), interval_s=0.2)
        except WaitTimeout:
            pass
        after = cpu_s(pids)
        spent = {name: after[name] - before[name] for name in pids}
        exact = count(settings, "SELECT count() FROM wirelens.requests FINAL")
        if exact != calls:
            raise Broken(f"{mix}: {exact:,} calls in wirelens.requests FINAL, expected {calls:,}")
        result["ingest"] = {
            "wall_s": wall, "calls_per_s_wall": calls / wall, "cpu_s": spent,
            "records_per_cpu_s": {name: calls / s if s > 0 else None for name, s in spent.items()},
        }
        log(f"{mix}: {calls:,} calls in {wall:.1f} s ({calls / wall:,.0f}/s on this machine); CPU s "
            + ", ".join(f"{n} {s:.1f}" for n, s in spent.items()))
        disk.sample()
        result["agent_disk"] = {
            "peak_bytes": disk.peak,
            "end_bytes": {"access_log": tree_bytes(*access_log_files(settings)),
                          "agent_storage": tree_bytes(agent_storage(settings, agent)),
                          "collector_queue": tree_bytes(Path(settings["WIRELENS_COLLECTOR_STORAGE_DIR"]))},
        }
        result["agent_disk"]["peak_bytes_per_call"] = {k: v / calls for k, v in disk.peak.items()}
        log(f"{mix}: {agent}: disk peak per call: " + ", ".join(
            f"{k} {v:.0f} B" for k, v in result["agent_disk"]["peak_bytes_per_call"].items()))
        for table in ("otel.otel_logs", "wirelens.requests"):
            stack.clickhouse_query(settings, f"OPTIMIZE TABLE {table} FINAL", timeout=600)
        result["storage"] = {"otel.otel_logs": table_storage(settings, "otel", "otel_logs"),
                             "wirelens.requests": table_storage(settings, "wirelens", "requests")}
        for table, s in result["storage"].items():
            log(f"{mix}: {table}: {s['bytes_per_call']:.1f} bytes/call on disk "
                f"({s['uncompressed'] / s['rows']:.0f} uncompressed)")
        return result
    finally:
        for name in (AGENTS[agent], "collector", "clickhouse"):
            stack.stop(name, settings)
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------ rate axis (issue 30)
#
# At a steady rate, what does the engine burn above its idle? The stack as
# shipped (ClickHouse, Collector, Jaeger, logship, the schema) on free ports;
# a driver appends access-log lines at the rate, every TICK_S (Envoy flushes
# its access-log file every WIRELENS_ENVOY_FILE_FLUSH_MS, 200 by default), and
# sends the same calls' spans to the Collector over OTLP/gRPC (the local stack
# traces every call). After a warm-up at each rate, the CPU of each process
# over the window, and inside the engine the CPU of each kind of thread
# (ClickHouse names its threads: TCPHandler, MergeMutate, AsyncInsert...) and
# the engine's own counters (system.events: inserts, parts written, merges).
# Rate 0 is the idle cost (the stack up, nothing flowing).

TICK_S = 0.2
DEFAULT_RATES = (0, 60, 600, 3000)
DEFAULT_SECONDS = 30.0
DEFAULT_WARMUP_S = 10.0
ENGINE_EVENTS = (
    "Query", "InsertQuery", "AsyncInsertQuery", "AsyncInsertRows", "AsyncInsertBytes", "FailedAsyncInsertQuery",
    "InsertedRows", "InsertedBytes", "MergeTreeDataWriterBlocks", "MergeTreeDataWriterRows",
    "Merge", "MergedRows", "MergeTotalMilliseconds", "MergesTimeMilliseconds", "SelectQuery",
    "DelayedInserts", "UserTimeMicroseconds", "SystemTimeMicroseconds",
)


def _pb_bytes(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _pb_fixed64(field: int, value: int) -> bytes:
    return varint(field << 3 | 1) + value.to_bytes(8, "little")


def _pb_attribute(key: str, value: object) -> bytes:
    """An OTLP KeyValue: string, int or double."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        any_value = _pb_bytes(1, str(value).encode())
    elif isinstance(value, int):
        any_value = varint(3 << 3 | 0) + varint(value & (2**64 - 1))
    else:
        import struct
        any_value = varint(4 << 3 | 1) + struct.pack("<d", value)
    return _pb_bytes(1, key.encode()) + _pb_bytes(2, any_value)


def otlp_spans_request(lines: list[dict]) -> bytes:
    """An OTLP ExportTraceServiceRequest (protobuf, hand-encoded: no OTLP package in the venv) with one
    server span per access-log line, tagged as Envoy's tracer tags the call's span (envoy/wiring.py's
    tracing: the record's span tags plus Envoy's own HTTP tags)."""
    spans = []
    for line in lines:
        attrs = line["attributes"]
        start = int(float(line["time"]) * 1e9)
        tags = {"wirelens.record": attrs["wirelens.record"], "wirelens.run_id": attrs["wirelens.run_id"],
                "component": "proxy", "node_id": "wirelens-local", "zone": "",
                "guid:x-request-id": attrs["wirelens.request_id"], "http.url": "http://127.0.0.1/x",
                "http.method": attrs.get("http.request.method", "POST"),
                "http.status_code": str(attrs.get("http.response.status_code", 200)),
                "http.protocol": attrs.get("network.protocol.version", "HTTP/2"),
                "upstream_cluster": "grpc_service", "upstream_cluster.name": "grpc_service",
                "response_size": str(attrs.get("envoy.bytes_sent", 0)),
                "request_size": str(attrs.get("envoy.bytes_received", 0)), "response_flags": "-"}
        span = (_pb_bytes(1, bytes.fromhex(line["trace_id"])) + _pb_bytes(2, bytes.fromhex(line["span_id"]))
                + _pb_bytes(5, b"ingress") + varint(6 << 3) + varint(2)  # SPAN_KIND_SERVER
                + _pb_fixed64(7, start) + _pb_fixed64(8, start + 1_000_000)
                + b"".join(_pb_bytes(9, _pb_attribute(k, v)) for k, v in tags.items()))
        spans.append(_pb_bytes(2, span))
    resource = _pb_bytes(1, b"".join(_pb_bytes(1, _pb_attribute(k, v)) for k, v in
                                      {"service.name": "wirelens-envoy"}.items()))
    scope_spans = _pb_bytes(2, b"".join(spans))
    return _pb_bytes(1, resource + scope_spans)


class SpanSender:
    """OTLP/gRPC trace exports to the Collector (raw protobuf bytes through grpc's generic stub)."""

    def __init__(self, port: int) -> None:
        import grpc  # noqa: PLC0415
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.export = self.channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                               request_serializer=None, response_deserializer=None)
        self.failed = 0

    def send(self, lines: list[dict]) -> None:
        try:
            self.export(otlp_spans_request(lines), timeout=5)
        except Exception:  # a refused export is counted, as Envoy's tracer would drop it
            self.failed += len(lines)

    def close(self) -> None:
        self.channel.close()


class LineSource:
    """Access-log lines of distinct calls, cheaply: templates made by write_access_log's record(), each use
    with a fresh request id and the time of now."""

    def __init__(self, protocols: tuple[str, ...], seed: int = 7, templates: int = 2000) -> None:
        self.rng = random.Random(seed)
        path = Path(tempfile.mkdtemp(prefix="wirelens-ingest-templates-")) / "t.jsonl"
        try:
            write_access_log(path, templates, protocols, seed)
            self.templates = [json.loads(line) for line in path.read_text().splitlines()]
        finally:
            shutil.rmtree(path.parent, ignore_errors=True)
        self.n = 0

    def take(self, count: int) -> list[dict]:
        out = []
        now = time.time()
        for _ in range(count):
            line = dict(self.templates[self.n % len(self.templates)])
            attributes = dict(line["attributes"])
            attributes["wirelens.request_id"] = str(uuid.UUID(int=self.rng.getrandbits(128)))
            line["attributes"] = attributes
            line["time"] = f"{now:.9f}"
            line["trace_id"] = f"{self.rng.getrandbits(128):032x}"
            line["span_id"] = f"{self.rng.getrandbits(64):016x}"
            out.append(line)
            self.n += 1
        return out


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """tid -> (thread name, CPU seconds so far) of the live threads of `pid`. ClickHouse names a pool
    thread after its current job, so a window's CPU goes to the name at its end (approximate)."""
    out: dict[str, tuple[str, float]] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise Broken(f"process {pid} is gone") from None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")].rstrip("0123456789").rstrip("-_ ") or "?"
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / benchlib.CLK_TCK)
    return out


def threads_delta(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]],
                  total_s: float) -> dict[str, float]:
    """CPU seconds in the window by thread name; `exited` = the process's total minus the live threads'."""
    out: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        out[name] = out.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    out["exited threads"] = total_s - sum(out.values())
    return {name: round(s, 2) for name, s in sorted(out.items(), key=lambda kv: -kv[1]) if s >= 0.01}


def engine_events(settings: dict[str, str]) -> dict[str, int]:
    names = ", ".join(f"'{e}'" for e in ENGINE_EVENTS)
    text = stack.clickhouse_query(settings, f"SELECT event, value FROM system.events WHERE event IN ({names}) "
                                            "FORMAT TabSeparated")
    return {name: int(value) for name, value in (line.split("\t") for line in text.splitlines() if line)}


def backlog(settings: dict[str, str], agent: str = "logship") -> dict:
    """Where calls written but not yet rows wait: logship's unshipped bytes (filelog: its exporter's queue),
    the Collector's logs queue."""
    from collector import tier  # noqa: PLC0415
    from deploy.local import components  # noqa: PLC0415
    out: dict = {}
    if agent == "logship":
        progress = components.logship_progress(settings) or {}
        out["logship_pending_bytes"] = progress.get("pending_bytes")
    else:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{settings['WIRELENS_LOG_AGENT_METRICS_PORT']}/metrics",
                                        timeout=5) as response:
                out["filelog_queue"] = tier.metric_sum(response.read().decode(), "otelcol_exporter_queue_size")
        except OSError:
            out["filelog_queue"] = None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics",
                                    timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return out
    out["collector_logs_queue"] = tier.metric_sum(text, "otelcol_exporter_queue_size", exporter="clickhouse/logs",
                                                  data_type="logs")
    out["collector_logs_sent"] = tier.metric_sum(text, "otelcol_exporter_sent_log_records",
                                                 exporter="clickhouse/logs")
    out["collector_logs_accepted"] = tier.metric_sum(text, "otelcol_receiver_accepted_log_records")
    out["collector_logs_refused"] = tier.metric_sum(text, "otelcol_receiver_refused_log_records")
    return out


def drive(settings: dict[str, str], source: LineSource, spans: SpanSender | None, rate: float,
          seconds: float, log_file) -> int:
    """Append `rate` calls a second to the access log (and send their spans) for `seconds`; returns the
    calls written. Paced against the clock: each tick writes what is due by then."""
    t0 = time.monotonic()
    written = 0
    while True:
        elapsed = time.monotonic() - t0
        if elapsed >= seconds:
            break
        due = int(rate * min(elapsed + TICK_S, seconds)) - written
        if due > 0:
            lines = source.take(due)
            log_file.write("".join(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n"
                                   for line in lines))
            log_file.flush()
            if spans:
                spans.send(lines)
            written += due
        pause = t0 + (int(elapsed / TICK_S) + 1) * TICK_S - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing the load, not waiting for a result
    return written


def run_rates(rates: list[int], seconds: float, warmup_s: float, with_spans: bool, mix: str = "mixed",
              setup_sql: list[str] | None = None, agent: str = "logship") -> dict:
    """One stack; each rate in the given order: warm-up, then the measured window. `setup_sql`: statements
    run once the schema is applied (what a change to the tables would cost, e.g. an index dropped)."""
    source = LineSource(MIXES[mix])  # first: a line it cannot make stops the run before anything starts
    base = Path(tempfile.mkdtemp(prefix=f"wirelens-ingest-rates-{agent}-"))
    settings = stack_settings(base, agent)
    result: dict = {"mix": mix, "agent": agent, "spans": with_spans, "seconds": seconds, "warmup_s": warmup_s,
                    "rates": []}
    names = ["clickhouse", "collector", agent] + (["jaeger"] if with_spans else [])
    spans = None
    try:
        access_log = Path(settings["WIRELENS_ACCESS_LOG"])
        access_log.parent.mkdir(parents=True, exist_ok=True)
        access_log.touch()
        for name in (["clickhouse", "jaeger", "collector", AGENTS[agent]] if with_spans
                     else ["clickhouse", "collector", AGENTS[agent]]):
            log(f"rates: {name} {stack.start_one(name, settings)}")
        for statement in setup_sql or []:
            log(f"rates: setup: {statement}")
            stack.clickhouse_query(settings, statement)
        result["setup_sql"] = setup_sql or []
        pids = {"clickhouse": engine_pid(stack.read_pid(settings, "clickhouse"))}
        for name in names[1:]:
            pids[name] = stack.read_pid(settings, AGENTS.get(name, name))
        spans = SpanSender(int(settings["WIRELENS_COLLECTOR_OTLP_PORT"])) if with_spans else None
        total_written = 0
        with open(access_log, "a") as log_file:
            for rate in rates:
                log(f"rates: {rate} calls/s: {warmup_s:.0f} s warm-up, then {seconds:.0f} s measured")
                total_written += drive(settings, source, spans, rate, warmup_s, log_file)
                rows0 = count(settings, "SELECT count() FROM wirelens.requests")
                busy0, all0 = benchlib.machine_cpu()
                cpu0, threads0, events0 = cpu_s(pids), thread_cpu(pids["clickhouse"]), engine_events(settings)
                t0 = time.monotonic()
                written = drive(settings, source, spans, rate, seconds, log_file)
                wall = time.monotonic() - t0
                cpu1, threads1, events1 = cpu_s(pids), thread_cpu(pids["clickhouse"]), engine_events(settings)
                busy1, all1 = benchlib.machine_cpu()
                total_written += written
                rows1 = count(settings, "SELECT count() FROM wirelens.requests")
                waiting = backlog(settings, agent)
                lag = total_written - rows1
                spent = {name: cpu1[name] - cpu0[name] for name in pids}
                by_thread = threads_delta(threads0, threads1, spent["clickhouse"])
                row = {"rate": rate, "wall_s": wall, "calls_written": written, "rows_in_window": rows1 - rows0,
                       "behind_at_end": lag, "backlog_at_end": waiting,
                       "cores": {name: s / wall for name, s in spent.items()}, "cpu_s": spent,
                       "engine_threads_cpu_s": by_thread,
                       "engine_events": {k: events1.get(k, 0) - events0.get(k, 0) for k in ENGINE_EVENTS
                                         if events1.get(k, 0) - events0.get(k, 0)},
                       "machine_busy_cores": round((busy1 - busy0) / max(all1 - all0, 1e-9) * (os.cpu_count() or 1), 2),
                       "spans_failed": spans.failed if spans else 0}
                row["records_per_engine_cpu_s"] = (row["rows_in_window"] / spent["clickhouse"]
                                                   if rate and spent["clickhouse"] > 0 else None)
                result["rates"].append(row)
                log(f"rates: {agent}: {rate} calls/s: engine {row['cores']['clickhouse']:.3f} cores, collector "
                    f"{row['cores']['collector']:.3f}, {agent} {row['cores'][agent]:.3f}"
                    + (f", jaeger {row['cores']['jaeger']:.3f}" if with_spans else "")
                    + f"; {row['rows_in_window']:,} rows in the window, {lag:,} behind at its end ({waiting}); "
                    f"engine threads {dict(list(by_thread.items())[:6])}; events {row['engine_events']}")
        # Every call written must arrive (the window's rows are only a rate if nothing is lost).
        try:
            wait_for("every call written in wirelens.requests",
                     lambda: count(settings, "SELECT count() FROM wirelens.requests FINAL"),
                     lambda seen: seen >= total_written, timeout_s=120, interval_s=0.5)
        except WaitTimeout as short:
            raise Broken(f"rates ({agent}): {short.last_seen:,} of {total_written:,} calls in wirelens.requests FINAL "
                         f"120 s after the last rate; logs in {base / 'logs'}") from None
        result["calls_written"] = total_written
        if spans:  # the hand-encoded spans must have been read as spans: a broken encoding fails here
            expected = total_written - spans.failed
            try:
                wait_for("the calls' spans in otel.otel_traces",
                         lambda: count(settings, "SELECT count() FROM otel.otel_traces"),
                         lambda seen: seen >= expected, timeout_s=60, interval_s=0.5)
            except WaitTimeout as short:
                raise Broken(f"rates: {short.last_seen:,} of {expected:,} spans in otel.otel_traces "
                             f"({spans.failed:,} exports refused); logs in {base / 'logs'}") from None
        return result
    finally:
        if spans:
            spans.close()
        for name in (AGENTS[agent], "collector", "jaeger", "clickhouse"):
            stack.stop(name, settings)
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------ report


def per_day_table(results: list[dict], requests_ttl_days: int, raw_ttl_days: int | None) -> list[dict]:
    """Disk at each rate: wirelens.requests kept requests_ttl_days, otel_logs raw_ttl_days (None: forever)."""
    rows = []
    for r in results:
        req = r["storage"]["wirelens.requests"]["bytes_per_call"]
        raw = r["storage"]["otel.otel_logs"]["bytes_per_call"]
        for rate in RATES:
            per_day = rate * 86_400
            rows.append({"mix": r["mix"], "calls_per_s": rate,
                         "requests_gb_per_day": req * per_day / 1e9,
                         "otel_logs_gb_per_day": raw * per_day / 1e9,
                         "requests_tb_retained": req * per_day * requests_ttl_days / 1e12,
                         "otel_logs_tb_retained": (raw * per_day * raw_ttl_days / 1e12
                                                   if raw_ttl_days is not None else None)})
    return rows


def print_rates(rates: dict) -> None:
    rows = rates["rates"]
    idle = next((r["cores"]["clickhouse"] for r in rows if r["rate"] == 0), None)
    agent = rates.get("agent", "logship")
    print()
    print(f"Steady rates, agent {agent} ({rates['seconds']:g} s each after {rates['warmup_s']:g} s of warm-up, "
          f"{'with' if rates['spans'] else 'without'} the calls' spans): cores of each component")
    names = [n for n in ("clickhouse", "collector", agent, "jaeger") if n in rows[0]["cores"]]
    print(f"{'calls/s':>8} " + " ".join(f"{n:>10}" for n in names)
          + f" {'engine-idle':>11} {'rec/engine-s':>12} {'behind':>7} {'inserts':>8} {'parts':>7} {'merges':>7}"
          + f" {'machine':>8}")
    for r in rows:
        ev = r["engine_events"]
        above = r["cores"]["clickhouse"] - idle if idle is not None else None
        print(f"{r['rate']:>8,} " + " ".join(f"{r['cores'][n]:>10.3f}" for n in names)
              + f" {above if above is not None else float('nan'):>11.3f}"
              + f" {r['records_per_engine_cpu_s'] or 0:>12,.0f} {r['behind_at_end']:>7,}"
              + f" {ev.get('InsertQuery', 0):>8,} {ev.get('MergeTreeDataWriterBlocks', 0):>7,}"
              + f" {ev.get('Merge', 0):>7,} {r['machine_busy_cores']:>8}")
    print("(engine-idle: the engine's cores above rate 0's; inserts, parts, merges: the engine's counters in "
          "the window; machine: cores busy on the whole machine)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=DEFAULT_CALLS,
                    help=f"calls per mix (default {DEFAULT_CALLS:,})")
    ap.add_argument("--mixes", default="mixed",
                    help=f"bulk runs (a file of --calls calls shipped at once), comma-separated, of "
                         f"{', '.join(MIXES)}; '' for none (default: mixed)")
    ap.add_argument("--rates", default=",".join(map(str, DEFAULT_RATES)),
                    help="the rate axis: calls/s, comma-separated, run in this order on one stack, each "
                         f"after a warm-up ('' for none; default {','.join(map(str, DEFAULT_RATES))}; "
                         "0 = the idle cost)")
    ap.add_argument("--seconds", type=float, default=DEFAULT_SECONDS,
                    help=f"measured window per rate (default {DEFAULT_SECONDS:g})")
    ap.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_S,
                    help=f"warm-up per rate before its window (default {DEFAULT_WARMUP_S:g})")
    ap.add_argument("--no-spans", action="store_true",
                    help="rate axis without the calls' spans (the local stack traces every call)")
    ap.add_argument("--setup-sql", action="append", default=[], metavar="STATEMENT",
                    help="rate axis: a statement run once the schema is applied, before the first rate "
                         "(repeatable), to measure what a table change costs, e.g. "
                         "'ALTER TABLE otel.otel_logs DROP INDEX IF EXISTS idx_log_attr_value'")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 5,000 calls, the mixed mix; rates 0 and 60, 10 s each")
    ap.add_argument("--without-rollups", action="store_true",
                    help="also run the mixed mix with the rollup views dropped: what the rollups cost ClickHouse")
    ap.add_argument("--agents", default=",".join(AGENTS),
                    help="what ships Envoy's access-log file, comma-separated, each run on its own stack in turn: "
                         f"{', '.join(AGENTS)} (default: both, side by side)")
    ap.add_argument("--json", type=Path, default=JSON_OUT, help="results file")
    args = ap.parse_args(argv)
    agents = [a for a in args.agents.split(",") if a]
    if not agents or set(agents) - set(AGENTS):
        ap.error(f"--agents {args.agents!r}: expected some of {', '.join(AGENTS)}")
    mixes = [m for m in args.mixes.split(",") if m]
    unknown = set(mixes) - set(MIXES)
    if unknown:
        ap.error(f"--mixes: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(MIXES)}")
    try:
        rates = [int(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        ap.error(f"--rates {args.rates!r}: expected whole calls/s, comma-separated (e.g. 0,60,600,3000)")
    if any(r < 0 for r in rates):
        ap.error(f"--rates {args.rates!r}: a rate cannot be negative")
    if args.seconds <= 0 or args.warmup < 0:
        ap.error("--seconds must be positive and --warmup not negative")
    if args.quick:
        args.calls, mixes = 5_000, ["mixed"]
        rates, args.seconds, args.warmup = [0, 60], 10.0, 5.0
    if args.calls <= 0:
        ap.error("--calls must be positive")
    ttl_days = int(stack.load_settings({})["WIRELENS_REQUESTS_TTL_DAYS"])

    result: dict = {"meta": {"calls": args.calls, "quick": args.quick, "host": platform.node(),
                             "cpus": os.cpu_count(), "requests_ttl_days": ttl_days,
                             "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
                    "agents": agents, "mixes": [], "rates": None, "rates_by_agent": {}, "problems": []}
    rc = 0
    busy0, total0 = benchlib.machine_cpu()
    for agent in agents if rates else []:
        try:
            result["rates_by_agent"][agent] = run_rates(rates, args.seconds, args.warmup, not args.no_spans,
                                                        setup_sql=args.setup_sql, agent=agent)
            result["rates"] = result["rates"] or result["rates_by_agent"][agent]  # the first agent's, as before
        except (Broken, stack.StackError) as exc:
            result["problems"].append(str(exc))
            log(f"rates ({agent}): BROKEN: {exc}")
            rc = 1
    # Each agent on the same mixes; the no-rollups run (what the views cost ClickHouse) with the first only.
    runs = ([(mix, True, agent) for mix in mixes for agent in agents]
            + ([("mixed", False, agents[0])] if args.without_rollups else []))
    for mix, rollups, agent in runs:
        try:
            result["mixes"].append(run_mix(mix, args.calls, rollups, agent))
        except (Broken, stack.StackError) as exc:
            result["problems"].append(str(exc))
            log(f"{mix} ({agent}): BROKEN: {exc}")
            rc = 1
    busy1, total1 = benchlib.machine_cpu()
    result["meta"]["machine_busy_cores"] = round((busy1 - busy0) / max(total1 - total0, 1e-9)
                                                 * (os.cpu_count() or 1), 2)
    result["per_day"] = per_day_table([m for m in result["mixes"] if m["rollups"] and m["agent"] == agents[0]],
                                      ttl_days, RAW_LOGS_TTL_DAYS)

    for agent in agents:
        if agent in result["rates_by_agent"]:
            print_rates(result["rates_by_agent"][agent])
    if len(result["rates_by_agent"]) > 1:
        print()
        print("The agents side by side at each rate: the agent's cores, and records per agent CPU second")
        print(f"{'calls/s':>8} " + " ".join(f"{a + ' cores':>15} {a + ' rec/CPU s':>17}" for a in result["rates_by_agent"]))
        by_rate = {a: {r["rate"]: r for r in run["rates"]} for a, run in result["rates_by_agent"].items()}
        for rate in rates:
            cells = []
            for a in result["rates_by_agent"]:
                r = by_rate[a].get(rate)
                cores = r["cores"][a] if r else float("nan")
                per_s = (r["calls_written"] / r["cpu_s"][a]) if r and rate and r["cpu_s"][a] > 0 else float("nan")
                cells.append(f"{cores:>15.3f} {per_s:>17,.0f}")
            print(f"{rate:>8,} " + " ".join(cells))
    if result["mixes"]:
        print()
        print(f"Ingest as shipped (agent → Collector → ClickHouse), {args.calls:,} calls per mix and agent, the file "
              "written first: records per CPU second of each component (= records/s one core sustains), and the "
              "agent's disk at its peak per call")
        print(f"{'mix':<22} {'agent':<8} {'wall calls/s':>12} {'agent':>9} {'Collector':>10} {'ClickHouse':>11}   "
              f"{'access log B/call':>17} {'agent store B/call':>18} {'Coll. queue B/call':>18}   "
              f"{'requests B/call':>15} {'otel_logs B/call':>16}")
    for r in result["mixes"]:
        per = r["ingest"]["records_per_cpu_s"]
        st = r["storage"]
        disk = r["agent_disk"]["peak_bytes_per_call"]
        label = r["mix"] if r["rollups"] else f"{r['mix']}, no rollup views"
        print(f"{label:<22} {r['agent']:<8} {r['ingest']['calls_per_s_wall']:>12,.0f} {per[r['agent']] or 0:>9,.0f} "
              f"{per['collector'] or 0:>10,.0f} {per['clickhouse'] or 0:>11,.0f}   "
              f"{disk['access_log']:>17.1f} {disk['agent_storage']:>18.1f} {disk['collector_queue']:>18.1f}   "
              f"{st['wirelens.requests']['bytes_per_call']:>15.1f} {st['otel.otel_logs']['bytes_per_call']:>16.1f}")
    if result["mixes"]:
        print("(agent store: logship's checkpoint; filelog's file_storage: offsets and its exporter's persistent "
              "queue, a second copy of what it read; Coll. queue: the Collector's persistent queues)")
    if result["per_day"]:
        print()
        print(f"Disk per day, and kept: wirelens.requests for its {ttl_days} days (WIRELENS_REQUESTS_TTL_DAYS), "
              f"otel.otel_logs for {RAW_LOGS_TTL_DAYS} (WIRELENS_RAW_LOGS_TTL); unsampled (scale by the sample rate)")
        print(f"{'mix':<7} {'calls/s':>9} {'requests GB/day':>16} {'otel_logs GB/day':>17} "
              f"{'requests TB kept':>17} {'otel_logs TB kept':>18}")
        for row in result["per_day"]:
            print(f"{row['mix']:<7} {row['calls_per_s']:>9,} {row['requests_gb_per_day']:>16,.1f} "
                  f"{row['otel_logs_gb_per_day']:>17,.1f} {row['requests_tb_retained']:>17,.2f} "
                  f"{row['otel_logs_tb_retained']:>18,.2f}")
    print(f"Cores busy on this machine meanwhile: {result['meta']['machine_busy_cores']} of {os.cpu_count()}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.json}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
