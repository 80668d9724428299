"""Run every wirelens benchmark, then print one summary screen (`make bench`).

Each benchmark is a script in bench/ that prints its own progress and report
and writes its results as JSON under build/bench/. This runner starts them one
after the other (never in parallel: they would measure each other), then reads
the JSON files and prints the lines that matter from each.

To add a benchmark: write bench/<name>.py (same conventions: --quick, JSON
output, exit 0 whatever the verdict, 1 if something broke) and add a Benchmark
entry to BENCHMARKS with a function that turns its JSON into summary lines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = ROOT / "build" / "bench"


@dataclass
class Benchmark:
    name: str
    script: str                               # in bench/
    json: Path                                # what the script writes
    summary: Callable[[dict], list[str]]      # JSON -> summary lines
    args: tuple[str, ...] = ()
    quick_args: tuple[str, ...] = ("--quick",)


def filter_cost_summary(data: dict) -> list[str]:
    meta, comps, cells = data["meta"], data["summary"]["comparisons"], data["summary"]["cells"]
    lines = [f"Envoy {meta['envoy_version']}, {meta['reps']} reps, wirelens.wasm "
             f"{meta['wasm']['wirelens']['sha256']}{' (QUICK: smoke test only)' if meta.get('quick') else ''}"]
    for load, by_exp in comps.items():
        for exp, c in by_exp.items():
            cpu = {v: cells[load].get(v + ("+exp" if exp == "on" else ""), {})
                   .get("envoy_cpu_us_per_call", {}).get("median") for v in ("none", "empty", "wirelens")}
            label = load + (" +exporters" if exp == "on" else "")
            lines.append(
                f"{label:<18} thr wirelens/none {c['throughput_wirelens_over_none']['median']:.3f} "
                f"{c['verdict_throughput']}   "
                f"+CPU over empty {c['added_cpu_us_wirelens_over_empty']['median']:+.1f} µs "
                f"{c['verdict_added_cpu']}   "
                f"(µs/call none {cpu['none']:.1f}, empty {cpu['empty']:.1f}, wirelens {cpu['wirelens']:.1f})")
    if data.get("problems"):
        lines.append(f"! {len(data['problems'])} problem(s) during the runs: results not trusted")
    return lines


def filter_instructions_summary(data: dict) -> list[str]:
    """The pipeline table (instructions per call / per streamed message), where the price goes, the verdicts."""
    from bench import filter_instructions, stream_memory  # noqa: PLC0415  (their report lines, as they print them)

    meta, per, diffs = data["meta"], data["summary"]["per_call"], data["summary"]["differences"]
    builds = ", ".join(f"{name} {info['sha256']}" for name, info in meta["wasm"].items()
                       if name != "empty" and not name.startswith("probe-")) or "no filter build"
    lines = [f"callgrind, {meta['requests']} calls per load, {meta.get('streams', 0)} streams of "
             f"{meta.get('stream_messages', 0)} messages, {builds}"
             f"{' (QUICK)' if meta.get('quick') else ''}"]
    if meta.get("native_note"):
        lines.append(f"! {meta['native_note']}")
    units = {"rest": "REST/call", "grpc": "gRPC/call", "stream": "stream/msg"}
    for variant in sorted(per, key=filter_instructions.shape_order):
        cells = []
        for load, v in per[variant].items():
            d = diffs.get(variant, {}).get(load, {})
            over = d.get("over_empty") if d.get("over_empty") is not None else d.get("over_none")
            what = "empty" if d.get("over_empty") is not None else "none"
            cells.append(f"{units.get(load, load)} {v / 1000:.1f}k"
                         + (f" ({over / 1000:+.1f}k over {what})" if over is not None else ""))
        lines.append(f"{variant:<16} " + ", ".join(cells))
    exports = filter_instructions.export_lines(data["summary"])
    if exports:
        lines.append("price in the pipeline = the filter alone + Envoy exporting its record:")
        lines += [f"  {line}" for line in exports]
    lines += [f"  {line}" for line in filter_instructions.target_lines(data["summary"])]
    mem = data.get("memory")
    if mem:
        if "verdicts" not in mem and "extra_growth_kib" in mem:  # a results file from before issue 29
            mem = {**mem, "verdicts": {"wirelens": {"extra_growth_kib": mem["extra_growth_kib"],
                                                    "pass": mem["pass"]}}}
        lines += [f"  {line}" for line in stream_memory.verdict_lines(mem)]
    if data.get("problems"):
        lines.append(f"! {len(data['problems'])} problem(s): {data['problems'][0][:100]}")
    return lines


def query_speed_summary(data: dict) -> list[str]:
    queries = data.get("queries", [])
    meta = data.get("meta", {})
    targets = meta.get("targets_s", {})
    lines = [f"saved queries over all {meta.get('rows', 0):,} calls (targets: raw < {targets.get('raw', '?')} s, "
             f"rollup < {targets.get('rollup', '?')} s):"]
    for kind, chosen in (("raw", [q for q in queries if not q["query"].startswith("rollup/")]),
                         ("rollup", [q for q in queries if q["query"].startswith("rollup/")])):
        if not chosen:
            continue
        failed = [q["query"] for q in chosen if not q.get("pass")]
        slowest = max(chosen, key=lambda q: q["median_s"])
        lines.append(f"  {kind:<6} {len(chosen) - len(failed)}/{len(chosen)} PASS, slowest "
                     f"{slowest['median_s']:.3f} s ({slowest['query']})"
                     + (f"; FAIL: {', '.join(failed)}" if failed else ""))
    if data.get("problems"):
        lines.append(f"! {len(data['problems'])} problem(s): {data['problems'][0][:100]}")
    return lines


def ingest_summary(data: dict) -> list[str]:
    lines = []
    rates = (data.get("rates") or {}).get("rates") or []
    idle = next((r["cores"]["clickhouse"] for r in rates if r["rate"] == 0), None)
    for r in rates:
        if r["rate"] == 0:
            lines.append(f"engine idle: {r['cores']['clickhouse']:.3f} cores")
            continue
        above = f" ({r['cores']['clickhouse'] - idle:.3f} above idle)" if idle is not None else ""
        agent = (data.get("rates") or {}).get("agent", "logship")
        lines.append(f"{r['rate']:,} calls/s: engine {r['cores']['clickhouse']:.3f} cores{above}, "
                     f"{r['records_per_engine_cpu_s'] or 0:,.0f} rows per engine CPU s; Collector "
                     f"{r['cores']['collector']:.3f}, {agent} {r['cores'][agent]:.3f}")
    for mix in data.get("mixes", []):
        per = mix["ingest"]["records_per_cpu_s"]
        storage = mix["storage"]
        agent = mix.get("agent", "logship")
        label = mix["mix"] if mix.get("rollups", True) else f"{mix['mix']} (no rollup views)"
        lines.append(f"{label:<6} records per CPU second: Collector {per['collector']:,.0f}, "
                     f"ClickHouse {per['clickhouse']:,.0f}, {agent} {per[agent]:,.0f}; on disk per call: "
                     f"wirelens.requests {storage['wirelens.requests']['bytes_per_call']:.0f} B, "
                     f"otel.otel_logs {storage['otel.otel_logs']['bytes_per_call']:.0f} B")
    if data.get("problems"):
        lines.append(f"! {len(data['problems'])} problem(s): {data['problems'][0][:100]}")
    return lines


def envoy_kill_summary(data: dict) -> list[str]:
    by_flush: dict[int, list[int]] = {}
    for r in data.get("results", []):
        by_flush.setdefault(r["flush_ms"], []).append(r["lost"])
    lines = [f"Envoy SIGKILLed mid-run: flush {ms} ms lost {', '.join(map(str, lost))} calls"
             for ms, lost in sorted(by_flush.items())]
    if data.get("problems"):
        lines.append(f"! {len(data['problems'])} problem(s): {data['problems'][0][:100]}")
    return lines


def service_tracing_summary(data: dict) -> list[str]:
    lines = [f"the services' own tracing per stack (the application's cost, not the filter's; {data['reps']} reps x "
             f"{data['calls']} calls{', QUICK' if data.get('quick') else ''}):"]
    for protocol, row in data["table"].items():
        lines.append(f"  {protocol:<16} service CPU µs/call off {row['off']['cpu_us_per_call']:.1f}, on "
                     f"{row['on']['cpu_us_per_call']:.1f} ({row['added_cpu_us_per_call']:+.1f}, x{row['ratio']:.2f})")
    return lines


BENCHMARKS = [
    Benchmark("filter-cost", "filter_cost.py", OUT / "filter_cost.json", filter_cost_summary),
    Benchmark("filter-instructions", "filter_instructions.py", OUT / "filter_instructions.json",
              filter_instructions_summary),
    Benchmark("ingest", "ingest.py", OUT / "ingest.json", ingest_summary, args=("--without-rollups",)),
    Benchmark("envoy-kill", "envoy_kill.py", OUT / "envoy_kill.json", envoy_kill_summary),
    Benchmark("service-tracing", "service_tracing.py", OUT / "service_tracing.json", service_tracing_summary),
    Benchmark("query-speed", "query_speed.py", OUT / "query_speed.json", query_speed_summary),
    # The same queries on 10x the calls: how their time grows (a 100M-call load takes ~20 min here).
    Benchmark("query-growth", "query_speed.py", OUT / "query_speed_100000000.json", query_speed_summary,
              args=("--rows", "100000000", "--no-run-id"), quick_args=("--quick", "--json",
                                                                     str(OUT / "query_speed_100000000.json"))),
]
# Only the benchmarks whose script is there (so a new one can land in two steps).
BENCHMARKS = [b for b in BENCHMARKS if (HERE / b.script).exists()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run every wirelens benchmark and print a summary.")
    ap.add_argument("--quick", action="store_true", help="smoke-test every benchmark (tiny runs)")
    ap.add_argument("--only", help="comma-separated benchmark names: "
                    + ", ".join(b.name for b in BENCHMARKS))
    args = ap.parse_args(argv)
    chosen = BENCHMARKS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {b.name for b in BENCHMARKS}
        if unknown:
            ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        chosen = [b for b in BENCHMARKS if b.name in wanted]

    results: list[tuple[Benchmark, int, float]] = []
    for bench in chosen:
        print(f"\n######## {bench.name} ({bench.script})", flush=True)
        start = time.monotonic()
        stale = bench.json.stat().st_mtime if bench.json.exists() else None
        cmd = [sys.executable, "-m", f"bench.{Path(bench.script).stem}"] + list(bench.quick_args if args.quick else bench.args)
        rc = subprocess.call(cmd, cwd=ROOT)
        if bench.json.exists() and bench.json.stat().st_mtime == stale:
            rc = rc or 1  # no fresh results
        results.append((bench, rc, time.monotonic() - start))

    print("\n" + "=" * 78)
    print("wirelens benchmarks: summary" + (" (--quick: smoke test, numbers meaningless)" if args.quick else ""))
    print("=" * 78)
    broken = 0
    for bench, rc, elapsed in results:
        status = "ok" if rc == 0 else f"BROKEN (exit {rc})"
        print(f"{bench.name}  [{status}, {elapsed:.0f}s]  -> {bench.json.relative_to(ROOT)}")
        if rc != 0:
            broken += 1
        try:
            for line in bench.summary(json.loads(bench.json.read_text())):
                print(f"  {line}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"  (no summary: {exc.__class__.__name__}: {exc})")
    print("PASS/FAIL are against the targets in bench/README.md; they do not change the exit status.")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
