"""A soak of the whole local stack under crashes (`make soak`, SOAK_MINUTES=N).

Starts its own local stack on free ports (state in OUT/state), then for
--minutes drives steady mixed traffic through Envoy with bin/loadgen: every
protocol (rest, rest-proto, rest-transcoded, grpc, grpc-web, grpc-web-text)
and every streaming shape (unary, client, server, bidi), one open-model
loadgen per pair, all under one run id, each bounded by a count and a time.
Meanwhile, every --kill-every seconds it SIGKILLs one of the Collector,
logship and the ClickHouse engine in turn and brings it back (the Collector
and logship with the stack's start; the engine is the child of
clickhouse_server.py's supervisor, which restarts it), and every
--sample-every seconds it reads every component's RSS and CPU time from /proc
(children included: the ClickHouse engine under its supervisor).

At the end it waits (deadline --drain-timeout) until every call is a row,
prints a table (calls sent, rows in wirelens.requests FINAL for the run,
duplicates after FINAL; per component RSS at start/end/max, the RSS slope in
MiB/min fitted over the second half, CPU seconds, kills and restarts) and
writes OUT/soak.html (the table and a chart of RSS over time, in the style of
`wirelens report`) and OUT/soak.json (settings, the raw samples, the kills,
the summary). Exit 0 when calls == rows, no duplicates, no call failed and
every crash was recovered; 1 otherwise; 2 for bad arguments.

    python -m bench.soak [--minutes 10] [--rate 60] [--kill-every 20] [--shipper logship|filelog] [--out build/soak]
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from bench.benchlib import CLK_TCK, ROOT
from deploy.local import stack
from wirelens_helpers.wait import WaitTimeout, wait_for


LOADGEN = ROOT / "bin" / "loadgen"
REPORT_CSS = ROOT / "cli" / "internal" / "report" / "report.css"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20

# (protocol as recorded, streaming shape, loadgen -protocol, Envoy port setting, operation, extra flags).
# Unary calls spread over several operations so the mix is not one method; streams stay short
# (5 messages) so a call is still a call, not a long-lived connection.
STREAMS = [
    ("rest", "unary", "rest", "WIRELENS_ENVOY_PORT", "catalog.GetProduct", ["-id", "0"]),
    ("rest-proto", "unary", "rest-proto", "WIRELENS_ENVOY_PORT", "hello.SayHello", []),
    ("rest-transcoded", "unary", "rest", "WIRELENS_ENVOY_TRANSCODE_PORT", "people.Register", []),
    ("grpc", "unary", "grpc", "WIRELENS_ENVOY_PORT", "math.CalculateFactorial", ["-number", "100"]),
    ("grpc", "client", "grpc", "WIRELENS_ENVOY_PORT", "people.RegisterBatch", ["-messages", "5"]),
    ("grpc", "server", "grpc", "WIRELENS_ENVOY_PORT", "echo.ServerStream", ["-count", "5"]),
    ("grpc", "bidi", "grpc", "WIRELENS_ENVOY_PORT", "echo.BiStream", ["-messages", "5"]),
    ("grpc-web", "unary", "grpc-web", "WIRELENS_ENVOY_PORT", "echo.Unary", []),
    ("grpc-web", "server", "grpc-web", "WIRELENS_ENVOY_PORT", "echo.ServerStream", ["-count", "5"]),
    ("grpc-web-text", "unary", "grpc-web-text", "WIRELENS_ENVOY_PORT", "catalog.ListProducts", ["-count", "3"]),
    ("grpc-web-text", "server", "grpc-web-text", "WIRELENS_ENVOY_PORT", "echo.ServerStream", ["-count", "5"]),
]
# What ships the access-log file (--shipper, the local stack's WIRELENS_LOG_SHIPPER) -> its component.
SHIPPERS = {"logship": "logship", "filelog": "log-agent"}


def kill_targets(shipper: str) -> list[str]:
    """What gets killed, in turn. "clickhouse-engine" is the supervisor's child only."""
    return ["collector", SHIPPERS[shipper], "clickhouse-engine"]
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#bab0ac"]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------- /proc


def process_table() -> dict[int, tuple[int, int, float]]:
    """Every live process: pid -> (parent pid, RSS bytes, CPU seconds so far: user + system, all threads)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        if fields[0] == "Z":
            continue
        # After the command: state ppid ... utime(12) stime(13) ... rss(22) in pages.
        table[int(entry.name)] = (int(fields[1]), int(fields[21]) * PAGE_SIZE,
                                  (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return table


def process_tree(root: int, table: dict[int, tuple[int, int, float]]) -> list[int]:
    """root and all its descendants that are alive."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(tree)


def clickhouse_engine_pid(settings: dict[str, str]) -> int | None:
    """The engine process: the ClickHouse supervisor's child (None while the supervisor restarts it)."""
    supervisor = stack.read_pid(settings, "clickhouse")
    if supervisor is None:
        return None
    for pid in process_tree(supervisor, process_table()):
        try:
            if b"--engine" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            continue  # exited while we looked
    return None


class Sampler(threading.Thread):
    """Every `every` seconds: each component's RSS (its whole process tree) and CPU seconds.

    CPU seconds per component add up every process it ever had (the last value
    read of each pid), so time spent before a kill still counts. A restart is a
    pid in the tree that the previous non-empty sample did not have.
    """

    def __init__(self, settings: dict[str, str], components: list[str], every: float, t0: float):
        super().__init__(daemon=True)
        self.settings, self.components, self.every, self.t0 = settings, components, every, t0
        self.samples: list[dict] = []
        self.cpu_by_pid: dict[str, dict[int, float]] = {name: {} for name in components}
        self.restarts = {name: 0 for name in components}
        self.last_pids: dict[str, list[int]] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(self.every)  # the sampling period (also wakes at once on stop)

    def sample(self) -> None:
        table = process_table()
        sample = {"t": round(time.monotonic() - self.t0, 2), "components": {}}
        for name in self.components:
            pid = stack.read_pid(self.settings, name)
            tree = process_tree(pid, table) if pid else []
            for p in tree:
                self.cpu_by_pid[name][p] = table[p][2]
            if tree:
                if name in self.last_pids and set(tree) - set(self.last_pids[name]):
                    self.restarts[name] += 1
                self.last_pids[name] = tree
            sample["components"][name] = {
                "pids": tree,
                "rss_mib": round(sum(table[p][1] for p in tree) / MIB, 1),
                "cpu_s": round(sum(self.cpu_by_pid[name].values()), 2),
            }
        self.samples.append(sample)


# ---------------------------------------------------------------- traffic


def start_traffic(settings: dict[str, str], run_id: str, seconds: float, rate: float, out: Path) -> list[dict]:
    """One open-model loadgen per (protocol, shape), rate/len(STREAMS) calls per second each."""
    per_stream = rate / len(STREAMS)
    calls_cap = max(1, round(per_stream * seconds))
    streams = []
    for recorded, shape, protocol, port, operation, extra in STREAMS:
        argv = [str(LOADGEN), "-target", f"127.0.0.1:{settings[port]}", "-protocol", protocol,
                "-operation", operation, "-model", "open", "-rate", f"{per_stream:.4f}/s",
                "-duration", f"{seconds:.0f}s", "-n", str(calls_cap), "-max-in-flight", "20",
                "-run-id", run_id, "-progress", "off", *extra]
        stderr = open(out / f"loadgen-{recorded}-{shape}.log", "wb")
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL)
        stderr.close()
        streams.append({"protocol": recorded, "streaming": shape, "operation": operation, "process": process})
    return streams


def finish_traffic(streams: list[dict], timeout_s: float) -> list[str]:
    """Wait for every loadgen (bounded) and read its summary; returns the problems."""
    problems = []
    deadline = time.monotonic() + timeout_s
    for s in streams:
        process = s.pop("process")
        try:
            stdout, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, _ = process.communicate()
            problems.append(f"loadgen {s['protocol']} {s['streaming']} still running after {timeout_s:.0f}s: killed")
        lines = stdout.decode().strip().splitlines()
        summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        s.update(calls=summary.get("calls", 0), ok=summary.get("ok", 0), errors=summary.get("errors", 0),
                 exit=process.returncode)
        if process.returncode != 0 or not summary:
            problems.append(f"loadgen {s['protocol']} {s['streaming']} exited {process.returncode} "
                            f"({s['errors']} of {s['calls']} calls failed); see its log in the output folder")
    return problems


def traffic_running(streams: list[dict]) -> bool:
    return any(s["process"].poll() is None for s in streams)


# ---------------------------------------------------------------- crashes


def healthy(settings: dict[str, str], name: str) -> bool:
    return bool(stack.read_pid(settings, name)) and stack.component_named(name).ready(settings)()


def crash_and_recover(settings: dict[str, str], target: str, down_s: float) -> str:
    """SIGKILL one target, bring it back, wait until it is healthy; returns what happened."""
    if target == "clickhouse-engine":
        engine = clickhouse_engine_pid(settings)
        if engine is None:
            raise stack.StackError("no ClickHouse engine process under the supervisor")
        os.kill(engine, signal.SIGKILL)
        # The supervisor notices within a second and starts a new engine (its own back-off).
        wait_for("a new ClickHouse engine process",
                 lambda: clickhouse_engine_pid(settings) not in (None, engine), timeout_s=60, interval_s=0.2)
        wait_for("ClickHouse answering again", lambda: healthy(settings, "clickhouse"), timeout_s=90, interval_s=0.2)
        return f"engine pid {engine} killed, new engine pid {clickhouse_engine_pid(settings)}"
    killed = stack.kill(target, settings)
    time.sleep(down_s)  # the outage itself: the component stays down while calls keep coming
    started = stack.start_one(target, settings)
    return f"{killed}; {started}"


# ---------------------------------------------------------------- results


def query_rows(settings: dict[str, str], sql: str) -> list[list[str]]:
    return [line.split("\t") for line in stack.clickhouse_query(settings, sql + " FORMAT TSV").splitlines() if line]


def rows_by_stream(settings: dict[str, str], run_id: str) -> dict[tuple[str, str], int]:
    # How many calls of the run are rows, per protocol and streaming shape (one row per request id)?
    sql = f"""
        SELECT protocol, streaming, count()
        FROM wirelens.requests FINAL
        WHERE run_id = '{run_id}'
        GROUP BY protocol, streaming"""
    return {(p, s): int(n) for p, s, n in query_rows(settings, sql)}


def duplicates(settings: dict[str, str], run_id: str) -> tuple[int, int]:
    """(rows left twice after FINAL, records sent more than once below it in otel.otel_logs)."""
    # Does any request id of the run still have more than one row after FINAL?
    (final_rows, final_ids), = query_rows(settings, f"""
        SELECT count(), uniqExact(request_id)
        FROM wirelens.requests FINAL
        WHERE run_id = '{run_id}'""")
    # How many records did the at-least-once hops (logship, the Collector queue) deliver twice?
    (raw_rows, raw_ids), = query_rows(settings, f"""
        SELECT count(), uniqExact(LogAttributes['wirelens.request_id'])
        FROM otel.otel_logs
        WHERE LogAttributes['wirelens.run_id'] = '{run_id}'""")
    return int(final_rows) - int(final_ids), int(raw_rows) - int(raw_ids)


def wait_for_rows(settings: dict[str, str], run_id: str, calls: int, timeout_s: float) -> tuple[int, str]:
    """Poll until the run has `calls` rows (or the deadline); returns the rows and, if short, where records are."""
    def rows() -> int:
        try:
            return sum(rows_by_stream(settings, run_id).values())
        except stack.StackError:
            return 0  # ClickHouse still restarting: ask again
    try:
        return wait_for(f"{calls} rows of run {run_id}", rows, lambda n: n >= calls, timeout_s=timeout_s,
                        interval_s=1), ""
    except WaitTimeout as short:
        return short.last_seen, (f"after {timeout_s:.0f}s: {short.last_seen} of {calls} rows; "
                                 f"logship: {stack.logship_progress(settings)}")


def slope_mib_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) over the second half of the points, in MiB per minute."""
    half = points[len(points) // 2:]
    if len(half) < 2:
        return 0.0
    n = len(half)
    mean_t = sum(t for t, _ in half) / n
    mean_v = sum(v for _, v in half) / n
    var = sum((t - mean_t) ** 2 for t, _ in half)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in half) / var * 60


def component_summary(sampler: Sampler, kills: list[dict]) -> list[dict]:
    summary = []
    for name in sampler.components:
        points = [(s["t"], s["components"][name]["rss_mib"]) for s in sampler.samples
                  if s["components"][name]["pids"]]
        if not points:
            continue
        summary.append({
            "component": name,
            "rss_start_mib": points[0][1], "rss_end_mib": points[-1][1],
            "rss_max_mib": max(v for _, v in points),
            "rss_slope_mib_per_min": round(slope_mib_per_min(points), 2) + 0.0,  # + 0.0: no "-0.0"
            "cpu_s": sampler.samples[-1]["components"][name]["cpu_s"],
            "kills": sum(1 for k in kills if k["component"] == name),
            "restarts": sampler.restarts[name],
        })
    return summary


def killed_component(target: str) -> str:
    return "clickhouse" if target == "clickhouse-engine" else target


def format_table(result: dict) -> str:
    s = result["summary"]
    lines = [
        f"run {result['run_id']}: {result['minutes']:g} min at {result['rate']:g} calls/s over "
        f"{len(STREAMS)} protocol/shape streams, a kill every {result['kill_every_s']:g} s, "
        f"shipper {result.get('shipper', 'logship')}",
        "",
        f"  calls sent               {s['calls']}  (failed at the client: {s['errors']})",
        f"  rows (requests FINAL)    {s['rows']}",
        f"  duplicates after FINAL   {s['duplicates_after_final']}",
        f"  sent twice below FINAL   {s['resent_in_otel_logs']}  (otel.otel_logs; FINAL keeps one)",
        f"  verdict                  {'PASS' if s['pass'] else 'FAIL'}",
        "",
        f"  {'protocol':<15} {'streaming':<9} {'calls':>7} {'rows':>7}",
    ]
    for st in result["streams"]:
        lines.append(f"  {st['protocol']:<15} {st['streaming']:<9} {st['calls']:>7} {st['rows']:>7}")
    lines += ["", f"  {'component':<13} {'RSS MiB start':>13} {'end':>7} {'max':>7} {'slope MiB/min':>14} "
                  f"{'CPU s':>8} {'kills':>6} {'restarts':>9}"]
    for c in result["components"]:
        lines.append(f"  {c['component']:<13} {c['rss_start_mib']:>13.1f} {c['rss_end_mib']:>7.1f} "
                     f"{c['rss_max_mib']:>7.1f} {c['rss_slope_mib_per_min']:>+14.2f} {c['cpu_s']:>8.1f} "
                     f"{c['kills']:>6} {c['restarts']:>9}")
    lines.append("  (slope: least squares over the second half of the samples; clickhouse = supervisor + engine)")
    for problem in result["problems"]:
        lines.append(f"  problem: {problem}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the HTML page


def rss_chart(samples: list[dict], components: list[str], kills: list[dict]) -> str:
    """RSS over time per component: an inline SVG laid out like the report's time charts (chart.go)."""
    w, h, left, right, top, bottom = 1100, 380, 64.0, 40.0, 56.0, 46.0
    pw, ph = w - left - right, h - top - bottom
    t_end = max(samples[-1]["t"], 1.0)
    hi = max((s["components"][c]["rss_mib"] for s in samples for c in components), default=1.0)
    step = next(v for v in (50, 100, 200, 250, 500, 1000, 2000, 5000, 10 ** 6) if hi / v <= 6)
    y_end = step * -(-hi // step)
    x_of = lambda t: left + t / t_end * pw  # noqa: E731
    y_of = lambda v: top + (1 - v / y_end) * ph  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart timeline" role="img" width="{w}" height="{h}" '
           f'viewBox="0 0 {w} {h}" font-family="system-ui, -apple-system, \'Segoe UI\', Roboto, Helvetica, Arial, '
           f'sans-serif" font-size="12"><title>RSS per component over the soak</title>',
           f'<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>',
           '<text class="chart-title" x="12" y="22" fill="#333" font-size="14" font-weight="600">'
           'RSS per component (MiB); dashed lines: a kill</text>']
    x = left
    for i, name in enumerate(components):
        color = COLORS[i % len(COLORS)]
        out.append(f'<rect class="legend-swatch" x="{x:.1f}" y="34" width="12" height="12" fill="{color}"/>'
                   f'<text class="legend" x="{x + 17:.1f}" y="44" fill="#333">{html.escape(name)}</text>')
        x += 34 + 7 * len(name)
    out.append('<g class="grid">')
    for k in range(int(y_end // step) + 1):
        y = y_of(k * step)
        out.append(f'<line class="grid-line" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                   f'<text class="tick-label" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#333">'
                   f'{k * step:,}</text>')
    out.append('</g><g class="axis x-axis">'
               f'<line class="axis-line" x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#666"/>')
    minute_step = next(m for m in (0.5, 1, 2, 5, 10, 30, 60) if t_end / 60 / m <= 10)
    m = 0.0
    while m * 60 <= t_end:
        xt = x_of(m * 60)
        out.append(f'<line class="tick" x1="{xt:.1f}" y1="{top + ph}" x2="{xt:.1f}" y2="{top + ph + 5}" stroke="#666"/>'
                   f'<text class="tick-label" x="{xt:.1f}" y="{top + ph + 18}" text-anchor="middle" fill="#333">'
                   f'{m:g}</text>')
        m += minute_step
    out.append(f'<text class="axis-title" x="{left + pw / 2}" y="{h - 8}" text-anchor="middle" fill="#333">'
               'minutes since the traffic started</text></g>')
    for kill in kills:
        color = COLORS[components.index(kill["component"]) % len(COLORS)]
        xk = x_of(kill["t"])
        out.append(f'<line class="kill" x1="{xk:.1f}" y1="{top}" x2="{xk:.1f}" y2="{top + ph}" stroke="{color}" '
                   f'stroke-dasharray="4 3"><title>{html.escape(kill["target"])} killed at {kill["t"]:.0f} s</title>'
                   '</line>')
    for i, name in enumerate(components):
        points = [(s["t"], s["components"][name]["rss_mib"]) for s in samples]
        path = " ".join(f"{'M' if j == 0 else 'L'}{x_of(t):.1f} {y_of(v):.1f}" for j, (t, v) in enumerate(points))
        out.append(f'<path class="series" data-series="{html.escape(name)}" d="{path}" fill="none" '
                   f'stroke="{COLORS[i % len(COLORS)]}" stroke-width="2" stroke-linejoin="round">'
                   f'<title>{html.escape(name)}</title></path>')
    out.append("</svg>")
    return "".join(out)


def write_page(path: Path, result: dict, samples: list[dict], components: list[str]) -> None:
    s = result["summary"]
    verdict = ('<span class="status-ok">PASS</span>' if s["pass"] else '<span class="status-bad">FAIL</span>')
    numeric = ("rss_start_mib", "rss_end_mib", "rss_max_mib", "rss_slope_mib_per_min", "cpu_s", "kills", "restarts")
    header = "".join(f'<th class="num">{h}</th>' for h in
                     ("RSS start (MiB)", "end", "max", "slope (MiB/min)", "CPU (s)", "kills", "restarts"))
    body = "".join(
        f"<tr><td>{html.escape(c['component'])}</td>"
        + "".join(f'<td class="num">{c[k]:+.2f}</td>' if k == "rss_slope_mib_per_min" else f'<td class="num">{c[k]}</td>'
                  for k in numeric)
        + "</tr>" for c in result["components"])
    streams = "".join(f"<tr><td>{st['protocol']}</td><td>{st['streaming']}</td><td>{st['operation']}</td>"
                      f'<td class="num">{st["calls"]}</td><td class="num">{st["rows"]}</td></tr>'
                      for st in result["streams"])
    problems = "".join(f'<div class="error">{html.escape(p)}</div>' for p in result["problems"])
    path.write_text(f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wirelens soak — run {html.escape(result['run_id'])}</title><style>{REPORT_CSS.read_text()}</style></head>
<body><main>
<h1><span class="brand">wirelens</span> soak: run <code>{html.escape(result['run_id'])}</code></h1>
<p class="subtitle">Steady mixed traffic through the whole stack while the Collector, logship and the ClickHouse
engine are killed with SIGKILL in turn: every call must be one row, and memory must stay flat.</p>
<dl class="meta">
  <dt>Run</dt><dd>{result['minutes']:g} min, {result['rate']:g} calls/s over {len(STREAMS)} protocol/shape streams,
  a kill every {result['kill_every_s']:g} s, a sample every {result['sample_every_s']:g} s</dd>
  <dt>Started</dt><dd>{result['started']}</dd>
  <dt>Calls sent</dt><dd>{s['calls']} (failed at the client: {s['errors']})</dd>
  <dt>Rows</dt><dd>{s['rows']} in <code>wirelens.requests FINAL</code></dd>
  <dt>Duplicates</dt><dd>{s['duplicates_after_final']} after FINAL ({s['resent_in_otel_logs']} records sent twice
  below it, in <code>otel.otel_logs</code>)</dd>
  <dt>Status</dt><dd>{verdict}</dd>
</dl>
{problems}
<section class="query"><h2>Memory and CPU per component</h2>
<p class="source">RSS of each component's process tree (clickhouse: supervisor and engine); slope: least squares
over the second half of the samples (the first half is warm-up); CPU: user + system seconds of every process the
component had, killed ones included.</p>
<div class="table-wrap"><table><thead><tr><th>component</th>{header}</tr></thead><tbody>{body}</tbody></table></div>
<div class="charts"><figure class="chart">{rss_chart(samples, components, result['kills'])}
<figcaption>Raw samples: <code>soak.json</code> beside this page.</figcaption></figure></div>
</section>
<section class="query"><h2>Calls and rows per protocol and streaming shape</h2>
<div class="table-wrap"><table><thead><tr><th>protocol</th><th>streaming</th><th>operation</th>
<th class="num">calls</th><th class="num">rows</th></tr></thead><tbody>{streams}</tbody></table></div>
</section>
<footer>Generated by <code>bench/soak.py</code>. One file: inline styles and SVG, no scripts, no network.</footer>
</main></body></html>
""")


# ---------------------------------------------------------------- the run


def soak(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    state = out / "state"
    defaults = stack.load_settings({})
    port_names = [name for name in defaults if name.endswith("_PORT")]
    environ = dict(zip(port_names, map(str, stack.free_ports(len(port_names)))))
    environ.update(WIRELENS_STATE_DIR=str(state), WIRELENS_ENVOY_CONCURRENCY="1", WIRELENS_LOG_SHIPPER=args.shipper,
                   WIRELENS_SERVICE_TRACING=args.service_tracing)
    settings = stack.load_settings(environ)
    if state.exists():
        stack.down(settings, log=lambda line: None)  # leftovers of an interrupted soak: their pid files
        shutil.rmtree(state)
    out.mkdir(parents=True, exist_ok=True)
    run_id = f"soak-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    seconds = args.minutes * 60
    components = [c.name for c in stack.COMPONENTS if c.enabled(settings)]
    problems: list[str] = []
    kills: list[dict] = []
    streams: list[dict] = []
    sampler = None
    log(f"soak {run_id}: starting a stack on free ports (state in {state})")
    try:
        stack.up(settings, log=lambda line: log(line.strip()))
        t0 = time.monotonic()
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        sampler = Sampler(settings, components, args.sample_every, t0)
        sampler.start()
        streams = start_traffic(settings, run_id, seconds, args.rate, out)
        log(f"traffic: {args.rate:g} calls/s for {args.minutes:g} min over {len(STREAMS)} streams; "
            f"a kill every {args.kill_every:g} s")
        turn = 0
        while traffic_running(streams):
            next_kill = t0 + (turn + 1) * args.kill_every
            # No kill in the last stretch: each one gets time to recover while calls still come.
            if next_kill > t0 + seconds - args.down_seconds - 5:
                break
            while time.monotonic() < next_kill and traffic_running(streams):
                time.sleep(0.2)  # waiting for the next kill time (a schedule, not a synchronization)
            if not traffic_running(streams):
                break
            targets = kill_targets(args.shipper)
            target = targets[turn % len(targets)]
            t_kill = round(time.monotonic() - t0, 1)
            try:
                what = crash_and_recover(settings, target, args.down_seconds)
            except (stack.StackError, WaitTimeout) as exc:
                problems.append(f"{target} at {t_kill:.0f} s did not recover: {exc}")
                log(problems[-1])
                break
            kills.append({"t": t_kill, "target": target, "component": killed_component(target),
                          "back_after_s": round(time.monotonic() - t0 - t_kill, 1), "what": what})
            log(f"killed {target} at {t_kill:.0f} s, back after {kills[-1]['back_after_s']:.1f} s ({what})")
            turn += 1
        problems += finish_traffic(streams, timeout_s=seconds + 120)
        calls = sum(s["calls"] for s in streams)
        log(f"traffic done: {calls} calls; waiting for every call to be a row (up to {args.drain_timeout:.0f} s)")
        rows, missing = wait_for_rows(settings, run_id, calls, args.drain_timeout)
        if missing:
            problems.append(f"rows missing {missing}")
        sampler.stopping.set()
        sampler.join()
        sampler.sample()  # the end state, after the drain
        for name in components:
            if not healthy(settings, name):
                problems.append(f"{name} is not healthy at the end")
        per_stream = rows_by_stream(settings, run_id)
        for s in streams:  # each (protocol, shape) pair has one stream of its own
            s["rows"] = per_stream.get((s["protocol"], s["streaming"]), 0)
        after_final, resent = duplicates(settings, run_id)
        errors = sum(s["errors"] for s in streams)
        rows = sum(per_stream.values())
        result = {
            "run_id": run_id, "started": started, "minutes": args.minutes, "rate": args.rate,
            "kill_every_s": args.kill_every, "down_seconds": args.down_seconds, "sample_every_s": args.sample_every,
            "shipper": args.shipper,
            "summary": {"calls": calls, "errors": errors, "rows": rows, "duplicates_after_final": after_final,
                        "resent_in_otel_logs": resent},
            "streams": streams, "kills": kills, "problems": problems,
            "components": component_summary(sampler, kills),
        }
        result["summary"]["pass"] = (calls > 0 and calls == rows and after_final == 0 and errors == 0
                                     and all(s["calls"] == s["rows"] for s in streams) and not problems)
        print()
        print(format_table(result))
        (out / "soak.json").write_text(json.dumps({**result, "samples": sampler.samples}, indent=1) + "\n")
        write_page(out / "soak.html", result, sampler.samples, components)
        print(f"\nchart and table: {out / 'soak.html'}\nraw samples: {out / 'soak.json'}")
        return 0 if result["summary"]["pass"] else 1
    except stack.StackError as exc:
        log(f"soak broken: {exc}")
        return 1
    finally:
        if sampler:
            sampler.stopping.set()
        for s in streams:
            if "process" in s and s["process"].poll() is None:
                s["process"].kill()
        stack.down(settings, log=lambda line: None)


def positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=positive, default=10, help="length of the traffic (default 10)")
    parser.add_argument("--rate", type=positive, default=60, help="calls per second, all streams together (60)")
    parser.add_argument("--kill-every", type=positive, default=20,
                        help="seconds between kills; the targets take turns (20)")
    parser.add_argument("--down-seconds", type=float, default=3,
                        help="how long the Collector and logship stay down after a kill (3)")
    parser.add_argument("--sample-every", type=positive, default=3, help="seconds between RSS/CPU samples (3)")
    parser.add_argument("--shipper", choices=sorted(SHIPPERS), default="logship",
                        help="what ships Envoy's access-log file, and is killed in turn: logship (default) or the "
                             "filelog log agent (collector/filelog-agent.yaml)")
    parser.add_argument("--service-tracing", choices=("on", "off"), default="on",
                        help="the services' own spans (WIRELENS_SERVICE_TRACING, default on as in the local stack)")
    parser.add_argument("--drain-timeout", type=positive, default=300,
                        help="seconds to wait for the last rows after the traffic (300)")
    parser.add_argument("--out", default=str(ROOT / "build" / "soak"),
                        help="output folder: soak.html, soak.json, loadgen logs, the stack's state (build/soak)")
    args = parser.parse_args(argv)
    if not LOADGEN.exists():
        parser.error(f"{LOADGEN} is missing: run `make services`")
    return soak(args)


if __name__ == "__main__":
    sys.exit(main())
