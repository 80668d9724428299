"""What the services' own tracing costs the services (issue 34 item 1): the application's cost,
measured apart from the filter's (the filter and Envoy are not in this path at all).

Two pairs of the Go services run side by side: one with WIRELENS_SERVICE_TRACING=off (no SDK, no
instrumentation), one with it on (OpenTelemetry's SDK, otelhttp / otelgrpc, the batching OTLP/gRPC
exporter) exporting to a minimal OTLP sink in this process that answers every Export with OK (the
Collector's own cost stays out of the figure). loadgen sends the calls straight to each service
(-trace header: every call arrives with a sampled traceparent, so the traced pair records a span for
every call: the most tracing can cost), in interleaved repetitions. Per call: the service process's
CPU µs (schedstat, all threads) and loadgen's p50.

    python -m bench.service_tracing [--calls 5000] [--reps 3] [--concurrency 4]

Result: build/bench/service_tracing.json and a table. CPU µs on these VMs swing ~30 % between
runs: read the medians of the repetitions, not one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc

from bench import benchlib
from bench.benchlib import ROOT
from wirelens_helpers import supervise
from wirelens_helpers.ports import free_ports

BIN = ROOT / "bin"
OUT = ROOT / "build" / "bench" / "service_tracing.json"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
# (loadgen -protocol, the server it calls)
LOADS = (("rest", "rest-server"), ("grpc", "grpc-server"))


class Sink:
    """An OTLP/gRPC trace receiver that accepts every Export (an empty ExportTraceServiceResponse) and counts them."""

    def __init__(self, port: int):
        self.requests = self.bytes = 0
        self.lock = threading.Lock()

        def export(request: bytes, context) -> bytes:
            with self.lock:
                self.requests += 1
                self.bytes += len(request)
            return b""

        handler = grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {
            "Export": grpc.unary_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=1)


def start_pair(mode: str, sink_port: int, work: Path) -> dict[str, tuple[supervise.Supervised, int]]:
    env = {**os.environ, "WIRELENS_SERVICE_TRACING": mode,
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}", "OTEL_BSP_SCHEDULE_DELAY": "500"}
    pair = {}
    for (_, name), port in zip(LOADS, free_ports(len(LOADS))):
        binary = BIN / name
        if not binary.exists():
            raise SystemExit(f"{binary.relative_to(ROOT)} is missing: run `make services`")
        env["OTEL_SERVICE_NAME"] = f"bench-{name}"
        process = supervise.Supervised(f"{name}-{mode}", [str(binary), "-listen", f"127.0.0.1:{port}"],
                                       work / f"{name}-{mode}.log", env=dict(env), new_session=False)
        process.start()
        ready = (supervise.http_ok(f"http://127.0.0.1:{port}/healthz") if name == "rest-server"
                 else supervise.tcp_open(port))
        process.wait_ready(ready, timeout_s=30, error=RuntimeError)
        pair[name] = (process, port)
    return pair


def load(protocol: str, port: int, calls: int, concurrency: int) -> dict:
    result = subprocess.run([str(BIN / "loadgen"), "-target", f"127.0.0.1:{port}", "-protocol", protocol,
                             "-operation", "hello.SayHello", "-n", str(calls), "-concurrency", str(concurrency),
                             "-progress", "off", "-timeout", "300s"], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"loadgen -protocol {protocol} -target :{port}: {result.stderr.strip()}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000, help="calls per load and repetition (default 5000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, modes interleaved (default 3)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 rep of 500 calls (numbers meaningless)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.reps = 500, 1
    sink_port = free_ports(1)[0]
    sink = Sink(sink_port)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="wirelens-bench-tracing-") as tmp:
        pairs = {mode: start_pair(mode, sink_port, Path(tmp)) for mode in ("off", "on")}
        try:
            for mode, pair in pairs.items():  # warm-up: connections, the catalog, the exporter's channel
                for protocol, name in LOADS:
                    load(protocol, pair[name][1], 500, args.concurrency)
            for rep in range(args.reps):
                order = ("off", "on") if rep % 2 == 0 else ("on", "off")
                for protocol, name in LOADS:
                    for mode in order:
                        process, port = pairs[mode][name]
                        before = benchlib.process_cpu_ns(process.pid)
                        summary = load(protocol, port, args.calls, args.concurrency)
                        cpu = benchlib.process_cpu_ns(process.pid) - before
                        runs.append({"rep": rep, "protocol": protocol, "tracing": mode, "calls": summary["calls"],
                                     "service_cpu_us_per_call": cpu / 1000 / summary["calls"],
                                     "p50_ms": summary["p50_ms"], "rate_per_s": summary["rate_per_s"]})
                        print(f"rep {rep} {protocol:<5} tracing {mode:<3}: {runs[-1]['service_cpu_us_per_call']:7.1f} "
                              f"CPU µs/call, p50 {summary['p50_ms']:.3f} ms, {summary['rate_per_s']:.0f}/s",
                              file=sys.stderr)
        finally:
            for pair in pairs.values():
                for process, _ in pair.values():
                    process.stop(grace_s=5.0)
            sink.stop()
    table = {}
    for protocol, _ in LOADS:
        row = {}
        for mode in ("off", "on"):
            mine = [r for r in runs if r["protocol"] == protocol and r["tracing"] == mode]
            row[mode] = {"cpu_us_per_call": benchlib.median([r["service_cpu_us_per_call"] for r in mine]),
                         "p50_ms": benchlib.median([r["p50_ms"] for r in mine])}
        row["added_cpu_us_per_call"] = row["on"]["cpu_us_per_call"] - row["off"]["cpu_us_per_call"]
        row["ratio"] = row["on"]["cpu_us_per_call"] / row["off"]["cpu_us_per_call"]
        table[protocol] = row
    result = {"quick": args.quick, "calls": args.calls, "reps": args.reps, "concurrency": args.concurrency, "runs": runs, "table": table,
              "exports": sink.requests, "export_bytes": sink.bytes, "loadavg": benchlib.loadavg()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"service tracing cost (Go services, no Envoy; medians of {args.reps} reps x {args.calls} calls, "
          f"concurrency {args.concurrency}; {sink.requests} OTLP exports, {sink.bytes:,} bytes):")
    print(f"  {'':<5} {'CPU µs/call off':>16} {'on':>8} {'added':>8} {'on/off':>7}   {'p50 ms off':>10} {'on':>7}")
    for protocol, row in table.items():
        print(f"  {protocol:<5} {row['off']['cpu_us_per_call']:16.1f} {row['on']['cpu_us_per_call']:8.1f} "
              f"{row['added_cpu_us_per_call']:+8.1f} {row['ratio']:7.2f}   {row['off']['p50_ms']:10.3f} "
              f"{row['on']['p50_ms']:7.3f}")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
