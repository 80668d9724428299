#!/usr/bin/env python3
"""How many instructions does the wirelens filter add to a call? (`make bench-instructions`)

filter_cost.py measures Envoy's CPU time per call. On these shared 2-core
VMs that number moves by 30 % and more between runs and between hours (the
"slow state" in bench/README.md), so a difference of a few µs between two
filters takes many repetitions to settle. This benchmark counts instructions
instead: each measured Envoy runs under valgrind's callgrind, which counts
every instruction Envoy executes (its own code, V8's compiled wasm, libc),
whatever else the machine is doing. Two runs of the same build agree within
0.2 %, so one run decides what filter_cost.py needs many for.

Same Envoy configurations as filter_cost.py (the production listener shape,
--upstream mixed: REST answered by a direct_response, gRPC by a native
upstream Envoy with a real gRPC response), same variants (none, empty,
wirelens, --compare NAME=PATH, --probes). Per variant: start it under
callgrind, warm up both loads (V8 compiles the module lazily and tiers up),
then for each load zero the counters, send exactly --requests calls with
h2load, dump the counters. Instructions per call = the dump's total over the
calls. Variants run --jobs at a time (valgrind runs a process on one core).

What it is not: time. An instruction of a cache-missing host call costs more
than one of a tight loop, and a sleeping Envoy that is woken pays in time, not
instructions. For the µs targets, filter_cost.py remains the measure; this
one says where the µs go, and whether a change made the filter cheaper.

Writes build/bench/filter_instructions.json; exits 0 whatever the numbers, 1
when something broke (an Envoy did not start, a load saw errors, no dump).
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
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import filter_cost as fc  # noqa: E402
from benchlib import ROOT  # noqa: E402

WORK_DIR = fc.OUT_DIR / "filter_instructions"
JSON_OUT = fc.OUT_DIR / "filter_instructions.json"
LOADS = ("rest", "grpc")
LOAD_TITLES = {
    "rest": "rest  HTTP/1.1 POST /v1/hello (JSON), direct_response",
    "grpc": "grpc  h2 /wirelens.v1.Hello/SayHello, upstream Envoy (message + trailers)",
}
# Under valgrind Envoy starts in 20-90 s (V8 compiles the module instrumented).
START_TIMEOUT_S = 600.0
CHECK_TIMEOUT_S = 120.0
# callgrind writes a dump some time after it is asked (at its next scheduling point).
DUMP_TIMEOUT_S = 120.0


def rest_argv(port: int, requests: int, body: Path) -> list[str]:
    """h2load over HTTP/1.1: an exact number of REST calls (wrk cannot fix a count)."""
    return ["h2load", "--h1", "-n", str(requests), "-c", "4", "-t", "1", "-d", str(body),
            "-H", "content-type: application/json", "-T", "30", "-N", "30",
            f"http://127.0.0.1:{port}{fc.REST_PATH}"]


def grpc_argv(port: int, requests: int, body: Path) -> list[str]:
    return fc.h2load_argv(port, requests, 1, 4, body, timeout_s=30)  # slow under valgrind


@dataclass
class Measured:
    """One variant: its Envoy under callgrind, and what each load cost."""
    variant: str
    wasm: Path | None
    port: int
    admin_port: int
    envoy: fc.Envoy | None = None
    results: dict = field(default_factory=dict)   # load -> record
    error: str | None = None


class CallgrindEnvoy(fc.Envoy):
    """filter_cost's Envoy, run under valgrind --tool=callgrind."""

    def __init__(self, name: str, config: dict, port: int, admin_port: int) -> None:
        self.dump_prefix = WORK_DIR / f"callgrind.{name}"
        super().__init__(name, config, port, admin_port, work_dir=WORK_DIR, wrapper=(
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
            raise fc.Broken(f"callgrind_control {' '.join(args)} for {self.name} failed: "
                            f"{(res.stderr or res.stdout).strip()[:300]}")

    def dumps(self) -> list[Path]:
        return sorted(WORK_DIR.glob(f"{self.dump_prefix.name}.*"),
                      key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else -1)

    def dump_instructions(self) -> int:
        """Asks for a dump of the counters since the last zeroing; returns its total Ir."""
        before = {p.name for p in self.dumps()}
        self.control("--dump")
        deadline = time.monotonic() + DUMP_TIMEOUT_S
        while time.monotonic() < deadline:
            for path in self.dumps():
                if path.name in before:
                    continue
                text = path.read_text(errors="replace")
                m = re.search(r"^totals:\s+(\d+)", text, re.M)
                if m:
                    return int(m.group(1))
            time.sleep(0.2)
        raise fc.Broken(f"no callgrind dump from {self.name} within {DUMP_TIMEOUT_S:.0f}s "
                        f"(files: {[p.name for p in self.dumps()]})")


def run_load(load: str, m: Measured, requests: int, files: dict) -> dict:
    argv = (rest_argv if load == "rest" else grpc_argv)(m.port, requests, files[load])
    res = benchlib.run_tool(argv, timeout_s=120 + requests * 0.1)
    if res.timed_out or res.returncode != 0:
        raise fc.Broken(f"h2load {load} against {m.variant} failed (exit {res.returncode}"
                        f"{', timed out' if res.timed_out else ''}):\n{res.stdout[-800:]}{res.stderr[-400:]}")
    done, _rps, problems = fc.parse_h2load(res.stdout)
    if problems or done != requests:
        raise fc.Broken(f"h2load {load} against {m.variant}: {done}/{requests} calls succeeded; "
                        f"{'; '.join(problems)}")
    return {"calls": done}


def measure_variant(m: Measured, envoy_bin: Path, upstream_port: int, plugin_config: str,
                    args: argparse.Namespace, files: dict, progress) -> None:
    cfg = fc.measured_config(m.wasm, plugin_config, False, "mixed", m.port, m.admin_port,
                             upstream_port, f"wirelens-instr-{m.variant}")
    env = CallgrindEnvoy(m.variant, cfg, m.port, m.admin_port)
    m.envoy = env
    try:
        t0 = time.monotonic()
        env.start(envoy_bin)
        env.wait_ready(START_TIMEOUT_S)
        # The first calls are slow under valgrind: V8 compiles each function
        # of the module when it first runs, instrumented.
        fc.check_rest(m.port, timeout_s=CHECK_TIMEOUT_S)
        if "grpc" in args.loads:
            fc.check_grpc(m.port, files["grpc"], direct=False, timeout_s=CHECK_TIMEOUT_S)
        progress(f"{m.variant}: ready under callgrind in {time.monotonic() - t0:.0f}s, warming up")
        for load in args.loads:
            run_load(load, m, args.warmup, files)
        for load in args.loads:
            env.control("--zero")
            rec = run_load(load, m, args.requests, files)
            total = env.dump_instructions()
            rec.update({"instructions": total, "per_call": total / rec["calls"]})
            m.results[load] = rec
            progress(f"{m.variant}: {load} {rec['per_call']:,.0f} instructions per call")
        problems = env.new_log_problems()
        if problems:
            raise fc.Broken(f"{m.variant}: Envoy log: {problems[0][:200]}")
    except (fc.Broken, OSError, subprocess.SubprocessError) as exc:
        m.error = str(exc)
        progress(f"{m.variant}: BROKEN: {str(exc)[:300]}")
    finally:
        env.stop()


def summarize(measured: list[Measured], loads: list[str]) -> dict:
    per = {m.variant: {load: m.results.get(load, {}).get("per_call") for load in loads}
           for m in measured}
    out: dict = {"per_call": per, "differences": {}}
    for load in loads:
        d = {}
        none, empty = per.get("none", {}).get(load), per.get("empty", {}).get(load)
        for variant, by_load in per.items():
            v = by_load.get(load)
            if v is None or variant in ("none", "empty"):
                continue
            d[variant] = {"over_empty": v - empty if empty else None,
                          "over_none": v - none if none else None,
                          "capacity_vs_none": none / v if none else None}
        if none and empty:
            d["empty"] = {"over_none": empty - none, "capacity_vs_none": none / empty}
        out["differences"][load] = d
    return out


def fmt_k(v: float | None, sign: bool = False) -> str:
    if v is None:
        return "—"
    return f"{v / 1000:+.1f}k" if sign else f"{v / 1000:.1f}k"


def print_report(summary: dict, loads: list[str], meta: dict) -> None:
    per, diffs = summary["per_call"], summary["differences"]
    variants = list(per)
    print()
    print(f"Instructions per call of the measured Envoy (callgrind, all threads; "
          f"{meta['requests']} calls per load after {meta['warmup']} warm-up calls)")
    builds = "  ".join(f"{name}.wasm {info['sha256']}" for name, info in meta["wasm"].items()
                       if name != "empty" and not name.startswith("probe-"))
    print(f"Envoy {meta['envoy_version']}  {builds}{'  QUICK: smoke test' if meta['quick'] else ''}")
    for load in loads:
        print(f"\n{LOAD_TITLES[load]}")
        print(f"  {'variant':<18} {'instr/call':>11} {'over empty':>11} {'over none':>10} "
              f"{'capacity vs none':>17}")
        for v in variants:
            d = diffs[load].get(v, {})
            cap = d.get("capacity_vs_none")
            print(f"  {v:<18} {fmt_k(per[v][load]):>11} {fmt_k(d.get('over_empty'), True):>11} "
                  f"{fmt_k(d.get('over_none'), True):>10} {(f'{cap:.3f}' if cap else '—'):>17}")
    print("\ncapacity vs none = instructions(none) / instructions(variant): the throughput "
          "share left\nwhen Envoy's instructions are the bottleneck. Differences of a few "
          "hundred instructions\nare within the run-to-run spread (≈0.2 %).")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000,
                    help="calls per load and variant, counted (default 2000)")
    ap.add_argument("--warmup", type=int, default=500,
                    help="calls per load and variant before counting (default 500)")
    ap.add_argument("--loads", default="rest,grpc", help="comma-separated subset of rest,grpc")
    ap.add_argument("--jobs", type=int, default=2,
                    help="variants measured at the same time (default 2: one per core)")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=PATH",
                    help="also measure another proxy-wasm build (same plugin config); repeatable")
    ap.add_argument("--probes", action="store_true",
                    help=f"also the host-call probes of filters/empty ({', '.join(fc.PROBES)})")
    ap.add_argument("--variants", help="measure only these (comma-separated) of none, empty, "
                    "wirelens and the --compare/--probes names")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 300 calls after 100 warm-up (numbers still exact, V8 less warm)")
    ap.add_argument("--no-build", action="store_true", help="do not (re)build filters/empty")
    ap.add_argument("--json", type=Path, default=JSON_OUT,
                    help=f"results file (default {JSON_OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    if args.quick:
        args.requests, args.warmup = 300, 100
    args.loads = [x for x in args.loads.split(",") if x]
    if not args.loads or any(x not in LOADS for x in args.loads):
        ap.error(f"--loads: choose from {','.join(LOADS)}")
    if args.requests < 1 or args.warmup < 0 or args.jobs < 1:
        ap.error("--requests and --jobs must be positive, --warmup not negative")
    extra = fc.parse_compare(ap, args.compare)

    benchlib.require_tools({"valgrind": "valgrind", "callgrind_control": "valgrind",
                            "h2load": "nghttp2-client"})
    for path, how in ((fc.WIRELENS_WASM, "make filter"), (fc.OPMAP, "make proto")):
        if not path.exists():
            sys.exit(f"{path.relative_to(ROOT)} is missing: run `{how}` first")
    if not args.no_build:
        fc.build_empty_filter(force=False)
    if args.probes:
        extra.update(fc.build_probes())
    envoy_bin = fc.find_envoy()
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    fc.WORK_DIR.mkdir(parents=True, exist_ok=True)

    wasm_of: dict[str, Path | None] = {"none": None}
    for name, src in [("empty", fc.EMPTY_WASM), ("wirelens", fc.WIRELENS_WASM), *extra.items()]:
        wasm_of[name] = WORK_DIR / f"{name}.wasm"  # pinned copies: what was measured stays known
        shutil.copyfile(src, wasm_of[name])
    if args.variants:
        wanted = args.variants.split(",")
        unknown = [v for v in wanted if v not in wasm_of]
        if unknown:
            ap.error(f"--variants: unknown {', '.join(unknown)} (have {', '.join(wasm_of)})")
        wasm_of = {v: wasm_of[v] for v in wasm_of if v in wanted}

    plugin_config = fc.OPMAP.read_text()
    files = {"rest": WORK_DIR / "rest_request.json", "grpc": WORK_DIR / "grpc_request.bin"}
    files["rest"].write_bytes(fc.REST_REQUEST)
    files["grpc"].write_bytes(fc.GRPC_REQUEST)

    ports = benchlib.free_ports(2 + 2 * len(wasm_of))
    upstream = fc.Envoy("instr-upstream", fc.upstream_config(ports[0], ports[1]), ports[0], ports[1])
    measured = [Measured(v, w, ports[2 + 2 * i], ports[3 + 2 * i]) for i, (v, w) in enumerate(wasm_of.items())]
    meta = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "envoy_version": fc.envoy_version(envoy_bin),
        "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
        "wasm": {name: fc.file_info(src, wasm_of[name]) for name, src in
                 [("empty", fc.EMPTY_WASM), ("wirelens", fc.WIRELENS_WASM), *extra.items()]
                 if name in wasm_of},
        "opmap": fc.file_info(fc.OPMAP),
        "requests": args.requests, "warmup": args.warmup, "loads": args.loads, "quick": args.quick,
    }

    lock = threading.Lock()
    t_begin = time.monotonic()

    def progress(line: str) -> None:
        with lock:
            print(f"  [{benchlib.fmt_duration(time.monotonic() - t_begin):>6}] {line}", flush=True)

    try:
        upstream.start(envoy_bin)
        upstream.wait_ready()
        print(f"==> {len(measured)} variants under callgrind, {args.jobs} at a time "
              f"(each: start ≈1 min, then {args.warmup} + {args.requests} calls per load)", flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(measure_variant, m, envoy_bin, ports[0], plugin_config, args,
                                   files, progress) for m in measured]
            for f in futures:
                f.result()
    except fc.Broken as exc:
        print(f"\nbench-instructions: broken: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        for m in measured:
            if m.envoy is not None:
                m.envoy.stop()
        upstream.stop()

    problems = [f"{m.variant}: {m.error}" for m in measured if m.error]
    summary = summarize([m for m in measured if not m.error], args.loads)
    meta["elapsed_s"] = round(time.monotonic() - t_begin, 1)
    result = {"benchmark": "filter_instructions", "meta": meta, "summary": summary,
              "results": {m.variant: m.results for m in measured}, "problems": problems}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print_report(summary, args.loads, meta)
    if problems:
        print(f"\nbench-instructions: {len(problems)} variant(s) broke: {problems[0][:300]}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
