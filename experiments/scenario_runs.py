"""Running the experiments: the scenarios' steps, one bin/loadgen run each, and what they left in ClickHouse.

A scenario (scenarios/e*.json) expands into steps of one size; each step is one
loadgen run through Envoy with its own run id (warm-up calls carry
<run id>-warmup). After the runs, wait until wirelens.requests holds exactly as
many rows per run id as loadgen completed calls, then collect every step's
proxy-side view (scenarios/per_run.sql) and client summary (wirelens.runs).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from wirelens_helpers.settings import clickhouse_url
from deploy.local import stack
from wirelens_helpers.wait import WaitTimeout, wait_for


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
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

    def rows() -> dict[str, int]:
        return {r["run_id"]: int(r["n"]) for r in ch_rows(settings, sql, {"runs": ch_array(list(expected))})}
    try:
        return wait_for("every run's rows", rows, lambda seen: all(seen.get(run, 0) == n for run, n in expected.items()),
                        timeout_s=timeout_s, interval_s=0.5)
    except WaitTimeout as exc:
        return exc.last_seen


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
