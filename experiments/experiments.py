"""Reproduce the five reference experiments (E1-E5) on the local stack and write one report.

    experiments.py            quick size (each experiment well under a minute) -> build/experiments/quick.md
    experiments.py --full     the published counts and durations               -> docs/experiments.md
    experiments.py --only e1,e3 --out /tmp/report.md

Every step of every experiment (experiments/scenarios/e*.json) is one bin/loadgen run
through Envoy with its own run id (warm-up calls carry <run id>-warmup). The
runs are recorded in wirelens.runs; when they are done the script waits until
wirelens.requests holds exactly as many rows per run id as loadgen completed
calls, then measures every step from ClickHouse (experiments/scenarios/per_run.sql, over
the run ids: the proxy's view) and writes a markdown report: per experiment
the published table next to the measured one in the same shape, the ratios
between protocols in both, what only the proxy saw, and where the two agree
or differ. A JSON file with every number goes next to the report.

The stack is started (deploy/local/stack.py) if it is not up; it keeps running.
Exit status: 0 when every step ran and every count matched, 1 otherwise,
130 when interrupted (a partial report is still written).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from experiments import crosscheck
from experiments import experiment_report
from experiments import scenario_runs
from deploy.local import stack
from experiments import stacks  # protocol versus stack: its section of docs/experiments.md
from experiments.scenario_runs import ExperimentError


def default_out(size: str) -> Path:
    return scenario_runs.ROOT / ("docs/experiments.md" if size == "full" else "build/experiments/quick.md")


CROSSCHECK = {"quick": (600, 200.0), "full": (3000, 200.0)}  # calls, calls per second


def run(settings: dict[str, str], size: str = "quick", only: list[str] | None = None, out: Path | None = None,
        log: Callable[[str], None] = print, start_stack: bool = True,
        with_crosscheck: bool = True) -> tuple[Path, list[dict], bool]:
    """Run the experiments; return (report path, results, every step ran and matched)."""
    if size not in scenario_runs.SIZES:
        raise ExperimentError(f"size must be one of {scenario_runs.SIZES}")
    if not scenario_runs.LOADGEN.exists():
        raise ExperimentError(f"{scenario_runs.LOADGEN} is missing: run `make services`")
    known = scenario_runs.EXPERIMENTS
    exps = only or list(known)
    for exp in exps:
        if exp not in known:
            raise ExperimentError(f"unknown experiment {exp!r} (known: {', '.join(known)})")
    if start_stack:
        scenario_runs.ensure_stack(settings, log)
    session = f"x{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:4]}-{size}"
    mach = experiment_report.machine()
    log(f"experiments {', '.join(e.upper() for e in exps)} ({size}) through Envoy 127.0.0.1:"
        f"{settings['WIRELENS_ENVOY_PORT']}, session {session}")
    log(f"machine: {mach.get('cpu', '?')}, {mach.get('nproc')} cores, {mach.get('memory_gib')} GiB, load {mach.get('loadavg')}")
    results: list[dict] = []
    cross: dict | None = None
    interrupted = False
    t0 = time.monotonic()
    try:
        for exp in exps:
            res = scenario_runs.run_experiment(settings, exp, size, session, log)
            results.append(res)
            log(f"    {exp} done in {res['elapsed_s']:.0f}s")
            if res["interrupted"]:
                interrupted = True
                break
        if with_crosscheck and not interrupted:
            log("\n== cross-check with independent tools")
            calls, rate = CROSSCHECK[size]
            rows, notes = crosscheck.run(settings, calls, rate, log)
            cross = {"rows": rows, "notes": notes, "calls": calls, "rate": rate}
    except KeyboardInterrupt:
        interrupted = True
    out = out or default_out(size)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_report(out, experiment_report.render(results, size, session, mach, settings, interrupted, cross))
    out.with_suffix(".json").write_text(json.dumps(
        {"session": session, "size": size, "machine": mach, "interrupted": interrupted,
         "envoy_concurrency": settings.get("WIRELENS_ENVOY_CONCURRENCY", "?"),
         "service_tracing": settings.get("WIRELENS_SERVICE_TRACING", "?"),
         "experiments": [{k: v for k, v in r.items() if k != "scenario"} for r in results],
         "crosscheck": cross}, indent=1, default=str))
    ok = not interrupted and all(not r["failed"] for r in results) and len(results) == len(exps) and \
        (cross is None or crosscheck.passed(cross["rows"]))
    log(f"\nreport: {out} (numbers: {out.with_suffix('.json')}), {time.monotonic() - t0:.0f}s in all"
        + ("" if ok else " — WITH PROBLEMS, see the report's Problems lines" if not interrupted else " — interrupted"))
    if interrupted:
        raise KeyboardInterrupt
    return out, results, ok


def write_report(out: Path, report: str) -> None:
    """Write the report, keeping the protocol-versus-stack section a report already there holds: stacks.py
    writes that one (--docs), from a run of its own."""
    kept = ""
    if out.exists() and stacks.DOCS_SECTION in (old := out.read_text()):
        kept = stacks.DOCS_SECTION + old.split(stacks.DOCS_SECTION, 1)[1]
    out.write_text(report.rstrip("\n") + "\n" + kept if kept else report)


def rerender(data_path: Path, out: Path | None = None) -> Path:
    """Write the report again from the JSON file a run left next to it (e.g. after a change of wording)."""
    data = json.loads(data_path.read_text())
    results = []
    for r in data["experiments"]:
        results.append({**r, "scenario": scenario_runs.load_scenario(r["id"])})
    settings = {"WIRELENS_ENVOY_CONCURRENCY": data.get("envoy_concurrency", "?"),
                "WIRELENS_SERVICE_TRACING": data.get("service_tracing", "?")}
    out = out or data_path.with_suffix(".md")
    write_report(out, experiment_report.render(results, data["size"], data["session"], data["machine"], settings,
                                            data["interrupted"], data.get("crosscheck")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the published counts and durations (long)")
    parser.add_argument("--only", default="", help="comma-separated experiments, e.g. e1,e3 (default: all five)")
    parser.add_argument("--out", type=Path, help="report path (default docs/experiments.md with --full, "
                                                 "build/experiments/quick.md otherwise)")
    parser.add_argument("--no-start", action="store_true", help="do not start the stack if it is not up")
    parser.add_argument("--no-crosscheck", action="store_true", help="skip the cross-check with ghz and h2load")
    parser.add_argument("--crosscheck-only", action="store_true",
                        help="only the cross-check (loadgen vs ghz and h2load), printed and written to "
                             "build/experiments/crosscheck.md")
    parser.add_argument("--calls", type=int, default=1000, help="--crosscheck-only: calls per tool (default 1000)")
    parser.add_argument("--rate", type=float, default=200, help="--crosscheck-only: calls per second (default 200)")
    parser.add_argument("--rerender", type=Path, metavar="JSON",
                        help="write the report again from the JSON a run left next to it (no traffic)")
    args = parser.parse_args(argv)
    try:
        if args.rerender:
            print(rerender(args.rerender, args.out))
            return 0
        settings = stack.load_settings()
        if args.crosscheck_only:
            if not args.no_start:
                scenario_runs.ensure_stack(settings, print)
            rows, notes = crosscheck.run(settings, args.calls, args.rate)
            text = crosscheck.render(rows, notes, args.calls, args.rate)
            out = args.out or scenario_runs.ROOT / "build" / "experiments" / "crosscheck.md"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("# wirelens: cross-check with independent tools\n\n" + text + "\n")
            print(f"\n{text}\n\nwritten to {out}")
            return 0 if crosscheck.passed(rows) else 1
        only = [e.strip().lower() for e in args.only.split(",") if e.strip()] or None
        _, _, ok = run(settings, "full" if args.full else "quick", only, args.out, start_stack=not args.no_start,
                       with_crosscheck=not args.no_crosscheck)
        return 0 if ok else 1
    except (ExperimentError, stack.StackError, clickhouse.QueryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
