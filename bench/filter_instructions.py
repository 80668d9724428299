"""How many instructions does wirelens add to a call, exporters included? (`make bench-instructions`)

filter_cost.py measures Envoy's CPU time per call. On these shared 2-core
VMs that number moves by 30 % and more between runs and between hours (the
"slow state" in bench/README.md), so a difference of a few µs between two
filters takes many repetitions to settle. This benchmark counts instructions
instead: each measured Envoy runs under valgrind's callgrind, which counts
every instruction Envoy executes (its own code, V8's compiled wasm, libc),
whatever else the machine is doing. Two runs of the same build agree within
0.2 %, so one run decides what filter_cost.py needs many for.

The table measures the production shape: the ingress listener of
envoy/envoy.yaml.tmpl (codec AUTO, a fresh x-request-id, the filter, grpc_web,
the router) with the exporters as shipped, built by envoy/wiring.py itself:
the OpenTelemetry tracer with the record's span tags (span_tags()) and the
access log (access_logger(): the JSON-lines FILE sink logship reads, fields
from RECORD_FIELDS; or the OTLP access logger). The calls go to the project's
Go services (bin/rest-server, bin/grpc-server, running natively: only the
measured Envoy is counted); the tracer and the OTLP logger export to an
upstream Envoy that answers OK. A filter build is a path: a .wasm runs as the
proxy-wasm filter (wiring.wasm_filter), a .so as the native dynamic module
(wiring.native_filter), with the same plugin configuration
(counterfactual_rate 0 unless --counterfactual-rate).

    none+exp      no filter, access log (file) + tracer tracing every call
    empty+exp     the empty proxy-wasm SDK filter (filters/empty), same exporters
    wirelens+exp  the Wasm build (build/wirelens_filter.wasm), same exporters
    native+exp    the native build (build/native/libwirelens.so), same exporters
    whatif+exp    the Wasm build with counterfactual_rate 1: every call's
                  payloads sized in the other encoding (docs/what-if.md); the
                  report prints its cost per sampled call over wirelens+exp
    X+exp1pct     the same with 1 % of calls traced (none, wirelens, native)
    X             exporters off: the filter alone (none, wirelens, native)
    none+otlp, wirelens+otlp   (--otlp) the OTLP access logger instead of the file
    NAME+exp ...  each --compare NAME=PATH build, in the builds' shapes

Loads: REST (HTTP/1.1 POST /v1/hello, JSON), unary gRPC
(/wirelens.v1.Hello/SayHello) and a bidi stream (/wirelens.v1.Echo/BiStream:
1,000 EchoRequest messages, each echoed; instructions per message, request
and response messages both counted). Per variant: start it under callgrind,
warm up every load (V8 compiles the module lazily and tiers up), then for
each load zero the counters, send exactly the counted calls with h2load,
dump the counters. Variants run --jobs at a time (valgrind runs a process
on one core).

The targets (issue 29) are printed as PASS/FAIL, with each build's price in
the pipeline split into the filter alone and the record's export. The memory
target (a 1 GiB stream must not grow Envoy's RSS by more than 1 MiB over no
filter, per build) is measured natively, not under callgrind, by
bench/stream_memory.py, which this script runs after the table (--no-memory
skips it).

What it is not: time. An instruction of a cache-missing host call costs more
than one of a tight loop, and a sleeping Envoy that is woken pays in time, not
instructions. filter_cost.py remains the measure of µs.

Writes build/bench/filter_instructions.json; exits 0 whatever the numbers, 1
when something broke (an Envoy did not start, a load saw errors, no dump, the
exporters sent nothing).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as _dt
import json
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import benchlib, harness, stream_memory
from bench.benchlib import ROOT
from bench.harness import (
    BIN,
    FILE_FLUSH_MS,
    STREAM_FRAME,
    STREAM_MESSAGES,
    STREAM_PATH,
    Services,
    check_stream,
    pipeline_config,
)
from envoy import plugin_settings, wiring
from wirelens_helpers.wait import WaitTimeout, wait_for


WORK_DIR = harness.OUT_DIR / "filter_instructions"
JSON_OUT = harness.OUT_DIR / "filter_instructions.json"
LOADS = ("rest", "grpc", "stream")
LOAD_TITLES = {
    "rest": "REST   HTTP/1.1 POST /v1/hello (JSON)",
    "grpc": "gRPC   h2 unary /wirelens.v1.Hello/SayHello",
    "stream": "stream h2 bidi /wirelens.v1.Echo/BiStream",
}
# Shapes: "" = exporters off (the filter alone: same listener and Go services, no
# tracer, no access log), "+exp" = file access log + tracer tracing every call (as
# the local stack ships), "+exp1pct" = the same with 1 % of calls traced (what a
# busy mesh runs), "+otlp" = OTel access logger + tracer.
SHAPES = ("", "+exp", "+exp1pct", "+otlp")
TRACING_PERCENT = {"+exp1pct": 1}   # the others trace every call
SHAPE_TITLES = {
    "+exp": "file access log + OTel tracer, every call traced (as the local stack ships)",
    "+exp1pct": "the same, 1 % of calls traced (a busy mesh's sampling)",
    "": "exporters off: no access log, no tracer (the filter alone)",
    "+otlp": "OTel access logger + tracer",
}
# Under valgrind Envoy starts in 20-90 s (V8 compiles the module instrumented).
START_TIMEOUT_S = 600.0
CHECK_TIMEOUT_S = 180.0
# callgrind writes a dump some time after it is asked (at its next scheduling point).
DUMP_TIMEOUT_S = 120.0

# Targets (issue 29), instructions, one run, the counterfactual off (rate 0).
# Whole pipeline: none+exp / FILTER+exp, REST and unary gRPC, per build kind
# (also printed for the +exp1pct shape: none+exp1pct / FILTER+exp1pct).
TARGET_PIPELINE_RATIO = {"native": {"rest": 0.94, "grpc": 0.94}, "wasm": {"rest": 0.84, "grpc": 0.82}}
# The native filter alone, exporters off: FILTER - none per call (per message for the stream).
TARGET_NATIVE_ALONE = {"rest": 12_000, "grpc": 20_000, "stream": 1_500}
# The Wasm filter per streamed message over the empty Wasm filter: FILTER+exp - empty+exp.
TARGET_WASM_STREAM_OVER_EMPTY = 4_000


# ------------------------------------------------------------------ measuring

def checked(check, *args, attempts: int = 3) -> None:
    """A check call, tried up to `attempts` times: the first calls under callgrind can be very slow."""
    for i in range(attempts):
        try:
            check(*args)
            return
        except (harness.Broken, OSError, subprocess.SubprocessError):
            if i == attempts - 1:
                raise


def rest_argv(port: int, requests: int, body: Path) -> list[str]:
    """h2load over HTTP/1.1: an exact number of REST calls (wrk cannot fix a count)."""
    return ["h2load", "--h1", "-n", str(requests), "-c", "4", "-t", "1", "-d", str(body),
            "-H", "content-type: application/json", "-T", "30", "-N", "30",
            f"http://127.0.0.1:{port}{harness.REST_PATH}"]


def grpc_argv(port: int, requests: int, body: Path) -> list[str]:
    return harness.h2load_argv(port, requests, 1, 4, body, timeout_s=30)  # slow under valgrind


def stream_argv(port: int, streams: int, body: Path) -> list[str]:
    """`streams` BiStream calls one after the other, each sending the whole file (1,000 messages)."""
    return ["h2load", "-n", str(streams), "-c", "1", "-m", "1", "-t", "1", "-d", str(body),
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            "-T", "600", "-N", "120", f"http://127.0.0.1:{port}{STREAM_PATH}"]


@dataclass
class Measured:
    """One variant: its Envoy under callgrind, and what each load cost."""
    variant: str          # e.g. "wirelens+exp"
    base: str             # none, empty, wirelens, a --compare name, a probe
    shape: str            # one of SHAPES
    wasm: Path | None
    port: int
    admin_port: int
    envoy: harness.Envoy | None = None
    log_path: Path | None = None
    results: dict = field(default_factory=dict)   # load -> record
    exporters: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def kind(self) -> str:
        """none, empty, probe, whatif, native (a .so) or wasm: which targets apply."""
        return module_kind(self.base, self.wasm)

    def loads(self, wanted: list[str]) -> list[str]:
        return list(wanted)


def module_kind(base: str, module: Path | None) -> str:
    if base in ("none", "empty", "whatif"):
        return base
    if base.startswith("probe-"):
        return "probe"
    return "native" if base == "native" or harness.is_native(module) else "wasm"


class CallgrindEnvoy(harness.Envoy):
    """filter_cost's Envoy, run under valgrind --tool=callgrind."""

    def __init__(self, name: str, config: dict, port: int, admin_port: int,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.dump_prefix = WORK_DIR / f"callgrind.{name}"
        super().__init__(name, config, port, admin_port, work_dir=WORK_DIR, extra_args=extra_args, wrapper=(
            "valgrind", "--tool=callgrind", "--smc-check=all-non-file",
            f"--callgrind-out-file={self.dump_prefix}", "--dump-instr=no"))

    def start(self, envoy_bin: Path) -> None:
        for old in WORK_DIR.glob(f"{self.dump_prefix.name}*"):
            old.unlink()
        super().start(envoy_bin)

    def control(self, *args: str) -> None:
        res = subprocess.run(["callgrind_control", *args, str(self.proc.pid)],
                             capture_output=True, text=True, timeout=DUMP_TIMEOUT_S)
        if res.returncode != 0:
            raise harness.Broken(f"callgrind_control {' '.join(args)} for {self.name} failed: "
                            f"{(res.stderr or res.stdout).strip()[:300]}")

    def dumps(self) -> list[Path]:
        return sorted(WORK_DIR.glob(f"{self.dump_prefix.name}.*"),
                      key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else -1)

    def dump_instructions(self) -> int:
        """Asks for a dump of the counters since the last zeroing; returns its total Ir."""
        before = {p.name for p in self.dumps()}
        self.control("--dump")

        def new_total() -> int | None:
            for path in self.dumps():
                if path.name in before:
                    continue
                m = re.search(r"^totals:\s+(\d+)", path.read_text(errors="replace"), re.M)
                if m:
                    path.unlink()  # only the total is kept: the dumps add up to 100s of MB
                    return int(m.group(1))
            return None
        try:
            return wait_for(f"a callgrind dump from {self.name}", new_total, lambda total: total is not None,
                            timeout_s=DUMP_TIMEOUT_S, interval_s=0.2)
        except WaitTimeout:
            raise harness.Broken(f"no callgrind dump from {self.name} within {DUMP_TIMEOUT_S:.0f}s "
                                 f"(files: {[p.name for p in self.dumps()]})") from None


def run_load(load: str, m: Measured, count: int, files: dict) -> dict:
    argv = {"rest": rest_argv, "grpc": grpc_argv, "stream": stream_argv}[load](m.port, count, files[load])
    timeout = 120 + count * (0.1 if load != "stream" else 60)
    res = benchlib.run_tool(argv, timeout_s=timeout, tag=m.variant)  # variants run in parallel
    if res.timed_out or res.returncode != 0:
        raise harness.Broken(f"h2load {load} against {m.variant} failed (exit {res.returncode}"
                        f"{', timed out' if res.timed_out else ''}):\n{res.stdout[-800:]}{res.stderr[-400:]}")
    done, _rps, problems = harness.parse_h2load(res.stdout)
    if problems or done != count:
        raise harness.Broken(f"h2load {load} against {m.variant}: {done}/{count} calls succeeded; "
                        f"{'; '.join(problems)}")
    if load == "stream":
        # h2load counts a stream as done on its end; check that every message came back.
        m_data = re.search(r"traffic: .*\((\d+)\) data", res.stdout)
        want = count * STREAM_MESSAGES * len(STREAM_FRAME)
        if m_data and int(m_data.group(1)) < want:
            raise harness.Broken(f"stream against {m.variant}: {m_data.group(1)} response data bytes, "
                            f"want {want} ({count} x {STREAM_MESSAGES} echoed messages)")
        return {"calls": done, "messages": done * STREAM_MESSAGES * 2}
    return {"calls": done}


def check_exporters(m: Measured, calls: int) -> dict:
    """Did the tracer and the access log really export (and the sink answer OK)?"""
    # Not harness.Envoy.stats(): its 2 s timeout is too short for an admin port under callgrind.
    url = (f"http://127.0.0.1:{m.admin_port}/stats?filter="
           "open_telemetry|opentelemetry|otel_collector.upstream_rq_")
    with urllib.request.urlopen(url, timeout=60) as resp:
        stats = {name: int(value) for name, _, value in
                 (line.partition(": ") for line in resp.read().decode().splitlines())
                 if value.strip().isdigit()}
    got = {
        "spans_sent": stats.get("tracing.opentelemetry.spans_sent", 0),
        "exports_2xx": stats.get("cluster.otel_collector.upstream_rq_2xx", 0),
        "exports_total": stats.get("cluster.otel_collector.upstream_rq_total", 0),
    }
    ok = got["spans_sent"] and got["exports_2xx"]
    if m.shape == "+otlp":
        got["logs_written"] = stats.get("access_logs.open_telemetry_access_log.logs_written", 0)
        ok = ok and got["logs_written"] >= calls
    else:
        lines = m.log_path.read_text(errors="replace").splitlines() if m.log_path.exists() else []
        got["log_lines"] = len(lines)
        ok = ok and len(lines) >= calls
        if ok and m.wasm is not None and m.base != "empty" and not m.base.startswith("probe-"):
            record = json.loads(lines[-1])["attributes"].get("wirelens.record", "-")
            got["last_record_bytes"] = len(record)
            ok = record not in ("", "-")
    if not ok:
        raise harness.Broken(f"{m.variant}: the exporters did not work: {got}")
    return got


def measure_variant(m: Measured, envoy_bin: Path, ports: dict, plugin_config: str,
                    args: argparse.Namespace, files: dict, progress) -> None:
    node = f"wirelens-instr-{m.variant.replace('+', '-')}"
    sink = {"": None, "+otlp": "otlp"}.get(m.shape, "file")
    m.log_path = WORK_DIR / f"access-{m.variant}.jsonl" if sink == "file" else None
    if m.log_path and m.log_path.exists():
        m.log_path.unlink()
    # Every shape: the production listener, the Go services upstream (so the exporters'
    # price is FILTER+exp - FILTER), the OTLP sink for the exporters.
    cfg = pipeline_config(m.wasm, plugin_config, sink, m.port, m.admin_port, ports["rest"],
                          ports["grpc"], ports["upstream"], m.log_path, node,
                          tracing_percent=TRACING_PERCENT.get(m.shape, 100))
    env = CallgrindEnvoy(m.variant, cfg, m.port, m.admin_port,
                         extra_args=("--file-flush-interval-msec", FILE_FLUSH_MS))
    m.envoy = env
    loads = m.loads(args.loads)
    try:
        t0 = time.monotonic()
        env.start(envoy_bin)
        env.wait_ready(START_TIMEOUT_S)
        # The first calls are slow under valgrind: V8 compiles each function
        # of the module when it first runs, instrumented.
        checked(harness.check_rest, m.port, CHECK_TIMEOUT_S)
        if "grpc" in loads:
            checked(harness.check_grpc, m.port, files["grpc"], False, CHECK_TIMEOUT_S)
        if "stream" in loads:
            checked(check_stream, m.port, files["stream"], STREAM_MESSAGES, CHECK_TIMEOUT_S)
        progress(f"{m.variant}: ready under callgrind in {time.monotonic() - t0:.0f}s, warming up")
        counts = {"rest": args.requests, "grpc": args.requests, "stream": args.streams}
        warm = {"rest": args.warmup, "grpc": args.warmup, "stream": args.warmup_streams}
        for load in loads:
            if warm[load]:
                run_load(load, m, warm[load], files)
        calls = 0
        for load in loads:
            env.control("--zero")
            rec = run_load(load, m, counts[load], files)
            total = env.dump_instructions()
            rec.update({"instructions": total, "per_call": total / rec["calls"]})
            if "messages" in rec:
                rec["per_message"] = total / rec["messages"]
            m.results[load] = rec
            calls += rec["calls"]
            progress(f"{m.variant}: {load} {rec['per_call']:,.0f} instructions per call"
                     + (f", {rec['per_message']:,.0f} per message" if "per_message" in rec else ""))
        if m.shape:
            # Spans and OTLP logs leave in batches: give the last ones a moment, then check.
            try:
                m.exporters = wait_for(f"{m.variant}'s exporters", lambda: check_exporters(m, calls),
                                       lambda _: True, timeout_s=30, interval_s=1,
                                       retry_on=(harness.Broken, OSError))
            except WaitTimeout as exc:
                raise exc.last_seen from None  # check_exporters' own complaint
        problems = env.new_log_problems()
        if problems:
            raise harness.Broken(f"{m.variant}: Envoy log: {problems[0][:200]}")
    except (harness.Broken, OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        m.error = str(exc)
        progress(f"{m.variant}: BROKEN: {str(exc)[:300]}")
    finally:
        env.stop()


# ------------------------------------------------------------------ report

def baseline(per: dict, variant: str, base: str) -> str | None:
    """The variant of the same shape with another base (`none` or `empty`), if measured."""
    shape = variant[len(variant.split("+")[0]):]
    name = base + shape
    return name if name in per else None


def counterfactual_rate(plugin_config: str) -> float:
    """The plugin configuration's counterfactual_rate (the filter's default when absent)."""
    rate = json.loads(plugin_config).get("counterfactual_rate")
    return plugin_settings.COUNTERFACTUAL_RATE_DEFAULT if rate is None else float(rate)


def whatif_config(plugin_config: str) -> str:
    """The plugin configuration with every recorded call sampled for the counterfactual."""
    return json.dumps({**json.loads(plugin_config), "counterfactual_rate": 1})


def counterfactual_costs(per: dict, base_rate: float) -> dict:
    """Per shape and load: what one call sampled for the counterfactual costs, from whatif (rate 1)
    over wirelens (base_rate of its calls already sampled): the difference / (1 - base_rate)."""
    out: dict = {}
    for variant, by_load in per.items():
        if variant.split("+")[0] != "whatif":
            continue
        shape = variant[len("whatif"):]
        other = per.get("wirelens" + shape)
        if not other or base_rate >= 1:
            continue
        out[variant] = {load: round((v - other[load]) / (1 - base_rate))
                        for load, v in by_load.items() if load in other}
    return out


def summarize(measured: list[Measured], loads: list[str], base_rate: float = 0.0) -> dict:
    """Per variant and load: instructions per call (and per message), differences, verdicts."""
    per: dict = {}
    kinds: dict = {}
    for m in measured:
        per[m.variant] = {}
        kinds[m.variant] = m.kind
        for load in loads:
            rec = m.results.get(load)
            if rec:
                per[m.variant][load] = rec["per_message"] if load == "stream" else rec["per_call"]
    diffs: dict = {}
    for variant, by_load in per.items():
        base = variant.split("+")[0]
        d = {}
        for load, v in by_load.items():
            none, empty = baseline(per, variant, "none"), baseline(per, variant, "empty")
            nv = per[none].get(load) if none else None
            ev = per[empty].get(load) if empty else None
            # Over the empty proxy-wasm filter: only for proxy-wasm builds (and the whatif one).
            over_empty_applies = kinds[variant] in ("wasm", "whatif", "probe")
            d[load] = {"over_none": v - nv if nv and base != "none" else None,
                       "over_empty": v - ev if ev and over_empty_applies else None,
                       "capacity_vs_none": nv / v if nv and base != "none" else None}
        diffs[variant] = d
    return {"per_call": per, "differences": diffs, "kinds": kinds,
            "targets": targets(per, diffs, kinds),
            "export_share": export_shares(per, kinds),
            "counterfactual_per_sampled_call": counterfactual_costs(per, base_rate),
            "counterfactual_rate_of_wirelens": base_rate,
            "units": {"rest": "per call", "grpc": "per call",
                      "stream": f"per message ({STREAM_MESSAGES} requests + {STREAM_MESSAGES} replies "
                                "per stream, both counted)"}}


def _verdict(target: str, value: float, limit: float, at_least: bool, fmt: str = ",") -> dict:
    shown = f"{limit:.2f}" if at_least else f"{limit:{fmt}}"
    return {"target": target, "value": round(value, 4) if at_least else round(value),
            "limit": f"{'>=' if at_least else '<='} {shown}",
            "pass": value >= limit if at_least else value <= limit}


def targets(per: dict, diffs: dict, kinds: dict) -> dict:
    """Issue 29's verdicts, for every filter build measured (wirelens, native, the --compare builds):

    native and wasm, +exp and +exp1pct: none/FILTER of the same shape, REST and unary gRPC (0.94; 0.84, 0.82);
    native, exporters off: FILTER - none per REST call, gRPC call, streamed message (12k, 20k, 1.5k);
    wasm, +exp: FILTER+exp - empty+exp per streamed message (4k).
    """
    out: dict = {}
    for variant in per:
        kind = kinds.get(variant)
        if kind not in ("native", "wasm"):
            continue
        shape = variant[len(variant.split("+")[0]):]
        d = diffs[variant]
        t = []
        if shape in ("+exp", "+exp1pct"):
            traced = " (1 % traced)" if shape == "+exp1pct" else ""
            for load in ("rest", "grpc"):
                cap = d.get(load, {}).get("capacity_vs_none")
                if cap is not None:
                    t.append(_verdict(f"{kind} whole pipeline {load}{traced}: none{shape} / {variant}", cap,
                                      TARGET_PIPELINE_RATIO[kind][load], at_least=True))
        if kind == "wasm" and shape == "+exp":
            over = d.get("stream", {}).get("over_empty")
            if over is not None:
                t.append(_verdict(f"wasm streamed message: {variant} - empty+exp per message", over,
                                  TARGET_WASM_STREAM_OVER_EMPTY, at_least=False))
        if kind == "native" and shape == "":
            unit = {"rest": "per call", "grpc": "per call", "stream": "per message"}
            for load in ("rest", "grpc", "stream"):
                over = d.get(load, {}).get("over_none")
                if over is not None:
                    t.append(_verdict(f"native filter alone {load}: {variant} - none {unit[load]}", over,
                                      TARGET_NATIVE_ALONE[load], at_least=False))
        if t:
            out[variant] = t
    return out


def export_shares(per: dict, kinds: dict) -> dict:
    """For each filter build measured with and without the exporters: how much of its price in the
    pipeline (FILTER+exp - none+exp) is the filter alone (FILTER - none) and how much is Envoy exporting
    the record (the rest: what the exporters cost with the record over what they cost without one)."""
    out: dict = {}
    for variant, by_load in per.items():
        base, shape = variant.split("+")[0], variant[len(variant.split("+")[0]):]
        if kinds.get(variant) not in ("native", "wasm") or shape == "" or shape == "+otlp":
            continue
        alone_v, none_exp, none_off = per.get(base), per.get("none" + shape), per.get("none")
        if not (alone_v and none_exp and none_off):
            continue
        rows = {}
        for load, v in by_load.items():
            # The exporters work per call: a streamed message's share of them is noise.
            if load == "stream" or load not in alone_v or load not in none_exp or load not in none_off:
                continue
            price = v - none_exp[load]
            alone = alone_v[load] - none_off[load]
            export = price - alone
            rows[load] = {"price": round(price), "alone": round(alone), "export": round(export),
                          "export_share": round(export / price, 3) if price > 0 else None,
                          "exporters_without_record": round(none_exp[load] - none_off[load]),
                          "exporters_with_record": round(v - alone_v[load])}
        if rows:
            out[variant] = rows
    return out


def fmt_k(v: float | None, sign: bool = False) -> str:
    if v is None:
        return "—"
    return f"{v / 1000:+.1f}k" if sign else f"{v / 1000:.1f}k"


def fmt_target_value(t: dict) -> str:
    v = t["value"]
    return f"{v:.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v / 1000:+.1f}k"


def shape_order(variant: str) -> tuple[int, int]:
    """Rows grouped by shape (+exp, +exp1pct, exporters off, +otlp), then in measuring order."""
    shape = variant[len(variant.split("+")[0]):]
    return (SHAPES.index(shape) if shape != "" else 2.5, 0)


def target_lines(summary: dict) -> list[str]:
    """The verdicts, one per line (also what `make bench`'s summary repeats)."""
    lines = []
    for ts in summary.get("targets", {}).values():
        for t in ts:
            lines.append(f"{t['target']:<72} {fmt_target_value(t):>8}  {t['limit']:<9} "
                         f"{'PASS' if t['pass'] else 'FAIL'}")
    return lines


def export_lines(summary: dict) -> list[str]:
    """Per filter build and shape: its price in the pipeline = the filter alone + the record's export."""
    names = {"rest": "REST", "grpc": "gRPC", "stream": "stream msg"}
    lines = []
    for variant, rows in summary.get("export_share", {}).items():
        base = variant.split("+")[0]
        cells = []
        for load, r in rows.items():
            share = f" ({r['export_share']:.0%})" if r["export_share"] is not None else ""
            cells.append(f"{names[load]} {fmt_k(r['price'], True)} = alone {fmt_k(r['alone'], True)}"
                         f" + export {fmt_k(r['export'], True)}{share}")
        lines.append(f"{variant:<16} " + "; ".join(cells))
        with_record = ", ".join(f"{names[x]} {fmt_k(r['exporters_with_record'], True)}" for x, r in rows.items())
        without = ", ".join(fmt_k(r["exporters_without_record"], True) for r in rows.values())
        lines.append(f"{'':<16} (the exporters cost {with_record} with {base}'s record, {without} without)")
    return lines


def print_report(summary: dict, loads: list[str], meta: dict) -> None:
    per, diffs = summary["per_call"], summary["differences"]
    print()
    print("Instructions of the measured Envoy (callgrind, all its threads; the Go services and the "
          "OTLP sink run natively, not counted)")
    print(f"  REST, gRPC: per call, {meta['requests']} counted calls after {meta['warmup']} warm-up calls")
    if "stream" in loads:
        print(f"  stream: per MESSAGE = instructions / ({meta['streams']} streams x {STREAM_MESSAGES} "
              f"requests + {STREAM_MESSAGES} replies); {len(STREAM_FRAME)}-byte frames; "
              f"after {meta['warmup_streams']} warm-up stream(s)")
    builds = "  ".join(f"{name} {info['sha256']}" for name, info in meta["wasm"].items()
                       if name != "empty" and not name.startswith("probe-"))
    print(f"  Envoy {meta['envoy_version']}  {builds}  counterfactual_rate {meta.get('counterfactual_rate')}"
          f"{'  QUICK: smoke test' if meta['quick'] else ''}")
    shapes = dict.fromkeys(v[len(v.split("+")[0]):] for v in per)
    for shape in sorted(shapes, key=lambda x: shape_order("v" + x)):
        print(f"  {('(no suffix)' if not shape else shape):<11} {SHAPE_TITLES[shape]}")
    cols = [(load, {"rest": "REST/call", "grpc": "gRPC/call", "stream": "stream/msg"}[load]) for load in loads]
    head = f"  {'variant':<18}" + "".join(f" {title:>11} {'−none':>8} {'−empty':>8} {'none/v':>7}"
                                            for _, title in cols)
    print("\n" + head)
    print("  " + "-" * (len(head) - 2))
    last_shape = None
    for v in sorted(per, key=shape_order):
        shape = v[len(v.split("+")[0]):]
        if last_shape is not None and shape != last_shape:
            print()
        last_shape = shape
        by_load = per[v]
        row = f"  {v:<18}"
        for load, _ in cols:
            d = diffs[v].get(load, {})
            cap = d.get("capacity_vs_none")
            row += (f" {fmt_k(by_load.get(load)):>11} {fmt_k(d.get('over_none'), True) if d.get('over_none') is not None else '':>8}"
                    f" {fmt_k(d.get('over_empty'), True) if d.get('over_empty') is not None else '':>8} "
                    f"{(f'{cap:.3f}' if cap else ''):>7}")
        print(row)
    print("\n  −none, −empty: over no filter / the empty proxy-wasm filter of the same shape; none/v:\n"
          "  instructions of no filter (same shape) / this variant, the throughput share left when Envoy's\n"
          "  instructions are the bottleneck. With the exporters on, runs of the same build differ by 1-4 %\n"
          "  (exports flush on timers; the real upstream's timing): decide below ≈5k by repeating.")
    exports = export_lines(summary)
    if exports:
        print("\n  Where each build's price in the pipeline goes: FILTER+exp − none+exp = the filter alone\n"
              "  (FILTER − none, exporters off) + Envoy exporting its record (the rest: the exporters cost\n"
              "  more with the record than without it):")
        for line in exports:
            print(f"  {line}")
    for variant, by_load in summary.get("counterfactual_per_sampled_call", {}).items():
        names = {"rest": "REST call", "grpc": "unary gRPC call", "stream": "streamed message"}
        costs = ", ".join(f"{names[load]} {fmt_k(v, True)}" for load, v in by_load.items())
        print(f"\n  The counterfactual (docs/what-if.md), per call sampled for it: {costs}\n"
              f"  ({variant} at counterfactual_rate 1 over wirelens{variant[len('whatif'):]} at "
              f"{summary['counterfactual_rate_of_wirelens']:g}, divided by the share it added; "
              f"rate 0 costs what the filter cost before it)")
    lines = target_lines(summary)
    if lines:
        print("\nTargets (issue 29; instructions, this run):")
        for line in lines:
            print(f"  {line}")


# ------------------------------------------------------------------ main

def default_variants(exporters: str, extra: list[str], native: bool, otlp: bool = False) -> list[str]:
    """What a run measures unless --variants says: see --exporters."""
    filters = ["wirelens", *(["native"] if native else []), *extra]
    wanted = []
    if exporters in ("on", "both"):
        wanted += ["none+exp", "empty+exp", *(f + "+exp" for f in filters), "whatif+exp"]
        wanted += ["none+exp1pct", *(f + "+exp1pct" for f in filters)]
    if exporters in ("off", "both"):
        wanted += ["none", *(["empty"] if exporters == "off" else []), *filters]
    if otlp:
        wanted += ["none+otlp", "wirelens+otlp"]
    return wanted


def with_counterfactual_rate(plugin_config: str, rate: float) -> str:
    """The plugin configuration with its counterfactual_rate set (the targets are for rate 0)."""
    return json.dumps({**json.loads(plugin_config), "counterfactual_rate": rate})


def run_memory(args: argparse.Namespace, envoy_bin: Path, wasm_of: dict, wasm_src: dict,
               plugin_config: str) -> dict:
    """bench/stream_memory.py for the Wasm build and (when there) the native one, each against none+exp."""
    print("\n==> memory: 1 GiB gRPC streams through Envoy natively (bench/stream_memory.py)", flush=True)
    builds, infos = {}, {}
    for name, src in (("wirelens", harness.WIRELENS_WASM), ("native", wasm_src.get("native"))):
        if src is None:
            continue
        pinned = wasm_of.get(name) or harness.pin_module(src, WORK_DIR, name)
        builds[name], infos[name] = pinned, harness.file_info(src, pinned)
    mem = stream_memory.run(envoy_bin, builds, plugin_config, quick=args.quick, infos=infos)
    stream_memory.print_report(mem)
    return mem


def memory_only(args: argparse.Namespace, envoy_bin: Path, wasm_of: dict, wasm_src: dict,
                plugin_config: str, meta: dict) -> int:
    """--memory-only: the memory measurement alone, merged into the results file of the last run."""
    mem = run_memory(args, envoy_bin, wasm_of, wasm_src, plugin_config)
    try:
        result = json.loads(args.json.read_text())
    except (OSError, ValueError):
        result = {"benchmark": "filter_instructions", "meta": meta, "summary": {}, "problems": []}
    result["memory"] = mem
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    return 1 if mem.get("problems") else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporters", choices=("off", "on", "both"), default="both",
                    help="both (default): the pipeline with every call traced (none+exp, empty+exp, "
                         "wirelens+exp, native+exp, whatif+exp), with 1 %% traced (none+exp1pct, "
                         "wirelens+exp1pct, native+exp1pct) and the filters alone without exporters (none, "
                         "wirelens, native); on: only the exporter shapes; off: only the filters alone "
                         "(none, empty, wirelens, native). Every shape: the Go services upstream")
    ap.add_argument("--otlp", action="store_true",
                    help="also none+otlp, wirelens+otlp (the OTel access logger instead of the file)")
    ap.add_argument("--native", type=Path, default=harness.WIRELENS_NATIVE,
                    help="the native build, an Envoy dynamic module (default build/native/libwirelens.so; "
                         "its variants are skipped, with a note, when it is missing)")
    ap.add_argument("--counterfactual-rate", type=float, default=0.0,
                    help="the counterfactual_rate every filter variant gets (default 0: the targets' "
                         "condition; whatif+exp always 1)")
    ap.add_argument("--requests", type=int, default=2000,
                    help="REST and gRPC calls per variant, counted (default 2000)")
    ap.add_argument("--warmup", type=int, default=500,
                    help="REST and gRPC calls per variant before counting (default 500)")
    ap.add_argument("--streams", type=int, default=5,
                    help=f"BiStream calls of {STREAM_MESSAGES} messages each, counted (default 5)")
    ap.add_argument("--warmup-streams", type=int, default=2,
                    help="BiStream calls before counting (default 2)")
    ap.add_argument("--loads", default="rest,grpc,stream", help="comma-separated subset of rest,grpc,stream")
    ap.add_argument("--jobs", type=int, default=2,
                    help="variants measured at the same time (default 2: one per core)")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=PATH",
                    help="also measure another build, a .wasm (proxy-wasm) or a .so (native dynamic "
                         "module), in the same shapes as wirelens/native, same plugin config; repeatable")
    ap.add_argument("--plugin-config", type=Path, default=harness.OPMAP,
                    help="the filters' plugin configuration (default build/opmap.json)")
    ap.add_argument("--probes", action="store_true",
                    help=f"also the host-call probes of filters/empty ({', '.join(harness.PROBES)})")
    ap.add_argument("--variants", help="measure exactly these (comma-separated), e.g. "
                    "none+exp,wirelens+exp,empty+otlp,mybuild+exp,native: any of none, empty, "
                    "wirelens, native, whatif, the --compare/--probes names, each with '', '+exp', "
                    "'+exp1pct' or '+otlp'")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the 1 GiB stream memory measurement (bench/stream_memory.py)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 300 calls after 100 warm-up, 2 streams after 1; a 256 MiB "
                         "memory stream (numbers still exact, V8 less warm)")
    ap.add_argument("--no-build", action="store_true", help="do not (re)build filters/empty")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the memory measurement (bench/stream_memory.py for every build), its "
                         "results merged into the existing results file")
    ap.add_argument("--json", type=Path, default=JSON_OUT,
                    help=f"results file (default {JSON_OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.warmup, args.streams, args.warmup_streams = 300, 100, 2, 1
    args.loads = [x for x in args.loads.split(",") if x]
    if not args.loads or any(x not in LOADS for x in args.loads):
        ap.error(f"--loads: choose from {','.join(LOADS)}")
    if args.requests < 1 or args.streams < 1 or args.warmup < 0 or args.warmup_streams < 0 or args.jobs < 1:
        ap.error("--requests, --streams and --jobs must be positive, the warm-ups not negative")
    extra = harness.parse_compare(ap, args.compare)
    if any("+" in name for name in extra):
        ap.error("--compare: a NAME cannot contain '+'")
    if not 0 <= args.counterfactual_rate <= 1:
        ap.error("--counterfactual-rate: a number in [0, 1]")

    benchlib.require_tools({"valgrind": "valgrind", "callgrind_control": "valgrind",
                            "h2load": "nghttp2-client", "nghttp": "nghttp2-client"})
    for path, how in ((harness.WIRELENS_WASM, "make filter"), (args.plugin_config, "make proto"),
                      (BIN / "rest-server", "make services"), (BIN / "grpc-server", "make services")):
        if not path.exists():
            sys.exit(f"{path} is missing: run `{how}` first")
    if not args.no_build:
        harness.build_empty_filter(force=False)
    if args.probes:
        extra.update(harness.build_probes())
    envoy_bin = harness.find_envoy()
    WORK_DIR.mkdir(parents=True, exist_ok=True)

    native_note = None
    if not args.native.is_file():
        native_note = (f"native not measured: {harness._shown(args.native)} is missing (`make native`, "
                       f"filters/native)")
    wasm_src: dict[str, Path | None] = {"none": None, "empty": harness.EMPTY_WASM,
                                        "wirelens": harness.WIRELENS_WASM, "whatif": harness.WIRELENS_WASM,
                                        **({} if native_note else {"native": args.native.resolve()}), **extra}
    if args.variants:
        wanted = [v for v in args.variants.split(",") if v]
    else:
        wanted = default_variants(args.exporters, list(extra), native=native_note is None, otlp=args.otlp)
    parsed = []
    for v in wanted:
        base, shape = v.split("+")[0], v[len(v.split("+")[0]):]
        if base not in wasm_src or shape not in SHAPES:
            ap.error(f"--variants: unknown {v!r} (bases {', '.join(wasm_src)}; shapes '', +exp, +exp1pct, "
                     f"+otlp){'; ' + native_note if base == 'native' and native_note else ''}")
        parsed.append((v, base, shape))
    # Pinned copies: what was measured stays known even if `make filter` / `make native` replaces the build.
    wasm_of: dict[str, Path | None] = {}
    for base in dict.fromkeys(b for _, b, _ in parsed):
        wasm_of[base] = None if wasm_src[base] is None else harness.pin_module(wasm_src[base], WORK_DIR, base)

    plugin_config = with_counterfactual_rate(args.plugin_config.read_text(), args.counterfactual_rate)
    files = {"rest": WORK_DIR / "rest_request.json", "grpc": WORK_DIR / "grpc_request.bin",
             "stream": WORK_DIR / "stream_request.bin"}
    files["rest"].write_bytes(harness.REST_REQUEST)
    files["grpc"].write_bytes(harness.GRPC_REQUEST)
    files["stream"].write_bytes(STREAM_FRAME * STREAM_MESSAGES)

    ports_list = benchlib.free_ports(4 + 2 * len(parsed))
    ports = {"upstream": ports_list[0], "rest": ports_list[2], "grpc": ports_list[3]}
    # The upstream Envoy: the OTLP sink (answers OK) and, exporters off, the upstream.
    upstream = harness.Envoy("instr-upstream", harness.upstream_config(ports_list[0], ports_list[1]),
                        ports_list[0], ports_list[1], work_dir=WORK_DIR)
    services = Services(ports["rest"], ports["grpc"], WORK_DIR)
    measured = [Measured(v, base, shape, wasm_of[base], ports_list[4 + 2 * i], ports_list[5 + 2 * i])
                for i, (v, base, shape) in enumerate(parsed)]
    meta = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "envoy_version": harness.envoy_version(envoy_bin),
        "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
        "wasm": {base: harness.file_info(wasm_src[base], wasm_of[base]) for base in wasm_of if wasm_of[base]},
        "plugin_config": harness.file_info(args.plugin_config),
        "requests": args.requests, "warmup": args.warmup, "streams": args.streams,
        "warmup_streams": args.warmup_streams, "stream_messages": STREAM_MESSAGES,
        "stream_frame_bytes": len(STREAM_FRAME), "loads": args.loads, "quick": args.quick,
        "exporters": args.exporters, "variants": [m.variant for m in measured], "jobs": args.jobs,
        "record_fields": [name for name, _, _ in wiring.RECORD_FIELDS],
        "counterfactual_rate": args.counterfactual_rate,
        "native_note": native_note,
    }
    if args.memory_only:
        return memory_only(args, envoy_bin, wasm_of, wasm_src, plugin_config, meta)
    if native_note:
        print(f"==> {native_note}", flush=True)

    lock = threading.Lock()
    t_begin = time.monotonic()

    def progress(line: str) -> None:
        with lock:
            print(f"  [{benchlib.fmt_duration(time.monotonic() - t_begin):>6}] {line}", flush=True)

    try:
        upstream.start(envoy_bin)
        upstream.wait_ready()
        services.start()  # every shape's upstream (the filters alone too, since issue 29)
        print(f"==> {len(measured)} variants under callgrind, {args.jobs} at a time: "
              f"{', '.join(m.variant for m in measured)}\n    (each: start ≈1 min, then "
              f"{args.warmup} + {args.requests} calls per load"
              + (f", {args.warmup_streams} + {args.streams} streams of {STREAM_MESSAGES} messages"
                 if any("stream" in m.loads(args.loads) for m in measured) else "") + ")", flush=True)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
        try:
            futures = [pool.submit(measure_variant, m, envoy_bin, ports,
                                   whatif_config(plugin_config) if m.base == "whatif" else plugin_config,
                                   args, files, progress) for m in measured]
            for f in futures:
                f.result()
        finally:
            # On an interrupt: start no other variant; stopping the Envoys below ends the running ones.
            pool.shutdown(wait=False, cancel_futures=True)
    except harness.Broken as exc:
        print(f"\nbench-instructions: broken: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        for m in measured:
            if m.envoy is not None:
                m.envoy.stop()
        services.stop()
        upstream.stop()

    problems = [f"{m.variant}: {m.error}" for m in measured if m.error]
    summary = summarize([m for m in measured if not m.error], args.loads, counterfactual_rate(plugin_config))
    meta["callgrind_s"] = round(time.monotonic() - t_begin, 1)
    result = {"benchmark": "filter_instructions", "meta": meta, "summary": summary,
              "results": {m.variant: m.results for m in measured},
              "exporters": {m.variant: m.exporters for m in measured if m.exporters},
              "problems": problems}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print_report(summary, args.loads, meta)

    if not args.no_memory and args.exporters != "off":
        mem = run_memory(args, envoy_bin, wasm_of, wasm_src, plugin_config)
        result["memory"] = mem
        problems += [f"memory: {p}" for p in mem.get("problems", [])]
        result["problems"] = problems
        meta["elapsed_s"] = round(time.monotonic() - t_begin, 1)
        args.json.write_text(json.dumps(result, indent=1))
    meta["elapsed_s"] = round(time.monotonic() - t_begin, 1)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"\nbench-instructions: {benchlib.fmt_duration(meta['elapsed_s'])}; "
          f"results in {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}")
    if problems:
        print(f"\nbench-instructions: {len(problems)} problem(s): {problems[0][:300]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
