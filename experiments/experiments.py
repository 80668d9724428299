#!/usr/bin/env python3
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
import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
import wirelens_helpers  # noqa: F401  (the checkout's programs by module name: tools/pyhelpers/wirelens_helpers/programs.py)
from wirelens_helpers import clickhouse  # noqa: E402  (ClickHouse over HTTP)
from wirelens_helpers.settings import clickhouse_url  # noqa: E402
import stack  # noqa: E402

SCENARIOS = HERE / "scenarios"
EXPERIMENTS = ("e1", "e2", "e3", "e4", "e5")
SIZES = ("quick", "full")
LOADGEN = ROOT / "bin" / "loadgen"

# scenario step parameter -> loadgen flag
FLAGS = {
    "protocol": "-protocol", "operation": "-operation", "model": "-model", "n": "-n", "duration": "-duration",
    "users": "-users", "think": "-think", "spawn_rate": "-spawn-rate", "rate": "-rate", "warmup": "-warmup",
    "warmup_messages": "-warmup-messages", "messages": "-messages", "count": "-count", "number": "-number",
    "id": "-id", "name": "-name", "content": "-content", "concurrency": "-concurrency",
    "max_in_flight": "-max-in-flight", "lockstep": "-lockstep",
}
NOT_FLAGS = {"key", "quick", "full", "target"}


class ExperimentError(RuntimeError):
    pass


# ---------------------------------------------------------------- scenarios


def load_scenario(exp: str) -> dict:
    path = SCENARIOS / f"{exp}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ExperimentError(f"{path}: {exc}") from exc


def expand_steps(scenario: dict, size: str) -> list[dict]:
    """The runs of one size: each step's common parameters plus its size's,
    every list-valued parameter expanded (cartesian product, protocol last)."""
    out = []
    for step in scenario["steps"]:
        params = {k: v for k, v in step.items() if k not in ("quick", "full", "key")}
        params.update(step.get(size, {}))
        unknown = set(params) - set(FLAGS) - NOT_FLAGS
        if unknown:
            raise ExperimentError(f"{scenario['id']}: unknown step parameters {sorted(unknown)}")
        listed = [k for k, v in params.items() if isinstance(v, list)]
        listed.sort(key=lambda k: k == "protocol")  # protocols innermost: REST and gRPC run back to back
        for values in itertools.product(*(params[k] for k in listed)):
            p = dict(params)
            key = dict(step.get("key", {}))
            for k, v in zip(listed, values):
                p[k] = v
                key[k] = v
            name = step_name(scenario["id"], key)  # the protocol only when the key names it
            key.setdefault("protocol", p["protocol"])
            out.append({"params": p, "key": key, "name": name})
    return out


def step_name(exp: str, key: dict) -> str:
    parts = []
    for k, v in key.items():
        if k in ("protocol", "variant", "payload"):
            parts.append(str(v))
        else:
            parts.append(f"{k}{v}")
    seen: list[str] = []
    for p in parts:  # "rest" may be both the variant and the protocol
        if p not in seen:
            seen.append(p)
    return "-".join(seen)


def loadgen_argv(settings: dict[str, str], step: dict, run_id: str, exp: str, timeout_s: float) -> list[str]:
    port = settings["WIRELENS_ENVOY_TRANSCODE_PORT" if step["params"].get("target") == "transcode" else "WIRELENS_ENVOY_PORT"]
    argv = [str(LOADGEN), "-target", f"127.0.0.1:{port}", "-run-id", run_id, "-scenario", exp,
            "-clickhouse-url", clickhouse_url(settings), "-timeout", f"{timeout_s:.0f}s"]
    for k, v in step["params"].items():
        if k in FLAGS and isinstance(v, bool):
            argv.append(f"{FLAGS[k]}={'true' if v else 'false'}")
        elif k in FLAGS:
            argv += [FLAGS[k], str(v)]
    return argv


def step_timeout(params: dict) -> float:
    """A bound on one step: its duration plus slack, or generous per call."""
    if "duration" in params:
        return parse_duration(str(params["duration"])) + 120
    calls = int(params.get("n", 1)) * max(1, int(params.get("messages", 1)) // 50)
    return 120 + calls * 0.05


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not m:
        raise ExperimentError(f"duration {text!r}: expected e.g. 10s, 3m")
    return float(m[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m[2]]


# ---------------------------------------------------------------- ClickHouse


def ch_rows(settings: dict[str, str], sql: str, params: dict[str, str]) -> list[dict]:
    text = clickhouse.run(clickhouse_url(settings), sql, params, "JSONEachRow")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def ch_array(values: list[str]) -> str:
    return "[" + ",".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in values) + "]"


def wait_for_rows(settings: dict[str, str], expected: dict[str, int], timeout_s: float = 120) -> dict[str, int]:
    """Poll until every run id has exactly its expected number of rows; return what was seen."""
    sql = ("SELECT run_id, count() AS n FROM wirelens.requests FINAL "
           "WHERE run_id IN {runs:Array(String)} GROUP BY run_id "
           "SETTINGS output_format_json_quote_64bit_integers = 0")
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {r["run_id"]: int(r["n"]) for r in ch_rows(settings, sql, {"runs": ch_array(list(expected))})}
        if all(seen.get(run, 0) == n for run, n in expected.items()):
            return seen
        if time.monotonic() > deadline:
            return seen
        time.sleep(0.5)  # polling interval while waiting on a deadline


def per_run(settings: dict[str, str], run_ids: list[str]) -> dict[str, dict]:
    sql = (SCENARIOS / "per_run.sql").read_text()
    sql = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).strip().rstrip(";")
    return {r["run_id"]: r for r in ch_rows(settings, sql, {"runs": ch_array(run_ids)})}


def client_summaries(settings: dict[str, str], run_ids: list[str]) -> dict[str, dict]:
    """What loadgen recorded in wirelens.runs for each run (its client-side summary)."""
    sql = ("SELECT run_id, client_summary, ended IS NOT NULL AS ended FROM wirelens.runs FINAL "
           "WHERE run_id IN {runs:Array(String)}")
    out = {}
    for r in ch_rows(settings, sql, {"runs": ch_array(run_ids)}):
        try:
            out[r["run_id"]] = json.loads(r["client_summary"])
        except ValueError:
            out[r["run_id"]] = {}
    return out


# ---------------------------------------------------------------- running


def ensure_stack(settings: dict[str, str], log: Callable[[str], None]) -> None:
    if stack.status(settings, log=lambda _line: None):
        return
    log(f"the local stack is not (fully) up: starting it (state in {stack.state_dir(settings)})")
    stack.up(settings, log=log)


def run_step(argv: list[str], timeout_s: float) -> tuple[int, dict | None, bool]:
    """Run loadgen (its progress goes to our stderr); return (exit status, summary, interrupted)."""
    interrupted = False
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        out, _ = process.communicate(timeout=timeout_s + 30)
    except KeyboardInterrupt:
        # loadgen got the SIGINT too: it stops sending, finishes the calls in
        # flight and records the run; wait for its summary.
        interrupted = True
        try:
            out, _ = process.communicate(timeout=60)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            process.kill()
            out, _ = process.communicate()
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    summary = None
    for line in reversed((out or "").splitlines()):
        if line.startswith("{"):
            try:
                summary = json.loads(line)
            except ValueError:
                pass
            break
    return process.returncode, summary, interrupted


def describe_step(step: dict) -> str:
    p = step["params"]
    bits = [p["protocol"], p["operation"], p.get("model", "sequential")]
    if p.get("model") == "closed":
        bits.append(f"{p.get('users')} users")
        if str(p.get("think", "0")) != "0":
            bits.append(f"think {p['think']}")
    if "n" in p:
        bits.append(f"n={p['n']}")
    if "messages" in p:
        bits.append(f"{p['messages']} messages/stream")
    if "duration" in p:
        bits.append(p["duration"])
    if "warmup" in p:
        bits.append(f"warm-up {p['warmup']}")
    return " ".join(str(b) for b in bits)


def run_experiment(settings: dict[str, str], exp: str, size: str, session: str,
                   log: Callable[[str], None]) -> dict:
    scenario = load_scenario(exp)
    steps = expand_steps(scenario, size)
    log(f"\n== {exp.upper()} {scenario['title']} ({size}: {len(steps)} steps)")
    result: dict[str, Any] = {"id": exp, "scenario": scenario, "steps": [], "interrupted": False, "failed": [],
                              "load_before": loadavg()}
    t0 = time.monotonic()
    for k, step in enumerate(steps, 1):
        run_id = f"{session}-{exp}-{step['name']}"
        argv = loadgen_argv(settings, step, run_id, exp, step_timeout(step["params"]))
        log(f"[{exp} {k}/{len(steps)}] {step['name']}: {describe_step(step)}  (run {run_id})")
        rc, summary, interrupted = run_step(argv, step_timeout(step["params"]))
        entry = {**step, "run_id": run_id, "argv": argv, "rc": rc, "client": summary or {}}
        result["steps"].append(entry)
        if summary:
            log(f"    client: {summary['calls']} calls ({summary.get('warmup_calls', 0)} warm-up), "
                f"p50 {summary['p50_ms']:.2f} ms, p99 {summary['p99_ms']:.2f} ms, {summary['elapsed_s']:.2f} s, "
                f"{summary['errors']} errors")
        if rc != 0 or summary is None:
            result["failed"].append(f"{step['name']}: loadgen exit {rc}")
            log(f"    FAILED: loadgen exited {rc} (its message is above)")
        if interrupted:
            result["interrupted"] = True
            break
    # Exact counts: as many rows as calls, for the measured and the warm-up run ids.
    expected = {}
    for s in result["steps"]:
        if s["client"]:
            expected[s["run_id"]] = int(s["client"]["calls"])
            if s["client"].get("warmup_calls"):
                expected[s["run_id"] + "-warmup"] = int(s["client"]["warmup_calls"])
    log(f"    waiting for {sum(expected.values())} rows in wirelens.requests ({len(expected)} run ids) ...")
    seen = wait_for_rows(settings, expected) if expected else {}
    result["expected_rows"], result["seen_rows"] = expected, seen
    mismatched = {r: f"{seen.get(r, 0)}/{n}" for r, n in expected.items() if seen.get(r, 0) != n}
    if mismatched:
        result["failed"].append(f"row counts differ (rows/calls): {mismatched}")
        log(f"    ROW COUNTS DIFFER (rows/calls): {mismatched}")
    else:
        log(f"    every call is a row: {sum(expected.values())} rows for {len(expected)} run ids")
    run_ids = [s["run_id"] for s in result["steps"]]
    proxy = per_run(settings, run_ids) if run_ids else {}
    recorded = client_summaries(settings, run_ids) if run_ids else {}
    for s in result["steps"]:
        s["proxy"] = proxy.get(s["run_id"], {})
        s["recorded"] = bool(recorded.get(s["run_id"]))
    result["elapsed_s"] = round(time.monotonic() - t0, 1)
    result["load_after"] = loadavg()
    return result


def loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------- formatting


def fnum(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 1000:
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def ms(us: Any, digits: int = 2) -> str:
    return "–" if us is None else fnum(float(us) / 1000, digits)


def ratio(a: Any, b: Any) -> float | None:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None


def fratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def table(columns: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        out.append("| " + " | ".join(fnum(c) if not isinstance(c, str) else c for c in row) + " |")
    return "\n".join(out)


HEADERS = {
    "protocol": "protocol", "requests": "requests", "median_ms": "median ms", "p95_ms": "p95 ms", "p99_ms": "p99 ms",
    "avg_ms": "avg ms", "min_ms": "min ms", "max_ms": "max ms", "avg_response_b": "avg response B",
    "variant": "variant", "rest_ms": "REST ms", "grpc_ms": "gRPC ms", "message": "message", "rest_b": "REST B",
    "grpc_b": "gRPC B", "cpu_percent": "CPU %", "count": "count", "unary_ms": "unary ms",
    "client_stream_ms": "client stream ms", "encoding": "encoding", "bytes": "bytes", "of": "of",
    "payload": "payload", "finding": "finding", "total_s": "total s", "per_s": "calls/s",
}


def published_tables(scenario: dict) -> str:
    parts = []
    for t in scenario["published"]["tables"]:
        parts.append(f"*{t['name']}*\n\n" + table([HEADERS.get(c, c) for c in t["columns"]], t["rows"]))
    return "\n\n".join(parts)


def published_rows(scenario: dict, index: int = 0) -> dict:
    t = scenario["published"]["tables"][index]
    return {row[0]: dict(zip(t["columns"], row)) for row in t["rows"]}


def by_key(result: dict, **match: Any) -> dict | None:
    for s in result["steps"]:
        if all(s["key"].get(k) == v for k, v in match.items()):
            return s
    return None


def proxy_only(result: dict) -> str:
    rows = []
    for s in result["steps"]:
        p = s["proxy"]
        if not p:
            rows.append([s["name"]] + ["no rows"] + [""] * 9)
            continue
        rows.append([
            s["name"],
            f"{fnum(p['req_header_b'], 0)} / {fnum(p['req_header_wire_b'], 0)}",
            fnum(p["req_body_b"], 0),
            f"{fnum(p['resp_header_b'], 0)} / {fnum(p['resp_header_wire_b'], 0)}",
            fnum(p["resp_body_b"], 0),
            f"{fnum(p['wire_in_b'], 0)} / {fnum(p['wire_out_b'], 0)}",
            f"{fnum(p['req_messages'], 0)} / {fnum(p['resp_messages'], 0)}",
            ms(p["ttfb_p50_us"], 3),
            fnum(p["upstream_avg_ms"], 2),
            fnum(p["in_envoy_avg_ms"], 2),
            f"{p['connections']} ({p['http_version']})",
        ])
    return table(["step", "req headers B (filter / wire)", "req body B", "resp headers+trailers B (filter / wire)",
                  "resp body B", "wire B in / out", "messages req / resp", "TTFB p50 ms",
                  "upstream ms (avg)", "Envoy − upstream ms (avg)", "connections"], rows) + (
        "\n\nPer call, averaged over the step. *filter* header bytes are what the wirelens filter counts (names + "
        "values as Envoy holds them); *wire* are Envoy's own downstream counters (HPACK-compressed on HTTP/2). "
        "Wire bytes are the whole request or response on the connection, framing included. Messages are gRPC "
        "messages (0 for REST). *Upstream* is Envoy's upstream service time (until the service's response "
        "headers); *Envoy − upstream* is Envoy's duration minus that: for a unary call the time spent in Envoy "
        "itself, for a stream mostly the time the stream stayed open after its first response headers. Both are "
        "whole milliseconds per call, so sub-millisecond calls average to fractions.")


def client_vs_proxy(result: dict) -> str:
    rows = []
    for s in result["steps"]:
        c, p = s["client"], s["proxy"]
        if not c:
            continue
        rows.append([s["name"], c.get("calls"), p.get("calls", 0),
                     fnum(c.get("p50_ms")), ms(p.get("p50_us")), fnum(c.get("p99_ms")), ms(p.get("p99_us")),
                     fnum(c["p50_ms"] - float(p["p50_us"]) / 1000) if p else "–",
                     fnum(c.get("elapsed_s"), 3), ms(p.get("window_us", 0) / 1000 if p else None, 3)])
    return table(["step", "client calls", "proxy rows", "client p50 ms", "proxy p50 ms", "client p99 ms",
                  "proxy p99 ms", "gap p50 ms", "client wall s", "proxy window s"], rows)


def verdict(published: float | None, measured: float | None, tolerance: float = 0.25) -> str:
    """Same direction (both below or both above 1) and how close."""
    if published is None or measured is None:
        return "cannot compare"
    if abs(published - 1) <= 0.05:
        return "agree: no difference" if abs(measured - 1) <= 0.05 else "differ: no difference published"
    if abs(measured - 1) <= 0.05:
        return "differ: no clear difference measured"
    if (published - 1) * (measured - 1) < 0:
        return "differ in direction"
    if abs(math.log(measured / published)) <= math.log(1 + tolerance):
        return "agree"
    return "agree in direction, differ in size"


# ---------------------------------------------------------------- E1


def render_e1(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc)
    rows, measured = [], {}
    for proto in ("rest", "grpc"):
        s = by_key(result, protocol=proto)
        p = s["proxy"] if s else {}
        measured[proto] = p
        if not p:
            rows.append([proto, "not run"] + [""] * 7)
            continue
        rows.append([proto, p["calls"], ms(p["p50_us"]), ms(p["p95_us"]), ms(p["p99_us"]), ms(p["avg_us"]),
                     ms(p["min_us"]), ms(p["max_us"]), fnum(p["resp_body_b"])])
    cols = ["protocol", "requests", "median ms", "p95 ms", "p99 ms", "avg ms", "min ms", "max ms", "avg response B"]
    r, g = measured.get("rest") or {}, measured.get("grpc") or {}
    ratio_rows = []
    verdicts = {}
    for label, pk, mk in (("median", "median_ms", "p50_us"), ("p95", "p95_ms", "p95_us"), ("p99", "p99_ms", "p99_us"),
                          ("avg", "avg_ms", "avg_us"), ("max", "max_ms", "max_us"),
                          ("requests", "requests", "calls"), ("avg response size", "avg_response_b", "resp_body_b")):
        pr = ratio(pub["grpc"][pk], pub["rest"][pk])
        mr = ratio(g.get(mk), r.get(mk))
        verdicts[label] = verdict(pr, mr)
        ratio_rows.append([label, fratio(pr), fratio(mr), verdicts[label]])
    rps = [[proto, fnum(m["calls"] / (m["window_us"] / 1e6), 1) if m and m.get("window_us") else "–",
            fnum(pub[proto]["requests"] / 180, 1)] for proto, m in measured.items()]
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy (same shape)\n", table(cols, rows),
        "\n*avg response B* is the HTTP response body (for gRPC: the 5-byte frame header plus the message).",
        "\n### Ratios (gRPC ÷ REST)\n", table(["metric", "published", "measured", "verdict"], ratio_rows),
        "\n### Throughput\n", table(["protocol", "measured calls/s (proxy window)", "published calls/s (requests ÷ 180 s)"], rps),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e1(result, pub, r, g, verdicts),
    ]
    return "\n".join(text)


def explain_e1(result: dict, pub: dict, r: dict, g: dict, verdicts: dict) -> str:
    if not r or not g:
        return "Not enough data (a step did not run)."
    m_med = ratio(g["p50_us"], r["p50_us"])
    out = [f"- Median: published gRPC is {fratio(ratio(pub['grpc']['median_ms'], pub['rest']['median_ms']))} of REST; "
           f"measured at the proxy {fratio(m_med)} ({verdicts['median']})."]
    out.append(f"- Requests: both protocols ran the same closed model (same users, same think time), so the counts "
               f"are set by the think time, not by the protocol — published {pub['rest']['requests']:,} vs "
               f"{pub['grpc']['requests']:,}, measured {r['calls']:,} vs {g['calls']:,}.")
    out.append(f"- Response size: REST's JSON body averages {fnum(r['resp_body_b'], 1)} B against gRPC's "
               f"{fnum(g['resp_body_b'], 1)} B ({fnum(g['resp_message_b'], 1)} B of message plus the frame); the "
               f"published sizes were {pub['rest']['avg_response_b']} B and {pub['grpc']['avg_response_b']} B.")
    out.append(f"- Headers dominate both: REST sends {fnum(r['req_header_b'], 0)} B of request headers for "
               f"{fnum(r['req_body_b'], 0)} B of body; gRPC {fnum(g['req_header_b'], 0)} B (HPACK brings it to "
               f"{fnum(g['req_header_wire_b'], 0)} B on the wire) for {fnum(g['req_body_b'], 0)} B.")
    if (m_med or 1) > 0.8:
        out.append("- The published halving came from the servers (Python FastAPI's JSON path against grpcio); "
                   "here both transports run the same Go code, so the protocol difference left is mostly framing "
                   "and parsing, which at this size is a fraction of a millisecond.")
    return "\n".join(out)


# ---------------------------------------------------------------- E2


def render_e2(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc, 0)
    sizes = published_rows(sc, 1)
    rows, client_rows, ratio_rows = [], [], []
    n_pub = 1000
    for variant in ("hello", "hello-big"):
        rs, gs = by_key(result, variant=variant, protocol="rest"), by_key(result, variant=variant, protocol="grpc")
        rp, gp = (rs or {}).get("proxy") or {}, (gs or {}).get("proxy") or {}
        rc, gc = (rs or {}).get("client") or {}, (gs or {}).get("client") or {}
        scale_r = n_pub / rp["calls"] if rp else None
        scale_g = n_pub / gp["calls"] if gp else None
        rest_ms = rp["sum_us"] / 1000 * scale_r if rp else None
        grpc_ms = gp["sum_us"] / 1000 * scale_g if gp else None
        rest_wall = rc["elapsed_s"] * 1000 * n_pub / rc["calls"] if rc.get("calls") else None
        grpc_wall = gc["elapsed_s"] * 1000 * n_pub / gc["calls"] if gc.get("calls") else None
        rows.append([variant, fnum(rest_ms, 0), fnum(grpc_ms, 0)])
        client_rows.append([variant, fnum(rest_wall, 0), fnum(grpc_wall, 0)])
        pr = ratio(pub[variant]["rest_ms"], pub[variant]["grpc_ms"])
        mr, cr = ratio(rest_ms, grpc_ms), ratio(rest_wall, grpc_wall)
        medr = ratio(rp.get("p50_us"), gp.get("p50_us"))
        ratio_rows.append([variant, fratio(pr), fratio(mr), fratio(medr), fratio(cr), verdict(pr, mr)])
    calls = {s["client"].get("calls") for s in result["steps"] if s["client"]}
    scaled = "" if calls == {n_pub} else f" (measured {', '.join(map(str, sorted(c for c in calls if c)))} calls, scaled to {n_pub})"
    hello_r = (by_key(result, variant="hello", protocol="rest") or {}).get("proxy") or {}
    hello_g = (by_key(result, variant="hello", protocol="grpc") or {}).get("proxy") or {}
    big_r = (by_key(result, variant="hello-big", protocol="rest") or {}).get("proxy") or {}
    big_g = (by_key(result, variant="hello-big", protocol="grpc") or {}).get("proxy") or {}
    size_rows = [
        ["request body", sizes["request"]["rest_b"], sizes["request"]["grpc_b"],
         fnum(hello_r.get("req_body_b"), 0), f"{fnum(hello_g.get('req_body_b'), 0)} ({fnum(hello_g.get('req_message_b'), 0)} message)"],
        ["response body (hello)", sizes["response"]["rest_b"], sizes["response"]["grpc_b"],
         fnum(hello_r.get("resp_body_b"), 0), f"{fnum(hello_g.get('resp_body_b'), 0)} ({fnum(hello_g.get('resp_message_b'), 0)} message)"],
        ["response body (hello-big)", "–", "–", fnum(big_r.get("resp_body_b"), 0),
         f"{fnum(big_g.get('resp_body_b'), 0)} ({fnum(big_g.get('resp_message_b'), 0)} message)"],
        ["CPU", "13.6 %", "17.6 %", "not measured", "not measured"],
    ]
    text = [
        "### Published\n", published_tables(sc),
        f"\n### Measured at the proxy (same shape): Σ of per-call time, ms per {n_pub:,} calls{scaled}\n",
        table(["variant", "REST ms", "gRPC ms"], rows),
        f"\n*Client wall time* (loadgen, ms per {n_pub:,} calls, what the published authors timed):\n",
        table(["variant", "REST ms", "gRPC ms"], client_rows),
        "\n### Ratios (REST ÷ gRPC)\n",
        table(["variant", "published", "measured (proxy Σ)", "measured (proxy medians)", "measured (client wall)",
               "verdict (proxy Σ)"], ratio_rows),
        "\nThe sum carries every outlier; the ratio of medians is the robust one on a busy machine.",
        "\n### Sizes (bytes)\n",
        table(["", "published REST", "published gRPC", "measured REST", "measured gRPC"], size_rows),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e2(ratio_rows, hello_r, hello_g, big_r, big_g),
    ]
    return "\n".join(text)


def explain_e2(ratio_rows: list, hr: dict, hg: dict, br: dict, bg: dict) -> str:
    out = []
    for variant, pr, mr, medr, cr, v in ratio_rows:
        out.append(f"- {variant}: published REST took {pr} gRPC's time; measured {mr} at the proxy ({medr} by medians), "
                   f"{cr} at the client ({v}).")
    if hr and hg:
        out.append("- " + where_time("hello over REST", hr, "over gRPC", hg) + ".")
        if hr["p50_us"] < hg["p50_us"]:
            out.append("- " + SMALL_CALLS_NOTE)
    if br and bg:
        out.append(f"- hello-big is where the encodings part: the 1000 strings are {fnum(br['resp_body_b'], 0)} B as JSON "
                   f"and {fnum(bg['resp_message_b'], 0)} B as protobuf; the small hello is dominated by headers "
                   f"({fnum(hr.get('req_header_b'), 0)} B of REST request headers for a {fnum(hr.get('req_body_b'), 0)} B body).")
    out.append("- The published JVM numbers also carry JIT warm-up within their 1000 calls; Go needs none.")
    return "\n".join(out)


# ---------------------------------------------------------------- E3


def e3_count(step: dict) -> int:
    return int(step["params"]["messages"] if step["key"]["variant"] == "client-stream" else step["params"]["n"])


def render_e3(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc, 0)
    counts = sorted({e3_count(s) for s in result["steps"]} | set(pub))
    variants = ("rest", "unary", "client-stream")
    cell: dict[tuple, dict] = {}
    for s in result["steps"]:
        cell[(s["key"]["variant"], e3_count(s))] = s
    rows, client_rows, ratio_rows = [], [], []
    for n in counts:
        def proxy_ms(v: str) -> float | None:
            s = cell.get((v, n))
            return s["proxy"]["sum_us"] / 1000 if s and s["proxy"] else None

        def wall_ms(v: str) -> float | None:
            s = cell.get((v, n))
            return s["client"]["elapsed_s"] * 1000 if s and s["client"] else None
        m = [proxy_ms(v) for v in variants]
        w = [wall_ms(v) for v in variants]
        if any(x is not None for x in m):
            rows.append([n] + [fnum(x, 1) if x is not None else "not run" for x in m])
            client_rows.append([n] + [fnum(x, 1) if x is not None else "not run" for x in w])
        p = pub.get(n)
        pr1 = ratio(p["rest_ms"], p["unary_ms"]) if p else None
        pr2 = ratio(p["unary_ms"], p["client_stream_ms"]) if p else None
        rs_, us_ = cell.get(("rest", n)), cell.get(("unary", n))
        medr = ratio((rs_ or {}).get("proxy", {}).get("p50_us"), (us_ or {}).get("proxy", {}).get("p50_us"))
        ratio_rows.append([n, fratio(pr1), fratio(ratio(m[0], m[1])), fratio(medr), fratio(pr2), fratio(ratio(m[1], m[2]))])
    st = [s for s in result["steps"] if s["key"]["variant"] == "client-stream" and s["proxy"]]
    un = [s for s in result["steps"] if s["key"]["variant"] == "unary" and s["proxy"]]
    rs = [s for s in result["steps"] if s["key"]["variant"] == "rest" and s["proxy"]]
    payload_rows = []
    if rs:
        payload_rows.append(["REST JSON body (a person)", fnum(rs[-1]["proxy"]["req_body_b"], 1), ""])
    if un:
        p = un[-1]["proxy"]
        payload_rows.append(["gRPC unary body", fnum(p["req_body_b"], 1), f"{fnum(p['req_message_b'], 1)} B message + 5 B frame"])
    if st:
        p = st[-1]["proxy"]
        per = p["req_message_b"] / p["req_messages"] if p["req_messages"] else None
        payload_rows.append([f"client stream, per message ({int(p['req_messages']):,} messages)", fnum(per, 1),
                             "message only; 5 B frame each"])
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy (same shape): Σ of per-call time, ms (a client stream is one call)\n",
        table(["count", "REST ms", "unary ms", "client stream ms"], rows),
        "\n*Client wall time* (loadgen, ms; warm-up excluded):\n",
        table(["count", "REST ms", "unary ms", "client stream ms"], client_rows),
        "\n### Ratios\n",
        table(["count", "REST ÷ unary, published", "measured (Σ)", "measured (medians)", "unary ÷ stream, published",
               "measured (Σ)"], ratio_rows),
        "\n### The person on the wire (measured, bytes)\n", table(["", "bytes", "note"], payload_rows),
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e3(ratio_rows, counts, cell),
    ]
    return "\n".join(text)


def explain_e3(ratio_rows: list, counts: list[int], cell: dict) -> str:
    out = []
    measured = [r for r in ratio_rows if r[2] != "–"]
    if measured:
        lo, hi = measured[0], measured[-1]
        out.append(f"- REST ÷ unary: published {lo[1]} at {lo[0]:,} calls to {hi[1]} at {hi[0]:,}; "
                   f"measured {lo[2]} to {hi[2]} ({lo[3]} to {hi[3]} by medians).")
        out.append(f"- Unary ÷ client stream: published {lo[4]} at {lo[0]:,} to {hi[4]} at {hi[0]:,}; "
                   f"measured {lo[5]} to {hi[5]}. One stream pays the per-call cost (headers, routing, the filter's "
                   f"per-request work, one access-log record) once instead of N times, which is why it wins by more as N grows.")
    big = max((n for n in counts if cell.get(("client-stream", n)) and cell[("client-stream", n)]["proxy"]), default=None)
    if big:
        p = cell[("client-stream", big)]["proxy"]
        out.append(f"- The proxy counted the {big:,}-person stream exactly: {int(p['req_messages']):,} request messages, "
                   f"{int(p['resp_messages'])} reply, one row.")
    return "\n".join(out)


# ---------------------------------------------------------------- E4


PAYLOADS = {"product": "GetProduct (~0.8 KB)", "list100": "ListProducts(100)", "list500": "ListProducts(500)"}


def render_e4(result: dict) -> str:
    sc = result["scenario"]
    rows, trend = [], {}
    for payload, label in PAYLOADS.items():
        users = sorted({s["key"]["users"] for s in result["steps"] if s["key"]["payload"] == payload})
        for u in users:
            r = (by_key(result, payload=payload, users=u, protocol="rest") or {}).get("proxy") or {}
            g = (by_key(result, payload=payload, users=u, protocol="grpc") or {}).get("proxy") or {}

            def rps(p: dict) -> float | None:
                return p["calls"] / (p["window_us"] / 1e6) if p and p.get("window_us") else None
            pr, ptr = ratio(g.get("p90_us"), r.get("p90_us")), ratio(rps(g), rps(r))
            trend.setdefault(payload, []).append((u, pr, ptr, r, g))
            rows.append([label, u, ms(r.get("p90_us")), ms(g.get("p90_us")), fratio(pr),
                         fnum(rps(r), 0), fnum(rps(g), 0), fratio(ptr),
                         f"{fnum(r.get('resp_body_b'), 0)} / {fnum(g.get('resp_body_b'), 0)}"])
    text = [
        "### Published\n", published_tables(sc),
        "\n### Measured at the proxy\n",
        table(["payload", "users", "REST p90 ms", "gRPC p90 ms", "gRPC ÷ REST p90", "REST calls/s", "gRPC calls/s",
               "gRPC ÷ REST calls/s", "response body B REST / gRPC"], rows),
        "\nCalls/s is the step's calls over its window at the proxy (first call in to last call out).",
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e4(trend),
    ]
    return "\n".join(text)


def explain_e4(trend: dict) -> str:
    out = []
    for payload, points in trend.items():
        pts = [(u, pr, ptr) for u, pr, ptr, _, _ in points if pr is not None]
        if not pts:
            continue
        (u0, pr0, t0), (u1, pr1, t1) = pts[0], pts[-1]
        lead0 = "gRPC" if pr0 < 1 else "REST"
        lead1 = "gRPC" if pr1 < 1 else "REST"
        line = (f"- {PAYLOADS[payload]}: at {u0} user{'s' if u0 != 1 else ''} {lead0} has the lower p90 "
                f"(gRPC ÷ REST {fratio(pr0)}); at {u1} users {lead1} (gRPC ÷ REST {fratio(pr1)}, throughput {fratio(t1)}).")
        if payload == "list500":
            line += (" Published: gRPC 70-80 % faster than Spring Web (≈0.2-0.3×) with 1.6-1.7× the throughput — "
                     + ("measured agrees in direction." if pr1 < 1 and (t1 or 0) > 1 else "measured differs."))
        else:
            line += (" Published: REST ahead at low concurrency, gRPC catching up — measured "
                     + ("agrees." if pr0 >= 1 and pr1 < pr0 else
                        "shows gRPC ahead from the start." if pr0 < 1 else "differs."))
        out.append(line)
    out.append("- loadgen decodes and checks every reply (JMeter only reads the bytes), so on large lists the client "
               "column carries JSON decoding: the client-minus-proxy gap grows with the body for REST much more than "
               "for gRPC. The proxy's latency ends when the last byte leaves Envoy, before any client decoding.")
    out.append("- Large bodies are where the encodings part: protobuf is ~60 % of the JSON bytes here and needs no "
               "text formatting of numbers; the REST server's JSON marshalling (protojson) is the main cost "
               "the proxy sees as upstream time.")
    return "\n".join(out)


# ---------------------------------------------------------------- E5


def render_e5(result: dict) -> str:
    sc = result["scenario"]
    pub = published_rows(sc)
    n_pub = 10000
    rows, client_rows, ratio_rows = [], [], []
    measured: dict[str, float | None] = {}
    ns = set()
    for variant in ("unary", "bidi-stream", "rest-proto", "rest-json", "bidi-stream-pipelined"):
        s = by_key(result, variant=variant)
        if s is None and variant not in pub:
            continue
        p, c = (s or {}).get("proxy") or {}, (s or {}).get("client") or {}
        n = (int(s["params"].get("messages", 1)) if variant.startswith("bidi") else int(s["params"]["n"])) if s else None
        if n:
            ns.add(n)
        total = p["sum_us"] / 1e6 * n_pub / n if p and n else None
        wall = c["elapsed_s"] * n_pub / n if c and n else None
        measured[variant] = total
        label = variant if variant in pub else f"{variant} (not published)"
        rows.append([label, fnum(total, 3), fnum(n_pub / total if total else None, 0)])
        client_rows.append([label, fnum(wall, 3), fnum(n_pub / wall if wall else None, 0)])
    unary_p50 = ((by_key(result, variant="unary") or {}).get("proxy") or {}).get("p50_us")
    for variant in ("bidi-stream", "rest-proto", "rest-json"):
        pr = ratio(pub[variant]["total_s"], pub["unary"]["total_s"])
        mr = ratio(measured.get(variant), measured.get("unary"))
        medr = None
        if not variant.startswith("bidi"):
            medr = ratio(((by_key(result, variant=variant) or {}).get("proxy") or {}).get("p50_us"), unary_p50)
        ratio_rows.append([f"{variant} ÷ unary", fratio(pr), fratio(mr), fratio(medr), verdict(pr, mr)])
    if measured.get("bidi-stream-pipelined"):
        ratio_rows.append(["bidi-stream-pipelined ÷ unary", "–",
                           fratio(ratio(measured["bidi-stream-pipelined"], measured.get("unary"))), "–", "not published"])
    scaled = "" if ns == {n_pub} else f" (measured {', '.join(f'{n:,}' for n in sorted(ns))}, scaled to {n_pub:,})"
    text = [
        "### Published\n", published_tables(sc),
        f"\n### Measured at the proxy (same shape): Σ of per-call time for {n_pub:,} calls or messages{scaled}\n",
        table(["variant", "total s", "calls/s"], rows),
        "\n*Client wall time* (loadgen):\n", table(["variant", "total s", "calls/s"], client_rows),
        "\n### Ratios (total time ÷ unary's)\n",
        table(["", "published", "measured (proxy Σ)", "measured (proxy medians)", "verdict (proxy Σ)"], ratio_rows),
        "\nThe sum carries every outlier; the ratio of medians (per call) is the robust one on a busy machine.",
        "\n### Client (loadgen) and proxy side by side\n", client_vs_proxy(result),
        "\n### What only the proxy saw\n", proxy_only(result),
        "\n### Reading\n", explain_e5(result, ratio_rows),
    ]
    return "\n".join(text)


def where_time(label_a: str, a: dict, label_b: str, b: dict) -> str:
    """Envoy's split of two steps' calls: median, upstream and in-Envoy averages."""
    return (f"{label_a}: median {ms(a['p50_us'])} ms at the proxy (upstream {fnum(a['upstream_avg_ms'])} ms, "
            f"in Envoy {fnum(a['in_envoy_avg_ms'])} ms on average); {label_b}: median {ms(b['p50_us'])} ms "
            f"(upstream {fnum(b['upstream_avg_ms'])} ms, in Envoy {fnum(b['in_envoy_avg_ms'])} ms)")


SMALL_CALLS_NOTE = (
    "With payloads of a few dozen bytes over loopback, a call's cost is almost all per-call overhead. "
    "A keep-alive HTTP/1.1 exchange is cheap; a gRPC call opens an HTTP/2 stream, encodes HPACK headers, "
    "sends a 5-byte-framed message, and ends with trailers — on both of Envoy's legs, since the upstream to "
    "grpc-go is HTTP/2 too. The published clients and servers (JVM, C#, Python) had their own, larger "
    "per-call costs on the REST side (JSON frameworks, blocking HTTP clients), which is what made gRPC win there.")


def explain_e5(result: dict, ratio_rows: list) -> str:
    out = [f"- {name}: published {pr}, measured {mr}" + (f" ({medr} by medians)" if medr != "–" else "") + f" ({v})."
           for name, pr, mr, medr, v in ratio_rows]
    un = (by_key(result, variant="unary") or {}).get("proxy") or {}
    rp = (by_key(result, variant="rest-proto") or {}).get("proxy") or {}
    rj = (by_key(result, variant="rest-json") or {}).get("proxy") or {}
    bs = (by_key(result, variant="bidi-stream") or {}).get("proxy") or {}
    if un and rj:
        out.append("- " + where_time("unary gRPC", un, "REST JSON", rj) + ".")
        if rj["p50_us"] < un["p50_us"]:
            out.append("- " + SMALL_CALLS_NOTE)
    if rp and rj:
        out.append(f"- REST protobuf vs JSON: bodies of {fnum(rp['resp_body_b'], 1)} B and {fnum(rj['resp_body_b'], 1)} B; "
                   f"the request is a GET either way ({fnum(rp['req_header_b'], 0)} B of headers). At this size the "
                   f"encoding is a rounding error next to the per-request cost, so the two stay close.")
    if bs:
        out.append(f"- The stream pays the per-call cost once: the proxy saw one call carrying "
                   f"{int(bs['req_messages']):,} messages each way ({fnum(bs['req_body_b'] / max(1, bs['req_messages']), 1)} B "
                   f"per message with its frame), and {fnum(bs['wire_in_b'] / max(1, bs['req_messages']), 1)} B per message on the wire.")
    return "\n".join(out)


RENDER = {"e1": render_e1, "e2": render_e2, "e3": render_e3, "e4": render_e4, "e5": render_e5}


# ---------------------------------------------------------------- cross-check


GHZ = ROOT / "bin" / "ghz"
PROTOSET = ROOT / "build" / "proto" / "wirelens.pb"


def which(name: str) -> str | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def run_ghz(settings: dict[str, str], run_id: str, calls: int, rate: float) -> dict:
    """ghz: N calls of Hello.SayHello at a rate, with the run id as metadata."""
    argv = [str(GHZ), "--insecure", "--protoset", str(PROTOSET), "--call", "wirelens.v1.Hello.SayHello",
            "-d", json.dumps({"name": "test"}), "-n", str(calls), "--rps", str(int(rate)), "-c", "10",
            "--connections", "1", "--metadata", json.dumps({"x-wirelens-run": run_id}), "-O", "json",
            "--timeout", "20s", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=calls / rate + 120)
    if out.returncode != 0:
        raise ExperimentError(f"ghz failed (exit {out.returncode}): {out.stderr.strip()[:500]}")
    d = json.loads(out.stdout)
    dist = {int(x["percentage"]): x["latency"] / 1e6 for x in d.get("latencyDistribution") or []}
    ok = int((d.get("statusCodeDistribution") or {}).get("OK", 0))
    return {"tool": f"ghz {ghz_version()}", "protocol": "grpc", "run_id": run_id, "calls": int(d["count"]), "ok": ok,
            "p50_ms": dist.get(50), "p99_ms": dist.get(99), "rate": d.get("rps"), "argv": argv}


def ghz_version() -> str:
    """The pinned module version ghz was built from (go version -m), or ''."""
    try:
        out = subprocess.run(["go", "version", "-m", str(GHZ)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"\bmod\s+github.com/bojand/ghz\s+(\S+)", out)
    return m[1] if m else ""


def run_h2load(settings: dict[str, str], run_id: str, calls: int, rate: float, workdir: Path) -> dict:
    """h2load over HTTP/1.1: N POST /v1/hello at a rate (4 clients), with the run id header."""
    h2load = which("h2load")
    body = workdir / "hello.json"
    body.write_text('{"name":"test"}')
    log_file = workdir / f"{run_id}.h2load.tsv"
    clients = 4
    argv = [h2load, "--h1", "-n", str(calls), "-c", str(clients), "--rps", str(max(1, int(rate / clients))),
            "-d", str(body), "-H", "content-type: application/json", "-H", f"x-wirelens-run: {run_id}",
            "--log-file", str(log_file), f"http://127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}/v1/hello"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=calls / rate + 120)
    if out.returncode != 0:
        raise ExperimentError(f"h2load failed (exit {out.returncode}): {out.stderr.strip()[:500]}")
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", out.stdout)
    if not m:
        raise ExperimentError(f"h2load output not understood:\n{out.stdout[-800:]}")
    lat = [int(line.split("\t")[2]) / 1000 for line in log_file.read_text().splitlines() if line.count("\t") >= 2]
    r = re.search(r"finished in [^,]+, ([\d.]+) req/s", out.stdout)
    version = subprocess.run([h2load, "--version"], capture_output=True, text=True).stdout.split()
    return {"tool": " ".join(version[:2]) or "h2load", "protocol": "rest", "run_id": run_id, "calls": int(m[3]), "ok": int(m[4]),
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "rate": float(r[1]) if r else None,
            "argv": argv}


def run_loadgen_open(settings: dict[str, str], protocol: str, run_id: str, calls: int, rate: float) -> dict:
    argv = [str(LOADGEN), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}", "-protocol", protocol,
            "-operation", "hello.SayHello", "-name", "test", "-model", "open", "-rate", f"{rate:g}/s",
            "-n", str(calls), "-run-id", run_id, "-scenario", "crosscheck",
            "-clickhouse-url", clickhouse_url(settings), "-progress", "off"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=calls / rate + 120)
    if out.returncode != 0:
        raise ExperimentError(f"loadgen failed (exit {out.returncode}): {out.stderr.strip()[:500]}")
    d = json.loads(out.stdout.strip().splitlines()[-1])
    return {"tool": "loadgen (open model)", "protocol": protocol, "run_id": run_id, "calls": d["calls"], "ok": d["ok"],
            "p50_ms": d["p50_ms"], "p99_ms": d["p99_ms"], "send_p50_ms": d.get("service_p50_ms"),
            "rate": d["rate_per_s"], "argv": argv}


def crosscheck(settings: dict[str, str], calls: int = 1000, rate: float = 200, log: Callable[[str], None] = print,
               workdir: Path | None = None) -> tuple[list[dict], list[str]]:
    """The same operation at the same rate from loadgen and from independent tools (ghz for gRPC, h2load
    for REST), each with its own run id; the proxy must hold exactly as many rows as each tool completed
    calls. Returns (rows, notes about tools that are missing)."""
    workdir = workdir or (ROOT / "build" / "experiments")
    workdir.mkdir(parents=True, exist_ok=True)
    session = f"xc{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:4]}"
    rows, notes = [], []
    plan: list[tuple[str, Callable[[str], dict]]] = [
        ("loadgen-grpc", lambda rid: run_loadgen_open(settings, "grpc", rid, calls, rate))]
    if GHZ.exists() and PROTOSET.exists():
        plan.append(("ghz", lambda rid: run_ghz(settings, rid, calls, rate)))
    else:
        notes.append(f"ghz not run: {GHZ} or {PROTOSET} is missing (`make ghz`, `make proto`)")
    plan.append(("loadgen-rest", lambda rid: run_loadgen_open(settings, "rest", rid, calls, rate)))
    if which("h2load"):
        plan.append(("h2load", lambda rid: run_h2load(settings, rid, calls, rate, workdir)))
    else:
        notes.append("h2load not run: not on PATH (Debian: apt-get install nghttp2-client)")
    for name, fn in plan:
        run_id = f"{session}-{name}"
        log(f"[crosscheck] {name}: {calls} calls of hello.SayHello at {rate:g}/s (run {run_id})")
        rows.append(fn(run_id))
    seen = wait_for_rows(settings, {r["run_id"]: r["calls"] for r in rows})
    proxy = per_run(settings, [r["run_id"] for r in rows])
    for r in rows:
        r["rows"] = seen.get(r["run_id"], 0)
        r["match"] = r["rows"] == r["calls"]
        p = proxy.get(r["run_id"], {})
        r["proxy_p50_ms"] = p.get("p50_us", 0) / 1000 if p else None
        r["proxy_p99_ms"] = p.get("p99_us", 0) / 1000 if p else None
        log(f"    {r['tool']:<22} {r['protocol']:<5} calls {r['calls']:>6}  rows {r['rows']:>6}  "
            f"{'match' if r['match'] else 'MISMATCH'}  client p50 {fnum(r['p50_ms'])} ms  proxy p50 {fnum(r['proxy_p50_ms'])} ms")
    return rows, notes


def render_crosscheck(rows: list[dict], notes: list[str], calls: int, rate: float) -> str:
    out = [f"The same operation (hello.SayHello, name \"test\") at the same rate ({rate:g} calls/s, {calls:,} calls) "
           "through Envoy from loadgen and from independent tools, each with its own run id (header or metadata "
           "`x-wirelens-run`). *rows* are the proxy's rows in `wirelens.requests` for that run id: they must equal "
           "the calls the tool completed. loadgen's open model counts latency from each call's intended send time; "
           "ghz and h2load from the actual send.", "",
           table(["tool", "protocol", "calls (tool)", "rows (proxy)", "exact", "tool p50 ms", "tool p99 ms",
                  "tool p50 ms from the actual send", "proxy p50 ms", "proxy p99 ms", "achieved calls/s"],
                 [[r["tool"], r["protocol"], r["calls"], r["rows"], "yes" if r["match"] else "NO",
                   fnum(r["p50_ms"]), fnum(r["p99_ms"]),
                   fnum(r.get("send_p50_ms") if r["tool"].startswith("loadgen") else r["p50_ms"]),
                   fnum(r["proxy_p50_ms"]), fnum(r["proxy_p99_ms"]), fnum(float(r["rate"]) if r["rate"] else None, 1)]
                  for r in rows]),
           "", "loadgen's tool latency counts from the intended send time, so a late timer wake-up on a busy "
           "machine is part of it (as it would be for a real client); the column *from the actual send* "
           "(loadgen's `service_p50_ms`) is the one comparable with ghz and h2load."]
    if notes:
        out += ["", "Not run: " + "; ".join(notes) + "."]
    out += ["", "wrk is not used: it has no rate control (it sends as fast as it can) and stops on a deadline, "
            "counting only the responses that arrived, so neither the rate nor the count can be matched."]
    return "\n".join(out)


# ---------------------------------------------------------------- report


def machine() -> dict:
    info = {"nproc": os.cpu_count(), "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "kernel": platform.release(), "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        info["loadavg"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
        info["nproc"] = int(nproc)
    except (OSError, subprocess.CalledProcessError, ValueError):
        pass
    return info


def load_line(elapsed_s: float, load_before: float | None, load_after: float | None, ncpu: int,
              session_start_load: float | None) -> str:
    """How busy the machine was around one experiment, and what that means for its numbers.

    The load when the session started is other work on the machine. Once experiments run, the load
    average (a one-minute mean that decays slowly) is mostly their own clients, Envoy, services and
    telemetry sharing the cores, which queues every protocol's calls alike. Only other work makes
    protocol differences untrustworthy; both deserve a word."""
    text = f"Ran in {elapsed_s:.0f} s; load average {fnum(load_before)} before, {fnum(load_after)} after, on {ncpu} cores."
    if (session_start_load or 0) > ncpu:
        return text + (f" **Other work kept the machine overloaded (load {session_start_load:.1f} on {ncpu} cores "
                       "when the session started): differences under ~2× are within the noise here; prefer the "
                       "ratios of medians.**")
    if max(load_before or 0, load_after or 0) > ncpu:
        return text + (" The machine was quiet when the session started; this load is the experiments' own "
                       "clients, Envoy, services and telemetry sharing the cores, so latencies include CPU "
                       "queueing for every protocol alike.")
    return text


def render_report(results: list[dict], size: str, session: str, mach: dict, settings: dict[str, str],
                  interrupted: bool) -> str:
    lines = [
        f"# wirelens: the five reference experiments ({size})",
        "",
        f"Generated by `experiments/experiments.py{' --full' if size == 'full' else ''}` "
        f"(`make experiments{' FULL=1' if size == 'full' else ''}`), session `{session}`."
        + (" **Interrupted: partial report.**" if interrupted else ""),
        "",
        "## Machine",
        "",
        table(["", ""], [
            ["date", mach.get("date", "?")],
            ["CPU", mach.get("cpu", "?")],
            ["cores (nproc)", str(mach.get("nproc", "?"))],
            ["memory", f"{mach.get('memory_gib', '?')} GiB"],
            ["load average at start (1/5/15 min)", mach.get("loadavg", "?")],
            ["kernel", mach.get("kernel", "?")],
            ["Envoy worker threads", settings.get("WIRELENS_ENVOY_CONCURRENCY", "?")],
        ]),
        "",
        "Everything — clients, Envoy, the services, the Collector, ClickHouse and Jaeger — runs on this one "
        "machine over loopback, so the absolute numbers are this machine's, and noisy when it is shared. "
        "Compare the *ratios* between protocols with the published ones, not the milliseconds.",
        "",
        "**How to read it.** *Measured* tables come from ClickHouse (`wirelens.requests`, one row per call written "
        "by the wirelens filter in Envoy; `experiments/scenarios/per_run.sql` over each step's run id): the proxy's view. "
        "Latency there is the filter's `duration_us` — from the request headers reaching Envoy to the end of the "
        "response leaving it. The client's view (bin/loadgen, also recorded in `wirelens.runs`) is shown next to "
        "it: the gap is the client's own stack and the loopback hop, shown rather than hidden. Warm-up calls "
        "carry `<run id>-warmup` and are left out of both.",
        "",
    ]
    if size == "quick":
        lines += ["The **quick** size runs fewer calls than the published experiments (each experiment well under "
                  "a minute); totals are scaled to the published counts where the table is a total. "
                  "`make experiments FULL=1` runs the published counts and durations.", ""]
    session_start_load = float(mach["loadavg"].split()[0]) if mach.get("loadavg") else None
    for res in results:
        sc = res["scenario"]
        lines += [f"## {res['id'].upper()} — {sc['title']}", "",
                  f"*{sc['source']}.* {sc['workload']}", "",
                  "Published findings: " + " ".join(sc["published"]["findings"]), ""]
        if res["failed"]:
            lines += ["**Problems:** " + "; ".join(res["failed"]), ""]
        lines += [load_line(res.get("elapsed_s", 0), res.get("load_before"), res.get("load_after"),
                            mach.get("nproc") or 1, session_start_load), ""]
        try:
            lines.append(RENDER[res["id"]](res))
        except Exception as exc:  # a rendering bug must not lose the run
            lines.append(f"(rendering failed: {exc!r}; the numbers are in the JSON file next to this report)")
        lines += ["", "**Setup differences.** " + " ".join(sc["differences"]), ""]
    lines += ["## Runs", "",
              "Every step, its run id, and the exact counts: calls the client completed and rows the proxy "
              "recorded (measured and warm-up run ids).", ""]
    rows = []
    for res in results:
        for s in res["steps"]:
            c = s["client"]
            warm = c.get("warmup_calls", 0) if c else 0
            seen = res.get("seen_rows", {})
            rows.append([res["id"], s["name"], f"`{s['run_id']}`", c.get("calls", "–") if c else "–",
                         seen.get(s["run_id"], 0), warm, seen.get(s["run_id"] + "-warmup", 0) if warm else 0,
                         "yes" if c and seen.get(s["run_id"], 0) == c.get("calls") and
                         (not warm or seen.get(s["run_id"] + "-warmup", 0) == warm) else "NO"])
    lines.append(table(["experiment", "step", "run id", "client calls", "proxy rows", "warm-up calls",
                        "warm-up rows", "exact"], rows))
    lines += ["", "Query any step again, e.g.:", "",
              "    bin/wirelens query latency_bytes_by_operation --run <run id>", ""]
    return "\n".join(lines)


def default_out(size: str) -> Path:
    return ROOT / ("docs/experiments.md" if size == "full" else "build/experiments/quick.md")


CROSSCHECK = {"quick": (600, 200.0), "full": (3000, 200.0)}  # calls, calls per second


def run(settings: dict[str, str], size: str = "quick", only: list[str] | None = None, out: Path | None = None,
        log: Callable[[str], None] = print, start_stack: bool = True,
        with_crosscheck: bool = True) -> tuple[Path, list[dict], bool]:
    """Run the experiments; return (report path, results, every step ran and matched)."""
    if size not in SIZES:
        raise ExperimentError(f"size must be one of {SIZES}")
    if not LOADGEN.exists():
        raise ExperimentError(f"{LOADGEN} is missing: run `make services`")
    exps = only or list(EXPERIMENTS)
    for exp in exps:
        if exp not in EXPERIMENTS:
            raise ExperimentError(f"unknown experiment {exp!r} (known: {', '.join(EXPERIMENTS)})")
    if start_stack:
        ensure_stack(settings, log)
    session = f"x{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:4]}-{size}"
    mach = machine()
    log(f"experiments {', '.join(e.upper() for e in exps)} ({size}) through Envoy 127.0.0.1:"
        f"{settings['WIRELENS_ENVOY_PORT']}, session {session}")
    log(f"machine: {mach.get('cpu', '?')}, {mach.get('nproc')} cores, {mach.get('memory_gib')} GiB, load {mach.get('loadavg')}")
    results: list[dict] = []
    cross: dict | None = None
    interrupted = False
    t0 = time.monotonic()
    try:
        for exp in exps:
            res = run_experiment(settings, exp, size, session, log)
            results.append(res)
            log(f"    {exp} done in {res['elapsed_s']:.0f}s")
            if res["interrupted"]:
                interrupted = True
                break
        if with_crosscheck and not interrupted:
            log("\n== cross-check with independent tools")
            calls, rate = CROSSCHECK[size]
            rows, notes = crosscheck(settings, calls, rate, log)
            cross = {"rows": rows, "notes": notes, "calls": calls, "rate": rate}
    except KeyboardInterrupt:
        interrupted = True
    out = out or default_out(size)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = render_report(results, size, session, mach, settings, interrupted)
    if cross:
        report += "\n## Cross-check with independent tools\n\n" + render_crosscheck(
            cross["rows"], cross["notes"], cross["calls"], cross["rate"]) + "\n"
    out.write_text(report)
    out.with_suffix(".json").write_text(json.dumps(
        {"session": session, "size": size, "machine": mach, "interrupted": interrupted,
         "envoy_concurrency": settings.get("WIRELENS_ENVOY_CONCURRENCY", "?"),
         "experiments": [{k: v for k, v in r.items() if k != "scenario"} for r in results],
         "crosscheck": cross}, indent=1, default=str))
    ok = not interrupted and all(not r["failed"] for r in results) and len(results) == len(exps) and \
        (cross is None or all(r["match"] for r in cross["rows"]))
    log(f"\nreport: {out} (numbers: {out.with_suffix('.json')}), {time.monotonic() - t0:.0f}s in all"
        + ("" if ok else " — WITH PROBLEMS, see the report's Problems lines" if not interrupted else " — interrupted"))
    if interrupted:
        raise KeyboardInterrupt
    return out, results, ok


def rerender(data_path: Path, out: Path | None = None) -> Path:
    """Write the report again from the JSON file a run left next to it (e.g. after a change of wording)."""
    data = json.loads(data_path.read_text())
    results = []
    for r in data["experiments"]:
        results.append({**r, "scenario": load_scenario(r["id"])})
    settings = {"WIRELENS_ENVOY_CONCURRENCY": data.get("envoy_concurrency", "?")}
    report = render_report(results, data["size"], data["session"], data["machine"], settings, data["interrupted"])
    cross = data.get("crosscheck")
    if cross:
        report += "\n## Cross-check with independent tools\n\n" + render_crosscheck(
            cross["rows"], cross["notes"], cross["calls"], cross["rate"]) + "\n"
    out = out or data_path.with_suffix(".md")
    out.write_text(report)
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
                ensure_stack(settings, print)
            rows, notes = crosscheck(settings, args.calls, args.rate)
            text = render_crosscheck(rows, notes, args.calls, args.rate)
            out = args.out or ROOT / "build" / "experiments" / "crosscheck.md"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("# wirelens: cross-check with independent tools\n\n" + text + "\n")
            print(f"\n{text}\n\nwritten to {out}")
            return 0 if all(r["match"] for r in rows) else 1
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
