"""What does one call cost the pipeline behind Envoy? Ingest CPU and disk per call.

(`make bench`, section `ingest`; also `make bench-ingest`.)

For each protocol mix (all six protocols evenly, REST only, gRPC only) it
starts the pipeline exactly as the local stack ships it, on free loopback
ports in a temporary directory — ClickHouse (the chdb-core engine),
the Collector (`collector/config.yaml`, `bin/otelcol-wirelens`), the schema
(`queries/schema`), logship — and lets logship ship an access-log file of N
synthetic calls written beforehand in Envoy's format (`envoy/wiring.py`'s
`access_log_line_format`: the same attributes, the filter's packed record).
Then:

- ingest: from logship's start until every call is a row in
  `wirelens.requests` (and background merges have settled), the CPU time of
  each process (utime+stime from /proc): records per CPU second = records per
  second one core of that component sustains on the insert path as shipped
  (logship → OTLP → memory_limiter → transform → clickhouse exporter →
  `otel.otel_logs` → materialized view → `wirelens.requests`);
- storage: after `OPTIMIZE ... FINAL`, the bytes on disk per call of
  `wirelens.requests` and of the exporter's `otel.otel_logs` (the raw copy
  the view reads), and the columns that weigh most.

Prints a table and the per-day disk at 10^4, 10^5 and 10^6 calls/s with the
retention of each table; writes build/bench/ingest.json. Exit 0 whatever the
numbers, 1 when something broke.

    python -m bench.ingest [--calls N] [--mixes mixed,rest,grpc] [--quick]
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
import uuid
from pathlib import Path

from bench import benchlib
from bench.benchlib import ROOT
from envoy import wiring  # the access-log line format
from deploy.local import stack  # the components as shipped
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
ROLLUP_VIEWS = ("wirelens.requests_by_minute_from_requests", "wirelens.requests_by_second_from_requests")
DRAIN_TIMEOUT_S = 900.0


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
                missing = attribute_names - set(attributes)
                if missing:
                    raise Broken(f"the synthetic line lacks access-log attributes {sorted(missing)}: "
                                 "update bench/ingest.py with envoy/wiring.py's RECORD_FIELDS")
            line = {"attributes": attributes,
                    "body": f"POST /{rec['rpc.service']}/{rec['rpc.method']} HTTP/2 200",
                    "span_id": f"{rng.getrandbits(64):016x}",
                    "time": f"{start + n * 0.0005:.9f}",
                    "trace_id": f"{rng.getrandbits(128):032x}"}
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


def run_mix(mix: str, calls: int, rollups: bool = True) -> dict:
    base = Path(tempfile.mkdtemp(prefix=f"wirelens-ingest-{mix}-"))
    defaults = stack.load_settings({})
    ports = [name for name in defaults if name.endswith("_PORT")]
    environ = dict(zip(ports, map(str, benchlib.free_ports(len(ports)))))
    environ["WIRELENS_STATE_DIR"] = str(base)
    settings = stack.load_settings(environ)
    result: dict = {"mix": mix, "protocols": list(MIXES[mix]), "calls": calls, "rollups": rollups}
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
        t0 = time.monotonic()
        log(f"{mix}: logship {stack.start_one('logship', settings)}")
        pids["logship"] = stack.read_pid(settings, "logship")
        before["logship"] = 0.0  # from its start
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        next_report = [time.monotonic() + 10]

        def rows() -> int:  # and a progress line every 10 s
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
        for table in ("otel.otel_logs", "wirelens.requests"):
            stack.clickhouse_query(settings, f"OPTIMIZE TABLE {table} FINAL", timeout=600)
        result["storage"] = {"otel.otel_logs": table_storage(settings, "otel", "otel_logs"),
                             "wirelens.requests": table_storage(settings, "wirelens", "requests")}
        for table, s in result["storage"].items():
            log(f"{mix}: {table}: {s['bytes_per_call']:.1f} bytes/call on disk "
                f"({s['uncompressed'] / s['rows']:.0f} uncompressed)")
        return result
    finally:
        for name in ("logship", "collector", "clickhouse"):
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=DEFAULT_CALLS,
                    help=f"calls per mix (default {DEFAULT_CALLS:,})")
    ap.add_argument("--mixes", default=",".join(MIXES), help=f"comma-separated, of {', '.join(MIXES)}")
    ap.add_argument("--quick", action="store_true", help="smoke test: 5,000 calls, the mixed mix only")
    ap.add_argument("--without-rollups", action="store_true",
                    help="also run the mixed mix with the rollup views dropped: what the rollups cost ClickHouse")
    ap.add_argument("--json", type=Path, default=JSON_OUT, help="results file")
    args = ap.parse_args(argv)
    mixes = args.mixes.split(",")
    unknown = set(mixes) - set(MIXES)
    if unknown:
        ap.error(f"--mixes: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(MIXES)}")
    if args.quick:
        args.calls, mixes = 5_000, ["mixed"]
    ttl_days = int(stack.load_settings({})["WIRELENS_REQUESTS_TTL_DAYS"])

    result: dict = {"meta": {"calls": args.calls, "quick": args.quick, "host": platform.node(),
                             "cpus": os.cpu_count(), "requests_ttl_days": ttl_days,
                             "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")},
                    "mixes": [], "problems": []}
    rc = 0
    busy0, total0 = benchlib.machine_cpu()
    runs = [(mix, True) for mix in mixes] + ([("mixed", False)] if args.without_rollups else [])
    for mix, rollups in runs:
        try:
            result["mixes"].append(run_mix(mix, args.calls, rollups))
        except (Broken, stack.StackError) as exc:
            result["problems"].append(str(exc))
            log(f"{mix}: BROKEN: {exc}")
            rc = 1
    busy1, total1 = benchlib.machine_cpu()
    result["meta"]["machine_busy_cores"] = round((busy1 - busy0) / max(total1 - total0, 1e-9)
                                                 * (os.cpu_count() or 1), 2)
    result["per_day"] = per_day_table([m for m in result["mixes"] if m["rollups"]], ttl_days, RAW_LOGS_TTL_DAYS)

    print()
    print(f"Ingest as shipped (logship → Collector → ClickHouse), {args.calls:,} calls per mix: "
          "records per CPU second of each component (= records/s one core sustains)")
    print(f"{'mix':<22} {'wall calls/s':>12} {'logship':>9} {'Collector':>10} {'ClickHouse':>11}   "
          f"{'requests B/call':>15} {'otel_logs B/call':>16}")
    for r in result["mixes"]:
        per = r["ingest"]["records_per_cpu_s"]
        st = r["storage"]
        label = r["mix"] if r["rollups"] else f"{r['mix']}, no rollup views"
        print(f"{label:<22} {r['ingest']['calls_per_s_wall']:>12,.0f} {per['logship'] or 0:>9,.0f} "
              f"{per['collector'] or 0:>10,.0f} {per['clickhouse'] or 0:>11,.0f}   "
              f"{st['wirelens.requests']['bytes_per_call']:>15.1f} {st['otel.otel_logs']['bytes_per_call']:>16.1f}")
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
