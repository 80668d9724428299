"""procmetrics and the Collector's hostmetrics receiver side by side, in one run (issue 32).

Starts a local stack on free ports in a temporary directory (`up`: ClickHouse,
Jaeger, the Collector, logship, the services, Envoy, procmetrics), then the
hostmetrics Collector beside it (collector/hostmetrics.yaml plus the stack's
part, collector/hostmetrics.py; its pid file in the stack's pids/, so
procmetrics measures it as it measures itself). Both send process.cpu.time and
process.memory.usage to the stack's Collector at once; in ClickHouse they
differ by ScopeName (procmetrics' package, the hostmetrics process scraper's).

Once both report every component, the window opens at a whole second T0 with
the stack idle, --calls gRPC calls go through Envoy, the Collector is
SIGKILLed and started again --outage seconds later, the ClickHouse engine is
SIGKILLed (its supervisor starts another), --calls REST calls go through
Envoy, every call becomes a row, and the window closes at T1, idle again.
Both sources must report the old and the new pid of each (procmetrics finds
the engine as a member of the supervisor's process group, hostmetrics by its
command line); the table says how many of the outage's seconds each source
has points for (procmetrics drops a sample the Collector does not take,
the hostmetrics Collector queues and retries it). Idle ends keep
the error of the scraper's unaligned ticks small (ClickHouse stores whole
seconds: a hostmetrics point stored at T was read up to 1 s after T).

Per component and per source: the CPU seconds (user + system, each process
over the whole seconds both sources cover, summed over the component's
processes) and the RSS at T1 (summed), and which pids each source counted.
Agreement: CPU within max(--cpu-abs s, --cpu-rel, the phase bound) and RSS
within max(--rss-abs MiB, --rss-rel) of procmetrics', per component, over
the pids procmetrics counted. The phase bound: the sources read a process
at different moments of a second, so at each end of a process's span they
may differ by what it spent in that second (its fastest rate within a
second of that end, in either source, + a tick per state); small at idle
ends, up to a core-second at a restarted process's start-up or kill. Pids
only hostmetrics counted (another stack's process with the same command
line, e.g. Jaeger's) are listed, not added.
Prints the table, writes build/bench/process_metrics.json; exit 0 when every
component agrees, 1 when one does not or something broke.

    python -m bench.process_metrics [--calls 3000] [--outage 5] [--keep] [--binary bin/otelcol-wirelens]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import benchlib
from bench.benchlib import ROOT
from collector import hostmetrics
from deploy.local import stack
from wirelens_helpers import supervise
from wirelens_helpers.wait import WaitTimeout, wait_for

OUT = ROOT / "build" / "bench" / "process_metrics.json"
LOADGEN = ROOT / "bin" / "loadgen"
SCOPES = {
    "procmetrics": "github.com/wirelens/wirelens/collector/internal/procmetrics",
    "hostmetrics": "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/hostmetricsreceiver/"
                   "internal/scraper/processscraper",
}
MIB = 1 << 20
LOADS = [("grpc", "hello.SayHello", []), ("rest", "catalog.GetProduct", ["-id", "0"])]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Broken(RuntimeError):
    pass


def query(settings: dict[str, str], sql: str) -> list[list[str]]:
    text = stack.clickhouse_query(settings, sql + " FORMAT TabSeparated")
    return [line.split("\t") for line in text.splitlines() if line]


def scope_of(scope_name: str) -> str | None:
    return next((source for source, name in SCOPES.items() if name == scope_name), None)


def reporting(settings: dict[str, str], since: int = 0) -> dict[str, set[str]]:
    """source -> the components with process.cpu.time points at or after `since` (unix seconds)."""
    out: dict[str, set[str]] = {source: set() for source in SCOPES}
    for scope, service in query(settings, "SELECT DISTINCT ScopeName, ServiceName FROM otel.otel_metrics_sum "
                                          f"WHERE MetricName = 'process.cpu.time' AND TimeUnix >= {since}"):
        source = scope_of(scope)
        if source:
            out[source].add(service)
    return out


def wait_reporting(settings: dict[str, str], expected: set[str], since: int, what: str, timeout_s: float) -> None:
    def missing() -> dict[str, list[str]]:
        seen = reporting(settings, since)
        return {source: sorted(expected - seen[source]) for source in SCOPES if expected - seen[source]}
    try:
        wait_for(what, missing, lambda m: not m, timeout_s=timeout_s, interval_s=1.0)
    except WaitTimeout as exc:
        raise Broken(f"{what}: after {timeout_s:.0f} s still no process.cpu.time points "
                     f"(source: components missing) {exc.last_seen}") from None


def points(settings: dict[str, str], table: str, metric: str, t0: int, t1: int) -> list[tuple]:
    """(source, component, pid, state, unix seconds, value), oldest first."""
    rows = query(settings, f"SELECT ScopeName, ServiceName, ResourceAttributes['process.pid'], Attributes['state'], "
                           f"toUnixTimestamp(TimeUnix), Value FROM otel.{table} "
                           f"WHERE MetricName = '{metric}' AND TimeUnix >= {t0} AND TimeUnix <= {t1} "
                           "ORDER BY TimeUnix, Value")
    return [(scope_of(s), svc, int(pid), state, int(t), float(v)) for s, svc, pid, state, t, v in rows
            if scope_of(s)]


def value_at(series: list[tuple[int, float]], t: int) -> float | None:
    """The value of the last point at or before t (None: no point yet)."""
    before = [v for ts, v in series if ts <= t]
    return before[-1] if before else None


def compare(cpu: list[tuple], rss: list[tuple], t0: int, t1: int, args) -> dict:
    """Per component: each source's CPU seconds over the seconds both cover for each process (from T0, or
    the later of the two first points of a process started inside the window, to T1, or the earlier of
    the two last points of a process killed inside it: what happened between a sample and the kill
    reaches neither, by different amounts), and the RSS at T1 of the processes alive then."""
    by_series: dict[tuple, list[tuple[int, float]]] = {}
    for source, component, pid, state, t, v in cpu:
        if state not in ("user", "system"):
            raise Broken(f"{source} sent process.cpu.time with state {state!r} (want user and system only)")
        by_series.setdefault((source, component, pid, state), []).append((t, v))
    spans: dict[tuple[str, int], dict[str, tuple[int, int]]] = {}  # (component, pid) -> source -> (first, last)
    for (source, component, pid, _), series in by_series.items():
        first, last = series[0][0], series[-1][0]
        spans.setdefault((component, pid), {})[source] = (t0 if first <= t0 else first, min(last, t1))
    cpu_s: dict[tuple[str, str], dict[int, float]] = {}
    covered: dict[tuple[str, int], tuple[int, int]] = {}
    phase_bound: dict[str, dict[int, float]] = {}
    for (source, component, pid, state), series in by_series.items():
        per_source = spans[(component, pid)]
        lo = max(lo for lo, _ in per_source.values())
        hi = min(hi for _, hi in per_source.values())
        if hi <= lo:
            continue
        covered[(component, pid)] = (lo, hi)
        per_pid = cpu_s.setdefault((source, component), {})
        per_pid[pid] = per_pid.get(pid, 0.0) + value_at(series, hi) - value_at(series, lo)
    # The two sources read a process at different moments of the same second (procmetrics just after
    # it starts, the scraper anywhere in it): at each end of a span they differ by at most what the
    # process spent in that second, bounded here by its fastest rate, in either source, between points
    # within a second of that end (a process killed there has no point after it). Idle ends make it
    # small; a process started or killed inside the window has a busy end.
    totals: dict[tuple, dict[int, float]] = {}
    for (source, component, pid, _), series in by_series.items():
        total = totals.setdefault((source, component, pid), {})
        for t, v in series:
            total[t] = total.get(t, 0.0) + v
    for (component, pid), (lo, hi) in covered.items():
        bound = 0.02  # a clock tick per state
        for end in (lo, hi):
            rates = [0.0]
            for source in SCOPES:
                pts = sorted(totals.get((source, component, pid), {}).items())
                rates += [(v2 - v1) / (t2 - t1) for (t1, v1), (t2, v2) in zip(pts, pts[1:])
                          if end - 1 <= t1 and t2 <= end + 1 and t2 > t1]
            bound += max(rates)
        phase_bound.setdefault(component, {})[pid] = bound
    rss_by: dict[tuple[str, str], dict[int, float]] = {}
    rss_series: dict[tuple, list[tuple[int, float]]] = {}
    for source, component, pid, _, t, v in rss:
        rss_series.setdefault((source, component, pid), []).append((t, v))
    for (source, component, pid), series in rss_series.items():
        if series[-1][0] >= t1:  # alive at the window's end
            rss_by.setdefault((source, component), {})[pid] = value_at(series, t1)

    components = sorted({c for _, c in cpu_s})
    rows, ok = [], True
    for component in components:
        p_cpu, h_cpu = cpu_s.get(("procmetrics", component), {}), cpu_s.get(("hostmetrics", component), {})
        p_rss, h_rss = rss_by.get(("procmetrics", component), {}), rss_by.get(("hostmetrics", component), {})
        pids = sorted(p_cpu)
        row = {"component": component, "pids_procmetrics": pids, "pids_hostmetrics": sorted(h_cpu),
               "seconds_compared": {pid: covered[(component, pid)] for pid in pids if (component, pid) in covered},
               "pids_only_hostmetrics": sorted(set(h_cpu) - set(p_cpu)),
               "pids_only_procmetrics": sorted(set(p_cpu) - set(h_cpu)),
               "cpu_s_procmetrics": round(sum(p_cpu.values()), 3),
               "cpu_s_hostmetrics": round(sum(h_cpu.get(p, 0.0) for p in pids), 3),
               "rss_mib_procmetrics": round(sum(p_rss.get(p, 0.0) for p in pids) / MIB, 1),
               "rss_mib_hostmetrics": round(sum(h_rss.get(p, 0.0) for p in pids) / MIB, 1)}
        row["cpu_diff_s"] = round(row["cpu_s_hostmetrics"] - row["cpu_s_procmetrics"], 3)
        row["rss_diff_mib"] = round(row["rss_mib_hostmetrics"] - row["rss_mib_procmetrics"], 1)
        row["cpu_phase_bound_s"] = round(sum(phase_bound.get(component, {}).values()), 3)
        cpu_tol = max(args.cpu_abs, args.cpu_rel * row["cpu_s_procmetrics"], row["cpu_phase_bound_s"])
        rss_tol = max(args.rss_abs, args.rss_rel * row["rss_mib_procmetrics"])
        row["cpu_tolerance_s"], row["rss_tolerance_mib"] = round(cpu_tol, 3), round(rss_tol, 1)
        problems = []
        if not pids:
            problems.append("procmetrics has no process")
        if row["pids_only_procmetrics"]:
            problems.append(f"hostmetrics lacks pids {row['pids_only_procmetrics']}")
        if abs(row["cpu_diff_s"]) > cpu_tol:
            problems.append(f"CPU differs by {row['cpu_diff_s']:+.3f} s (> {cpu_tol:.3f})")
        if abs(row["rss_diff_mib"]) > rss_tol:
            problems.append(f"RSS differs by {row['rss_diff_mib']:+.1f} MiB (> {rss_tol:.1f})")
        row["agrees"] = not problems
        row["problems"] = problems
        ok = ok and not problems
        rows.append(row)
    return {"t0": t0, "t1": t1, "window_s": t1 - t0, "components": rows, "agree": ok}


def print_table(result: dict) -> None:
    print()
    print(f"procmetrics vs hostmetrics, one run, window {result['window_s']} s "
          f"({result['calls']:,} calls through Envoy): CPU seconds (user+system) in the window, RSS at its end")
    print(f"{'component':<14} {'CPU s proc':>10} {'CPU s host':>10} {'diff':>7} {'tol':>6}   "
          f"{'RSS MiB proc':>12} {'RSS MiB host':>12} {'diff':>6} {'tol':>5}  pids (proc | host only)  ok")
    for r in result["components"]:
        print(f"{r['component']:<14} {r['cpu_s_procmetrics']:>10.2f} {r['cpu_s_hostmetrics']:>10.2f} "
              f"{r['cpu_diff_s']:>+7.2f} {r['cpu_tolerance_s']:>6.2f}   {r['rss_mib_procmetrics']:>12.1f} "
              f"{r['rss_mib_hostmetrics']:>12.1f} {r['rss_diff_mib']:>+6.1f} {r['rss_tolerance_mib']:>5.1f}  "
              f"{len(r['pids_procmetrics'])} | {r['pids_only_hostmetrics'] or '-'}  "
              f"{'yes' if r['agrees'] else 'NO: ' + '; '.join(r['problems'])}")
    print(f"hostmetrics' RSS: in otel.{result['hostmetrics_rss_table']}; states of process.cpu.time seen: "
          f"{result['cpu_states']}")
    f = result["faults"]
    print(f"faults in the window: collector pids {f['collector_pids']} (SIGKILL, down "
          f"{f['collector_down'][1] - f['collector_down'][0]:.1f} s), ClickHouse engine pids {f['engine_pids']} "
          f"(SIGKILL, restarted by its supervisor); envoy's points inside the outage's "
          f"{f['points_in_collector_outage']['seconds']} whole seconds: procmetrics "
          f"{f['points_in_collector_outage']['procmetrics']}, hostmetrics {f['points_in_collector_outage']['hostmetrics']}")
    w = result["seconds_with_points"]
    print(f"envoy's points in the window's {w['seconds']} whole seconds: procmetrics {w['procmetrics']}, "
          f"hostmetrics {w['hostmetrics']}")


def engine_pid(settings: dict[str, str]) -> int | None:
    """The ClickHouse engine: the supervisor's child running --engine (None while it restarts)."""
    supervisor = stack.read_pid(settings, "clickhouse")
    if supervisor is None:
        return None
    try:
        children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    except OSError:
        return None
    for pid in map(int, children):
        try:
            if b"--engine" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue
    return None


def faults(settings: dict[str, str], outage_s: float) -> dict:
    """Inside the window: the Collector SIGKILLed and started again after outage_s (both sources must follow
    its new pid, and procmetrics' samples meanwhile are dropped), then the ClickHouse engine SIGKILLed
    (its supervisor starts a new one: procmetrics follows it as the process group, hostmetrics by its
    command line)."""
    old_collector = stack.read_pid(settings, "collector")
    down_from = time.time()
    log(f"fault: {stack.kill('collector', settings)}; down for {outage_s:g} s")
    time.sleep(outage_s)  # the outage's length, not a wait for anything
    log(f"fault: collector {stack.start_one('collector', settings)}")
    down_to = time.time()
    old_engine = engine_pid(settings)
    if old_engine is None:
        raise Broken("no ClickHouse engine process under the supervisor")
    os.kill(old_engine, 9)

    def serving() -> tuple[int | None, str]:
        pid = engine_pid(settings)
        if pid in (None, old_engine):
            return pid, "no new engine yet"
        try:
            return pid, stack.clickhouse_query(settings, "SELECT 1").strip()
        except stack.StackError as exc:
            return pid, str(exc)
    try:
        new_engine = wait_for("a new ClickHouse engine answering", serving, lambda r: r[1] == "1",
                              timeout_s=120, interval_s=0.5)[0]
    except WaitTimeout as exc:
        raise Broken(f"the ClickHouse engine killed (pid {old_engine}) did not come back: {exc.last_seen}") from None
    log(f"fault: ClickHouse engine {old_engine} killed, {new_engine} serving")
    return {"collector_pids": [old_collector, stack.read_pid(settings, "collector")],
            "collector_down": [down_from, down_to], "engine_pids": [old_engine, new_engine]}


def outage_points(cpu: list[tuple], down: list[float], component: str = "envoy") -> dict[str, int]:
    """How many seconds inside the Collector's outage each source has a point of `component` for."""
    lo, hi = math.ceil(down[0]), math.floor(down[1]) - 1
    return {source: len({t for s, c, _, _, t, _ in cpu if s == source and c == component and lo <= t <= hi})
            for source in SCOPES} | {"seconds": max(0, hi - lo + 1)}


def seconds_with_points(cpu: list[tuple], t0: int, t1: int, component: str = "envoy") -> dict[str, int]:
    """How many of the window's whole seconds each source has a point of `component` for (ClickHouse keeps whole
    seconds: two scrapes near a second's boundary can land in one second and leave the next without)."""
    return {source: len({t for s, c, _, _, t, _ in cpu if s == source and c == component and t0 <= t <= t1})
            for source in SCOPES} | {"seconds": t1 - t0 + 1}


def run_load(settings: dict[str, str], run_id: str, calls: int, loads: list[tuple]) -> None:
    for protocol, operation, extra in loads:
        result = subprocess.run(
            [str(LOADGEN), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}", "-protocol", protocol,
             "-operation", operation, *extra, "-n", str(calls), "-concurrency", "4", "-run-id", run_id,
             "-timeout", "300s"], capture_output=True, text=True, timeout=400)
        if result.returncode != 0:
            raise Broken(f"loadgen {protocol} exited {result.returncode}: {result.stderr[-2000:]}")
        summary = json.loads(result.stdout.splitlines()[-1])
        if summary.get("ok") != calls:
            raise Broken(f"loadgen {protocol}: {summary.get('ok')} of {calls} calls ok: {summary}")
        log(f"load: {calls} {protocol} calls ok")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000, help="gRPC calls, then as many REST calls (default 3000)")
    ap.add_argument("--cpu-abs", type=float, default=0.2, help="CPU tolerance, seconds (default 0.2)")
    ap.add_argument("--cpu-rel", type=float, default=0.05, help="CPU tolerance, fraction (default 0.05)")
    ap.add_argument("--rss-abs", type=float, default=2.0, help="RSS tolerance, MiB (default 2)")
    ap.add_argument("--rss-rel", type=float, default=0.05, help="RSS tolerance, fraction (default 0.05)")
    ap.add_argument("--outage", type=float, default=5.0,
                    help="seconds the Collector stays killed inside the window (default 5)")
    ap.add_argument("--ready-timeout", type=float, default=180.0,
                    help="deadline for both sources to report every component (default 180 s)")
    ap.add_argument("--keep", action="store_true", help="keep the stack's directory (logs) afterwards")
    ap.add_argument("--binary", type=Path, default=ROOT / "bin" / "otelcol-wirelens",
                    help="the Collector binary that runs hostmetrics (default bin/otelcol-wirelens)")
    ap.add_argument("--json", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.calls <= 0:
        ap.error("--calls must be positive")
    for path, how in ((LOADGEN, "make services"), (args.binary, "make collector")):
        if not path.exists():
            ap.error(f"{path} is missing: run `{how}`")

    base = Path(tempfile.mkdtemp(prefix="wirelens-procmetrics-"))
    defaults = stack.load_settings({})
    ports = [name for name in defaults if name.endswith("_PORT")]
    free = benchlib.free_ports(len(ports) + 1)
    environ = {**dict(zip(ports, map(str, free))), "WIRELENS_STATE_DIR": str(base)}
    settings = stack.load_settings(environ)
    health_port = free[-1]
    host = None
    rc = 1
    result: dict = {"calls": 2 * args.calls}
    try:
        log(f"stack in {base}")
        stack.up(settings, log=log)
        hostmetrics.write(settings, args.binary)
        host = supervise.Supervised(
            hostmetrics.NAME, hostmetrics.command(settings, args.binary), base / "logs" / "hostmetrics.log",
            pid_file=base / "pids" / "hostmetrics.pid", cwd=ROOT,
            env={**os.environ, **settings, **hostmetrics.environment(settings, health_port)})
        host.start()
        host.wait_ready(supervise.http_ok(f"http://127.0.0.1:{health_port}/"), timeout_s=60, error=Broken,
                        detail=f"health port {health_port}")
        log(f"hostmetrics pid {host.pid} ({' '.join(hostmetrics.command(settings, args.binary))})")
        expected = {c.name for c in stack.COMPONENTS if c.enabled(settings)} | {hostmetrics.NAME}
        wait_reporting(settings, expected, 0, "both sources report every component", args.ready_timeout)
        t0 = math.floor(time.time()) + 1
        wait_reporting(settings, expected, t0 + 2, "points after the window's start", 60)
        log(f"window opens at {t0}; {args.calls} gRPC and {args.calls} REST calls")
        run_id = f"procmetrics-{uuid.uuid4().hex[:8]}"
        run_load(settings, run_id, args.calls, LOADS[:1])
        result["faults"] = faults(settings, args.outage)
        run_load(settings, run_id, args.calls, LOADS[1:])
        try:
            wait_for("every call a row", lambda: int(stack.clickhouse_query(
                settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'").strip() or 0),
                lambda n: n >= 2 * args.calls, timeout_s=180, interval_s=1.0)
        except WaitTimeout as exc:
            raise Broken(f"{exc.last_seen} of {2 * args.calls} calls in wirelens.requests after 180 s") from None
        t1 = math.floor(time.time()) + 3  # a few idle seconds after the last row
        wait_reporting(settings, expected, t1 + 2, "points after the window's end", 60)
        log(f"window closes at {t1}")
        cpu = points(settings, "otel_metrics_sum", "process.cpu.time", t0 - 5, t1 + 1)
        gauge = points(settings, "otel_metrics_gauge", "process.memory.usage", t0 - 5, t1 + 1)
        summed = points(settings, "otel_metrics_sum", "process.memory.usage", t0 - 5, t1 + 1)
        result.update(compare(cpu, gauge + summed, t0, t1, args))
        result["hostmetrics_rss_table"] = ("otel_metrics_gauge" if any(p[0] == "hostmetrics" for p in gauge)
                                           else "otel_metrics_sum" if any(p[0] == "hostmetrics" for p in summed)
                                           else "none")
        result["faults"]["points_in_collector_outage"] = outage_points(cpu, result["faults"]["collector_down"])
        result["seconds_with_points"] = seconds_with_points(cpu, t0, t1)
        rows = {r["component"]: r for r in result["components"]}
        for component, pids in (("collector", result["faults"]["collector_pids"]),
                                ("clickhouse", result["faults"]["engine_pids"])):
            for source in SCOPES:
                missed = sorted(set(pids) - set(rows.get(component, {}).get(f"pids_{source}", [])))
                if missed:
                    rows.setdefault(component, {"problems": []})["problems"].append(
                        f"{source} never reported pid(s) {missed} (before and after the kill)")
                    rows[component]["agrees"] = result["agree"] = False
        result["cpu_states"] = {source: sorted({p[3] for p in cpu if p[0] == source}) for source in SCOPES}
        result["tolerances"] = {"cpu_abs_s": args.cpu_abs, "cpu_rel": args.cpu_rel,
                                "rss_abs_mib": args.rss_abs, "rss_rel": args.rss_rel}
        print_table(result)
        rc = 0 if result["agree"] and result["hostmetrics_rss_table"] == "otel_metrics_gauge" else 1
    except (Broken, stack.StackError, supervise.SupervisorError) as exc:
        log(f"BROKEN: {exc}")
        result["problem"] = str(exc)
    finally:
        if host is not None:
            host.stop()
        stack.down(settings, log=lambda _: None)
        if args.keep:
            log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {args.json}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
