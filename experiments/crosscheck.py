"""The cross-check with independent tools: the same operation at the same rate from loadgen, ghz (gRPC) and
h2load (REST over HTTP/1.1), each with its own run id; the proxy must hold exactly as many rows as each tool
completed calls."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Callable

from wirelens_helpers.settings import clickhouse_url
from experiments.experiment_tables import fnum, table
from experiments.scenario_runs import LOADGEN, ROOT, ExperimentError, per_run, wait_for_rows


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


def run(settings: dict[str, str], calls: int = 1000, rate: float = 200, log: Callable[[str], None] = print,
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
        r["latency_order"] = latency_order(r, p)
        log(f"    {r['tool']:<22} {r['protocol']:<5} calls {r['calls']:>6}  rows {r['rows']:>6}  "
            f"{'match' if r['match'] else 'MISMATCH'}  client p50 {fnum(r['p50_ms'])} ms  proxy p50 {fnum(r['proxy_p50_ms'])} ms")
        log(f"    {'':<22} {order_text(r)}")
    return rows, notes


def client_p50_from_send(r: dict) -> float | None:
    """The tool's median from each call's actual send (loadgen's open model also reports one from the intended send)."""
    return r.get("send_p50_ms") if r["tool"].startswith("loadgen") else r["p50_ms"]


def latency_order(r: dict, proxy: dict) -> dict:
    """The order physics requires of one run's medians: the client's (send to last byte in) is at least the
    proxy's (request headers in to response end out), which is at least Envoy's upstream exchange (first byte
    sent to the service to the last byte back, µs by Envoy's clock: per_run.sql). Per call each contains the
    next, so the same rank of each does too: every median here is nearest-rank, the way ghz, h2load and loadgen
    compute theirs."""
    client = client_p50_from_send(r)
    upstream_us = proxy.get("upstream_p50_rank_us")
    got = {"client_p50_ms": client,
           "proxy_p50_ms": proxy["p50_rank_us"] / 1000 if proxy else None,
           "upstream_p50_ms": upstream_us / 1000 if upstream_us is not None else None}
    known = all(v is not None for v in got.values())
    got["holds"] = known and got["client_p50_ms"] >= got["proxy_p50_ms"] >= got["upstream_p50_ms"]
    return got


def order_text(r: dict) -> str:
    o = r["latency_order"]
    medians = (f"client {fnum(o['client_p50_ms'], 3)} ms ≥ proxy {fnum(o['proxy_p50_ms'], 3)} ms ≥ "
               f"upstream {fnum(o['upstream_p50_ms'], 3)} ms")
    return f"medians {medians}: {'holds' if o['holds'] else 'VIOLATED'}"


def order_violations(rows: list[dict]) -> list[str]:
    """One line per run whose medians are out of the order client ≥ proxy ≥ upstream, naming the run."""
    return [f"run {r['run_id']} ({r['tool']}, {r['protocol']}): {order_text(r)}"
            for r in rows if not r["latency_order"]["holds"]]


def render(rows: list[dict], notes: list[str], calls: int, rate: float) -> str:
    out = [f"The same operation (hello.SayHello, name \"test\") at the same rate ({rate:g} calls/s, {calls:,} calls) "
           "through Envoy from loadgen and from independent tools, each with its own run id (header or metadata "
           "`x-wirelens-run`). *rows* are the proxy's rows in `wirelens.requests` for that run id: they must equal "
           "the calls the tool completed. loadgen's open model counts latency from each call's intended send time; "
           "ghz and h2load from the actual send.", "",
           table(["tool", "protocol", "calls (tool)", "rows (proxy)", "exact", "tool p50 ms", "tool p99 ms",
                  "tool p50 ms from the actual send", "proxy p50 ms", "proxy p99 ms", "achieved calls/s"],
                 [[r["tool"], r["protocol"], r["calls"], r["rows"], "yes" if r["match"] else "NO",
                   fnum(r["p50_ms"]), fnum(r["p99_ms"]),
                   fnum(client_p50_from_send(r)),
                   fnum(r["proxy_p50_ms"]), fnum(r["proxy_p99_ms"]), fnum(float(r["rate"]) if r["rate"] else None, 1)]
                  for r in rows]),
           "", "loadgen's tool latency counts from the intended send time, so a late timer wake-up on a busy "
           "machine is part of it (as it would be for a real client); the column *from the actual send* "
           "(loadgen's `service_p50_ms`) is the one comparable with ghz and h2load."]
    ordered = [r for r in rows if "latency_order" in r]  # runs recorded before the order check lack it
    if ordered:
        out += ["", "Per run, the medians must stand in the order physics requires: the tool's (from the actual "
                "send, to the last byte in) ≥ the proxy's (request headers in, response end out) ≥ Envoy's upstream "
                "exchange (first byte sent to the service to the last byte back, Envoy's clock in µs). All three "
                "are nearest-rank medians over the same calls.", "",
                table(["tool", "protocol", "run id", "client p50 ms", "proxy p50 ms", "upstream p50 ms",
                       "client ≥ proxy ≥ upstream"],
                      [[r["tool"], r["protocol"], f"`{r['run_id']}`", fnum(o["client_p50_ms"], 3),
                        fnum(o["proxy_p50_ms"], 3), fnum(o["upstream_p50_ms"], 3), "yes" if o["holds"] else "NO"]
                       for r in ordered for o in [r["latency_order"]]])]
    if notes:
        out += ["", "Not run: " + "; ".join(notes) + "."]
    out += ["", "wrk is not used: it has no rate control (it sends as fast as it can) and stops on a deadline, "
            "counting only the responses that arrived, so neither the rate nor the count can be matched."]
    return "\n".join(out)


def passed(rows: list[dict]) -> bool:
    """Every tool's calls are the proxy's rows, and every run's medians stand in order."""
    return all(r["match"] for r in rows) and not order_violations(rows)
