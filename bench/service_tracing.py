"""What the services' own tracing costs the services (issue 34 item 1): the application's cost,
measured apart from the filter's (the filter and Envoy are not in this path at all).

For each stack (--stacks, default go,python,jvm) its servers run twice side by side: one set with
WIRELENS_SERVICE_TRACING=off (no SDK: the Go servers skip it, the Python pair imports none, the JVMs
start without the Java agent), one with it on (Go: otelhttp / otelgrpc; Python: OpenTelemetry's
FastAPI and grpcio instrumentation; JVM: the OpenTelemetry Java agent; each with its SDK's batching
OTLP/gRPC exporter). Every server is started exactly as the local stack starts it: its Component of
deploy/local/components.py through stack.start (command, environment, tracing switch, readiness),
on free ports, with the OTLP endpoint pointing at a minimal sink in this process that answers every
Export with OK (the Collector's own cost stays out of the figure) and counts the spans per service.
loadgen sends hello.SayHello straight to each server (-trace header: every call arrives with a
sampled traceparent, so the traced server records a span for every call: the most tracing can
cost), in interleaved repetitions. Per call: the server's CPU µs and loadgen's p50.

A server's CPU is that of its whole process tree (uvicorn, the JVM, anything they fork), read from
each process's CPU clock (benchlib.process_cpu_ns: ns resolution, and it keeps the time of threads
that have exited, e.g. a pool thread retired mid-run).

Warm-up, before any measured repetition, per server and mode: chunks of calls until the CPU µs per
call of the last 3 chunks lie within 10 % of each other (and at least the stack's minimum). The
JVM's minimum is 80,000 calls (chunks of 2,000, at most 120,000): HotSpot compiles a method with C2
after ~10-15k invocations and every hot method on the call path runs at least once per call, and
measured here (a loaded machine) WebFlux kept falling far past that: with the agent 1459, 848, 586,
495 ... 285 µs/call over its first 40,000 calls, and the next measured runs read 261, 116, 118
(minimums of 20,000 and 40,000 calls were not enough: the traced WebFlux row read 0.90x, then 1.39x,
then 3.15x; untraced WebFlux and Web MVC reached their floor only after ~60-70k calls). The measured
repetitions are then of compiled code, not of the interpreter or of the JIT compiler's threads
(their CPU is the process's). The chunks' CPU µs/call are kept in the JSON (warmup) to show
each curve.

    python -m bench.service_tracing [--stacks go,python,jvm] [--calls 5000] [--reps 3] [--concurrency 4]

Result: build/bench/service_tracing.json and a table, one row per stack x protocol (the JVM's REST
twice: WebFlux and Web MVC). CPU µs on these VMs swing ~30 % between runs: read the medians of the
repetitions, not one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from bench import benchlib, soak
from bench.benchlib import ROOT
from deploy.local import stack
from deploy.local.components import SERVICE_NAMES
from wirelens_helpers.wait import WaitTimeout, wait_for

BIN = ROOT / "bin"
OUT = ROOT / "build" / "bench" / "service_tracing.json"
MODES = ("off", "on")


@dataclasses.dataclass(frozen=True)
class Server:
    stack: str
    protocol: str      # loadgen -protocol
    component: str     # its Component in deploy/local/components.py
    framework: str     # what serves it, and what traces it when tracing is on

    @property
    def label(self) -> str:
        flavour = {"jvm-rest-service": " webflux", "jvm-mvc-rest-service": " mvc"}.get(self.component, "")
        return f"{self.stack} {self.protocol}{flavour}"

    @property
    def service_name(self) -> str:
        return SERVICE_NAMES[self.component]


STACKS: dict[str, tuple[Server, ...]] = {
    "go": (Server("go", "rest", "rest-service", "net/http, otelhttp"),
           Server("go", "grpc", "grpc-service", "grpc-go, otelgrpc")),
    "python": (Server("python", "rest", "python-rest-service", "FastAPI on uvicorn, OTel FastAPI instrumentation"),
               Server("python", "grpc", "python-grpc-service", "grpcio, OTel grpcio instrumentation")),
    "jvm": (Server("jvm", "rest", "jvm-rest-service", "Spring WebFlux, OTel Java agent"),
            Server("jvm", "rest", "jvm-mvc-rest-service", "Spring Web MVC, OTel Java agent"),
            Server("jvm", "grpc", "jvm-grpc-service", "grpc-java, OTel Java agent")),
}
# The make target that builds each stack's servers (what a missing build's error names).
MAKE_TARGET = {"go": "make services", "python": "make python-services", "jvm": "make jvm-services"}


@dataclasses.dataclass(frozen=True)
class Warmup:
    chunk: int       # calls per chunk
    minimum: int     # calls at least
    maximum: int     # calls at most, settled or not


# The JVM: past C2's compile thresholds first (module docstring); Go and Python have no JIT to wait for.
WARMUP = {"go": Warmup(500, 1000, 5000), "python": Warmup(500, 1000, 5000), "jvm": Warmup(2000, 80000, 120000)}
QUICK_WARMUP = Warmup(250, 500, 500)
# Steady: the last 3 chunks within 10 % of each other (with 2, one lucky pair ends a warm-up on a shared
# machine: Web MVC's "settled" at 152.8, 150.3 µs/call, and its next run read 336).
SETTLED, STEADY_CHUNKS = 0.10, 3


def parse_stacks(value: str) -> list[str]:
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in STACKS]
    if unknown or not names:
        raise SystemExit(f"--stacks {value!r}: expected a comma-separated list of {', '.join(STACKS)}")
    return [s for s in STACKS if s in names]


# ------------------------------------------------------------------ the OTLP sink

class Sink:
    """An OTLP/gRPC trace receiver that accepts every Export (an empty ExportTraceServiceResponse) and counts
    requests, bytes and spans per service.name."""

    def __init__(self, port: int):
        self.requests = self.bytes = 0
        self.spans: dict[str, int] = {}
        self.lock = threading.Lock()

        def export(request: bytes, context) -> bytes:
            counts = spans_by_service(request)
            with self.lock:
                self.requests += 1
                self.bytes += len(request)
                for name, count in counts.items():
                    self.spans[name] = self.spans.get(name, 0) + count
            return b""

        handler = grpc.method_handlers_generic_handler("opentelemetry.proto.collector.trace.v1.TraceService", {
            "Export": grpc.unary_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def spans_of(self, service_name: str) -> int:
        with self.lock:
            return self.spans.get(service_name, 0)

    def stop(self) -> None:
        self.server.stop(grace=1)


def spans_by_service(request: bytes) -> dict[str, int]:
    """An ExportTraceServiceRequest's spans counted per resource service.name ('?' without one)."""
    message = trace_service_pb2.ExportTraceServiceRequest.FromString(request)
    counts: dict[str, int] = {}
    for resource_spans in message.resource_spans:
        name = next((a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), "?")
        counts[name] = counts.get(name, 0) + sum(len(s.spans) for s in resource_spans.scope_spans)
    return counts


# ------------------------------------------------------------------ CPU of a process tree

def tree_cpu_ns(root: int) -> tuple[int, int]:
    """(CPU ns so far of `root` and every live descendant, how many processes that is)."""
    total = count = 0
    for pid in soak.process_tree(root, soak.process_table()):
        try:
            total += benchlib.process_cpu_ns(pid)
            count += 1
        except OSError:
            continue  # exited while we looked
    return total, count


# ------------------------------------------------------------------ servers and load

def mode_settings(mode: str, sink_port: int, state: Path) -> dict[str, str]:
    """The local stack's settings for one set of servers: free ports, the tracing switch, the sink as Collector."""
    names = [name for name in stack.load_settings({}) if name.endswith("_PORT")]
    environ = dict(zip(names, map(str, stack.free_ports(len(names)))))
    environ.update(WIRELENS_STATE_DIR=str(state), WIRELENS_SERVICE_TRACING=mode,
                   WIRELENS_COLLECTOR_OTLP_PORT=str(sink_port))
    return stack.load_settings(environ)


def check_builds(stacks: list[str], settings: dict[str, dict[str, str]]) -> None:
    """Before anything starts: every server's program and build (the Component's own checks), and loadgen;
    SystemExit naming the make target that builds what is missing."""
    if not (BIN / "loadgen").exists():
        raise SystemExit(f"{BIN / 'loadgen'} is missing: run `make services`")
    for name in stacks:
        for server in STACKS[name]:
            component = stack.BY_NAME[server.component]
            for mode in MODES:
                try:
                    if component.prepare:
                        component.prepare(settings[mode])
                    program = component.command(settings[mode])[0]
                except stack.StackError as exc:
                    raise SystemExit(f"stack {name}: {exc}") from None
                if not shutil.which(program):
                    raise SystemExit(f"stack {name}: {program} is not found: run `{MAKE_TARGET[name]}`")


def load(server: Server, port: int, calls: int, concurrency: int) -> dict:
    result = subprocess.run([str(BIN / "loadgen"), "-target", f"127.0.0.1:{port}", "-protocol", server.protocol,
                             "-operation", "hello.SayHello", "-n", str(calls), "-concurrency", str(concurrency),
                             "-trace", "header", "-progress", "off", "-timeout", "300s"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"loadgen -protocol {server.protocol} -target :{port} ({server.label}): "
                           f"{result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measured_load(server: Server, pid: int, port: int, calls: int, concurrency: int) -> dict:
    """One load with the server's CPU around it: per call, its process tree's."""
    before, _ = tree_cpu_ns(pid)
    summary = load(server, port, calls, concurrency)
    after, processes = tree_cpu_ns(pid)
    done = summary["calls"]
    return {"calls": done, "service_cpu_us_per_call": (after - before) / 1000 / done, "processes": processes,
            "p50_ms": summary["p50_ms"], "rate_per_s": summary["rate_per_s"]}


def steady(chunks: list[float]) -> bool:
    """Whether the last STEADY_CHUNKS chunks' CPU µs per call lie within SETTLED of the least of them."""
    last = chunks[-STEADY_CHUNKS:]
    return len(last) == STEADY_CHUNKS and max(last) - min(last) <= SETTLED * min(last)


def settled(chunks: list[float], calls: int, warmup: Warmup) -> bool:
    """Whether a warm-up may stop: its minimum reached and steady, or its maximum reached."""
    return calls >= warmup.maximum or (calls >= warmup.minimum and steady(chunks))


def warm_up(server: Server, pid: int, port: int, warmup: Warmup, concurrency: int) -> dict:
    chunks: list[float] = []
    calls = 0
    while not settled(chunks, calls, warmup):
        run = measured_load(server, pid, port, warmup.chunk, concurrency)
        chunks.append(round(run["service_cpu_us_per_call"], 1))
        calls += run["calls"]
    return {"calls": calls, "cpu_us_per_call_by_chunk": chunks, "settled": steady(chunks)}


def wait_spans(sink: Sink, server: Server, expected: int, timeout_s: float = 30.0) -> int:
    """The spans the traced server exported, once at least `expected` arrived (its batches leave every 500 ms);
    fewer after timeout_s: what did arrive."""
    try:
        return wait_for(f"{expected} spans of {server.service_name}", lambda: sink.spans_of(server.service_name),
                        lambda n: n >= expected, timeout_s=timeout_s, interval_s=0.2)
    except WaitTimeout:
        return sink.spans_of(server.service_name)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_stack(name: str, settings: dict[str, dict[str, str]], sink: Sink, args: argparse.Namespace,
              runs: list[dict], warmups: list[dict], spans: dict[str, dict]) -> None:
    """Start the stack's servers in both modes, warm them, measure them in interleaved repetitions, stop them."""
    servers = STACKS[name]
    started: list[tuple[str, dict[str, str]]] = []
    sent = {server: 0 for server in servers}  # calls to the traced server
    try:
        pids: dict[tuple[Server, str], int] = {}
        for mode in MODES:
            for server in servers:
                t0 = time.monotonic()
                started.append((server.component, settings[mode]))
                pids[server, mode] = stack.start(stack.BY_NAME[server.component], settings[mode])
                log(f"{server.label:<16} tracing {mode:<3}: {server.component} pid {pids[server, mode]} ready in "
                    f"{time.monotonic() - t0:.1f} s")
        port = {(server, mode): stack.BY_NAME[server.component].port(settings[mode])
                for server in servers for mode in MODES}
        warmup = QUICK_WARMUP if args.quick else WARMUP[name]
        for server in servers:
            for mode in MODES:
                w = warm_up(server, pids[server, mode], port[server, mode], warmup, args.concurrency)
                warmups.append({"stack": name, "server": server.label, "tracing": mode, **w})
                if mode == "on":
                    sent[server] += w["calls"]
                log(f"{server.label:<16} tracing {mode:<3}: warm-up {w['calls']} calls, CPU µs/call by chunk "
                    f"{w['cpu_us_per_call_by_chunk']}{'' if w['settled'] else ' (not settled)'}")
        for rep in range(args.reps):
            order = MODES if rep % 2 == 0 else MODES[::-1]
            for server in servers:
                for mode in order:
                    run = measured_load(server, pids[server, mode], port[server, mode], args.calls, args.concurrency)
                    runs.append({"rep": rep, "stack": name, "server": server.label, "protocol": server.protocol,
                                 "tracing": mode, **run})
                    if mode == "on":
                        sent[server] += run["calls"]
                    log(f"rep {rep} {server.label:<16} tracing {mode:<3}: {run['service_cpu_us_per_call']:7.1f} "
                        f"CPU µs/call, p50 {run['p50_ms']:.3f} ms, {run['rate_per_s']:.0f}/s")
        for server in servers:
            got = wait_spans(sink, server, sent[server])
            spans[server.label] = {"service_name": server.service_name, "calls_traced": sent[server], "spans": got,
                                   "spans_per_call": got / sent[server]}
    finally:
        for component, mode_set in reversed(started):
            stack.stop(component, mode_set, grace_s=10.0)


def summarize(runs: list[dict], spans: dict[str, dict]) -> dict[str, dict]:
    """One row per server measured (stack x protocol): medians of the repetitions per mode, the added CPU and
    the ratio, and the spans the traced server sent per call."""
    table: dict[str, dict] = {}
    for server in (s for servers in STACKS.values() for s in servers):
        by_mode = {mode: [r for r in runs if r["server"] == server.label and r["tracing"] == mode] for mode in MODES}
        if not all(by_mode.values()):
            continue
        row: dict = {"stack": server.stack, "protocol": server.protocol, "framework": server.framework}
        for mode, mine in by_mode.items():
            row[mode] = {"cpu_us_per_call": benchlib.median([r["service_cpu_us_per_call"] for r in mine]),
                         "p50_ms": benchlib.median([r["p50_ms"] for r in mine]),
                         "rate_per_s": benchlib.median([r["rate_per_s"] for r in mine])}
        row["added_cpu_us_per_call"] = row["on"]["cpu_us_per_call"] - row["off"]["cpu_us_per_call"]
        row["ratio"] = row["on"]["cpu_us_per_call"] / row["off"]["cpu_us_per_call"]
        row["spans_per_call"] = spans.get(server.label, {}).get("spans_per_call")
        table[server.label] = row
    return table


def render(result: dict) -> str:
    lines = [f"service tracing cost (the services alone, no Envoy; medians of {result['reps']} reps x "
             f"{result['calls']} calls, concurrency {result['concurrency']}; {result['exports']} OTLP exports, "
             f"{result['export_bytes']:,} bytes{'; QUICK: numbers meaningless' if result['quick'] else ''}):",
             f"  {'':<16} {'CPU µs/call off':>16} {'on':>8} {'added':>8} {'on/off':>7}   {'p50 ms off':>10} "
             f"{'on':>7}   {'spans/call':>10}"]
    for label, row in result["table"].items():
        spans = row.get("spans_per_call")
        lines.append(f"  {label:<16} {row['off']['cpu_us_per_call']:16.1f} {row['on']['cpu_us_per_call']:8.1f} "
                     f"{row['added_cpu_us_per_call']:+8.1f} {row['ratio']:7.2f}   {row['off']['p50_ms']:10.3f} "
                     f"{row['on']['p50_ms']:7.3f}   {'-' if spans is None else f'{spans:.2f}':>10}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", default=",".join(STACKS),
                        help=f"comma-separated, of {', '.join(STACKS)} (default: all; a missing build fails)")
    parser.add_argument("--calls", type=int, default=5000, help="calls per load and repetition (default 5000)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions, modes interleaved (default 3)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 1 rep of 500 calls, 500 warm-up calls (numbers meaningless)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.reps = 500, 1
    stacks = parse_stacks(args.stacks)
    sink_port = stack.free_ports(1)[0]
    runs: list[dict] = []
    warmups: list[dict] = []
    spans: dict[str, dict] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wirelens-bench-tracing-") as tmp:
        settings = {mode: mode_settings(mode, sink_port, Path(tmp) / mode) for mode in MODES}
        check_builds(stacks, settings)
        sink = Sink(sink_port)
        try:
            for name in stacks:
                run_stack(name, settings, sink, args, runs, warmups, spans)
        finally:
            sink.stop()
    table = summarize(runs, spans)
    silent = [label for label, s in spans.items() if s["spans"] == 0]
    result = {"quick": args.quick, "stacks": stacks, "calls": args.calls, "reps": args.reps,
              "concurrency": args.concurrency, "table": table, "spans": spans, "warmup": warmups, "runs": runs,
              "exports": sink.requests, "export_bytes": sink.bytes, "seconds": round(time.monotonic() - started, 1),
              "loadavg": benchlib.loadavg()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    print(f"wrote {OUT.relative_to(ROOT)} ({result['seconds']:.0f} s)")
    if silent:
        print(f"BROKEN: tracing on, but no span arrived from {', '.join(silent)}: that row measured no tracing",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
