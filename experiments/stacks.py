"""Protocol or framework? The reference experiments per stack, measured at the proxy (issue 20).

    stacks.py --stacks all              E1 and E2 on every stack that serves them -> build/experiments/stacks-quick.md
    stacks.py --stacks python --full    the published sizes                       -> build/experiments/stacks-full.md
    stacks.py --rerender build/experiments/stacks-full.json   no traffic: render a session's results again
    stacks.py --stacks all --full --docs  the full run into docs/experiments.md (+ docs/experiments-stacks.json)

Each experiment's REST and gRPC steps (experiments/scenarios/e1.json, e2.json) run once per
stack through the same Envoy and filter, `loadgen -stack <stack>` choosing the
pair of services (x-wirelens-stack; envoy/envoy.yaml.tmpl). The Go pair is
always measured too: it is the reference column. Then, from ClickHouse:
queries/protocol_vs_stack.sql (per operation and stack, gRPC / REST median at
the proxy with a bootstrap interval, upstream and Envoy time in µs, body bytes) and
the CPU per call of each stack's service processes and of Envoy (procmetrics'
process.cpu.time over each step's window). The report puts the published
ratio, the seed's stack and the Go pair side by side and says, per
operation, whether the published direction follows the protocol (the same
on every stack) or the framework (one stack only).

Stacks: go, python (services/python: E1, E2), jvm (services/jvm: E2, E3 and
E4 on Spring WebFlux and grpc-java; E4's REST also on Spring Web MVC, recorded
as stack jvm-mvc). E3 runs REST against unary gRPC (its client stream has no
REST side); E4 runs its ~1 KB product and its 500-product list (the published
"gRPC wins" case), each over its levels of users. CPU per call per stack comes
from separate CPU steps (E2's hello, sequential, 6 s quick / 20 s full per
stack and protocol): the experiments' own quick steps are shorter than
procmetrics' 1 s samples. The stack is started with the needed pairs if it is
not up; it keeps running.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import uuid
from pathlib import Path

from experiments import scenario_runs as runs  # the experiments' steps, one loadgen run each
from deploy.local import stack
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from wirelens_helpers.settings import clickhouse_url

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# What each stack serves, per experiment (the seed's stack first in SEED).
SERVES = {
    "go": {"e1", "e2", "e3", "e4", "e5"},
    "python": {"e1", "e2"},  # services/python: factorial, hello, hello-big
    "jvm": {"e2", "e3", "e4"},  # services/jvm: hello, hello-big, people, catalog
    "jvm-mvc": {"e4"},  # services/jvm's Spring Web MVC REST (its gRPC is the jvm stack's)
}
SEED = {"e1": "python", "e2": "jvm", "e3": "jvm", "e4": "jvm", "e5": "go"}
EXPERIMENTS = ("e1", "e2", "e3", "e4")
# E4 per stack: the small product and the large list (experiments/scenarios/e4.json payload keys).
E4_PAYLOADS = ("product", "list500")
# What was published per stack comparison: the scenarios' "per_stack" blocks (experiments/scenarios/e1-e4.json).
PUBLISHED_PER_STACK = {exp: runs.load_scenario(exp)["published"]["per_stack"] for exp in EXPERIMENTS}
# Published gRPC / REST ratio and what it stands for, per operation.
PUBLISHED = {op: (published["grpc_over_rest"], published["note"])
             for per_stack in PUBLISHED_PER_STACK.values() for op, published in per_stack["operations"].items()}
SERVICES = {"go": ("rest-service", "grpc-service"), "python": ("python-rest-service", "python-grpc-service"),
            "jvm": ("jvm-rest-service", "jvm-grpc-service"), "jvm-mvc": ("jvm-mvc-rest-service", "jvm-grpc-service")}
# The CPU steps: E2's hello, sequential, for a fixed time per stack and protocol.
CPU_SECONDS = {"quick": 6, "full": 20}


def parse_stacks(value: str) -> list[str]:
    names = ["go", "python", "jvm"] if value == "all" else [s.strip() for s in value.split(",") if s.strip()]
    unknown = [n for n in names if n not in SERVES or n == "jvm-mvc"]
    if unknown:
        raise SystemExit(f"--stacks: unknown {', '.join(unknown)} (go, python, jvm, all)")
    return ["go"] + [n for n in names if n != "go"]  # the Go pair is the reference column


def step_stacks(stacks: list[str]) -> list[str]:
    """The stacks steps run on: jvm brings jvm-mvc (Spring Web MVC's REST, for E4)."""
    return [x for st in stacks for x in ([st, "jvm-mvc"] if st == "jvm" else [st])]


def wanted_step(exp: str, st: str, step: dict) -> bool:
    p = step["params"]
    if p["protocol"] not in ("rest", "grpc") or p.get("target") == "transcode":
        return False
    if st == "jvm-mvc" and p["protocol"] != "rest":
        return False  # its gRPC is the jvm stack's grpc-java
    if exp == "e3" and p["operation"] != "people.Register":
        return False  # the client stream has no REST side to compare with
    if exp == "e4" and step["key"].get("payload") not in E4_PAYLOADS:
        return False
    return True


def steps_for(stacks: list[str], size: str) -> list[dict]:
    out = []
    for exp in EXPERIMENTS:
        for st in step_stacks(stacks):
            if exp not in SERVES[st]:
                continue
            for step in runs.expand_steps(runs.load_scenario(exp), size):
                if wanted_step(exp, st, step):
                    out.append({**step, "exp": exp, "stack": st})
    return out


def cpu_steps(stacks: list[str], size: str) -> list[dict]:
    """One CPU step per stack and protocol: E2's hello, sequential, for CPU_SECONDS (many 1 s samples)."""
    out = []
    for st in stacks:
        if "e2" not in SERVES[st]:
            continue
        for protocol in ("rest", "grpc"):
            params = {"protocol": protocol, "operation": "hello.SayHello", "model": "sequential", "name": "test",
                      "n": 1_000_000, "duration": f"{CPU_SECONDS[size]}s"}
            out.append({"params": params, "key": {"variant": "cpu", "protocol": protocol},
                        "name": f"cpu-{protocol}", "exp": "cpu", "stack": st})
    return out


def step_latency(settings: dict[str, str], run_id: str) -> dict:
    """One step at the proxy: calls, median and p90 of the filter's duration (ms)."""
    sql = """SELECT count() AS n, quantileExact(0.5)(duration_us) / 1000 AS p50_ms,
                    quantileExact(0.9)(duration_us) / 1000 AS p90_ms
             FROM wirelens.requests FINAL WHERE run_id = {run:String}"""
    got = runs.ch_rows(settings, sql, {"run": run_id})
    return got[0] if got else {}


def cpu_per_call(settings: dict[str, str], run_id: str, services: tuple[str, ...]) -> dict[str, float | None]:
    """CPU ms per call of the stack's services and of Envoy over one step's window (first..last call)."""
    sql = """
        WITH w AS (SELECT min(timestamp) AS t0, max(timestamp) AS t1, count() AS calls
                   FROM wirelens.requests FINAL WHERE run_id = {run:String})
        SELECT ServiceName AS service,
               sum(rate) * any(window_s) * 1000 / any(calls) AS cpu_ms_per_call
        FROM (
            SELECT ServiceName, cityHash64(ResourceAttributes, Attributes) AS series,
                   (argMax(Value, TimeUnix) - argMin(Value, TimeUnix)) / (max(TimeUnix) - min(TimeUnix)) AS rate,
                   any(dateDiff('microsecond', w.t0, w.t1)) / 1e6 AS window_s, any(w.calls) AS calls
            FROM otel.otel_metrics_sum CROSS JOIN w
            WHERE MetricName = 'process.cpu.time' AND AggregationTemporality = 2
              AND ServiceName IN {services:Array(String)}
              AND TimeUnix >= w.t0 AND TimeUnix <= w.t1
            GROUP BY ServiceName, series
            HAVING max(TimeUnix) > min(TimeUnix))
        GROUP BY ServiceName"""
    rows = runs.ch_rows(settings, sql, {"run": run_id, "services": runs.ch_array([*services, "envoy"])})
    got = {r["service"]: float(r["cpu_ms_per_call"]) for r in rows}
    return {"service": sum(got[s] for s in services if s in got) if any(s in got for s in services) else None,
            "envoy": got.get("envoy")}


def verdict(ratios: dict[str, dict], published: float) -> str:
    """Protocol: every stack's interval on the published side of 1; framework: the stacks disagree."""
    sides = {}
    for st, r in ratios.items():
        lo, hi = r.get("median_ci_low"), r.get("median_ci_high")
        if lo in (None, "\\N") or hi in (None, "\\N"):
            continue
        sides[st] = "grpc" if float(hi) < 1 else "rest" if float(lo) > 1 else "tie"
    want = "grpc" if published < 1 else "rest"
    if not sides:
        return "no interval"
    if all(s == want for s in sides.values()):
        return f"protocol: {want} faster on every stack ({', '.join(sides)}), as published"
    same = [st for st, s in sides.items() if s == want]
    other = {st: s for st, s in sides.items() if s != want}
    if same:
        return (f"framework: the published direction ({want} faster) holds on {', '.join(same)} only; "
                + ", ".join(f"{st}: {'tie' if s == 'tie' else s + ' faster'}" for st, s in other.items()))
    return "neither: no stack shows the published direction (" + \
        ", ".join(f"{st}: {'tie' if s == 'tie' else s + ' faster'}" for st, s in sides.items()) + ")"


def fmt(x, digits: int = 2) -> str:
    if x in (None, "\\N", ""):
        return "—"
    return f"{float(x):.{digits}f}"


def docs_section(results: dict) -> str:
    """The report as it stands inside docs/experiments.md's "Protocol versus stack" section (no title of its own,
    its headings one level down; tests/unit/test_experiments_docs.py holds the two together)."""
    return render(results, results["stacks"], results["size"], in_docs=True)


DOCS = ROOT / "docs" / "experiments.md"
DOCS_SECTION = "\n## Protocol versus stack"  # its heading there; experiments.py keeps it when it rewrites the report
DOCS_RESULTS = ROOT / "docs" / "experiments-stacks.json"


def update_docs(results: dict) -> None:
    """Put a full run into docs/experiments.md (its generated part: from "Stacks measured" to "### Reading")
    and its results into docs/experiments-stacks.json; the section's introduction and Reading stay as written."""
    if results["size"] != "full":
        raise SystemExit("--docs: only a full run (--full) goes into docs/experiments.md")
    text = DOCS.read_text()
    start = text.index("Stacks measured:", text.index(DOCS_SECTION))
    end = text.index("\n### Reading", start)
    DOCS.write_text(text[:start] + docs_section(results).strip("\n") + "\n" + text[end:])
    DOCS_RESULTS.write_text(json.dumps(results, indent=1))
    print(f"wrote {DOCS} and {DOCS_RESULTS}: read the section's Reading against the new numbers")


def render(results: dict, stacks: list[str], size: str, in_docs: bool = False) -> str:
    heading = "###" if in_docs else "##"
    lines = [] if in_docs else [f"# Protocol versus stack ({size})", ""]
    split = ("upstream = the upstream exchange by Envoy's clock (first byte sent to the service to the last byte "
             "back: service + framework + loopback), Envoy = the call's time at Envoy minus upstream, medians in µs.")
    lines += [f"Stacks measured: {', '.join(stacks)}. Session `{results['session']}`, "
             f"{results['started']} – {results['ended']}. Ratios are gRPC ÷ REST of the median duration at the "
             "proxy (the wirelens filter in Envoy), 95 % bootstrap interval in brackets (queries/protocol_vs_stack.sql); "
             "below 1 gRPC is faster. " + split, "",
             "| operation | published gRPC÷REST | " + " | ".join(f"{s} gRPC÷REST" for s in stacks)
             + " | " + " | ".join(f"{s} upstream REST/gRPC µs" for s in stacks)
             + " | " + " | ".join(f"{s} Envoy REST/gRPC µs" for s in stacks)
             + " | resp body REST/gRPC B |",
             "|" + "---|" * (3 + 3 * len(stacks))]
    by = {(r["operation"], r["stack"]): r for r in results["rows"]}
    verdicts = []
    for op, (pub, note) in PUBLISHED.items():
        rs = {s: by.get((op, s)) for s in stacks}
        if not any(rs.values()):
            continue
        cells = [f"{fmt(r['median_ratio'])} [{fmt(r['median_ci_low'])}–{fmt(r['median_ci_high'])}]" if r else "—"
                 for r in rs.values()]
        ups = [f"{fmt(r['upstream_rest_us'], 0)} / {fmt(r['upstream_grpc_us'], 0)}" if r else "—" for r in rs.values()]
        prox = [f"{fmt(r['proxy_rest_us'], 0)} / {fmt(r['proxy_grpc_us'], 0)}" if r else "—" for r in rs.values()]
        any_r = next(r for r in rs.values() if r)
        body = f"{fmt(any_r['resp_body_rest_b'], 0)} / {fmt(any_r['resp_body_grpc_b'], 0)}"
        lines.append(f"| `{op}` | {pub:.2f} | " + " | ".join(cells) + " | " + " | ".join(ups) + " | "
                     + " | ".join(prox) + f" | {body} |")
        verdicts.append(f"- `{op}` ({note}): {verdict({s: r for s, r in rs.items() if r}, pub)}.")
    lines += ["", "Medians at the proxy, ms (REST / gRPC):", ""]
    for op in PUBLISHED:
        parts = [f"{s} {fmt(by[(op, s)]['median_rest_ms'])} / {fmt(by[(op, s)]['median_grpc_ms'])}"
                 for s in stacks if (op, s) in by]
        if parts:
            lines.append(f"- `{op}`: " + "; ".join(parts))
    lines += ["", f"{heading} What follows the protocol, what follows the framework", ""] + verdicts
    e4 = [s for s in results["steps"] if s["exp"] == "e4" and s.get("latency")]
    if e4:
        lines += ["", f"{heading} E4: Spring Web MVC, Spring WebFlux, grpc-java (and the Go pair)", "",
                  "Each level of users per payload, at the proxy: median and p90 (ms), calls per second of the "
                  "client. " + PUBLISHED_PER_STACK["e4"]["levels"], "",
                  "| payload | users | stack | protocol | calls | p50 ms | p90 ms | calls/s |", "|---|---|---|---|---|---|---|---|"]
        for s in sorted(e4, key=lambda s: (s["payload"], s["users"] or 0, s["stack"], s["protocol"])):
            rps = (s["client"] or {}).get("rate_per_s")
            lines.append(f"| {s['payload']} | {s['users']} | {s['stack']} | {s['protocol']} | {s['latency'].get('n', '—')} | "
                         f"{fmt(s['latency'].get('p50_ms'))} | {fmt(s['latency'].get('p90_ms'))} | {fmt(rps, 0)} |")
    lines += ["", f"{heading} CPU per call per stack", "",
              "From procmetrics' process.cpu.time of the stack's service processes (REST and gRPC servers) and of "
              "Envoy, over each step's window (first to last call), divided by its calls. "
              + PUBLISHED_PER_STACK["e2"]["cpu"] + " — a share of the machine, not per call; the ratio gRPC ÷ REST is what compares.", "",
              "| experiment | step | stack | operation | protocol | calls | service CPU ms/call | Envoy CPU ms/call |",
              "|---|---|---|---|---|---|---|---|"]
    for s in [s for s in results["steps"] if s["exp"] == "cpu"] + [s for s in results["steps"] if s["exp"] != "cpu"]:
        lines.append(f"| {s['exp']} | {s['name']} | {s['stack']} | `{s['operation']}` | {s['protocol']} | {s['calls']} | "
                     f"{fmt(s['cpu']['service'], 3)} | {fmt(s['cpu']['envoy'], 3)} |")
    lines += ["", "The `cpu` rows are the CPU steps (E2's hello, sequential, for a fixed time: many 1 s samples); "
              "a dash in the others: fewer than two process samples inside that step's window (shorter than ~2 s)."]
    cpu = {(s["stack"], s["protocol"]): s["cpu"]["service"] for s in results["steps"] if s["exp"] == "cpu"}
    pairs = [(st, cpu[(st, "grpc")] / cpu[(st, "rest")]) for st in stacks
             if cpu.get((st, "rest")) and cpu.get((st, "grpc"))]
    if pairs:
        lines += ["", "Service CPU per call, gRPC ÷ REST (E2's hello): "
                  + "; ".join(f"{st} {r:.2f}" for st, r in pairs)
                  + ". " + PUBLISHED_PER_STACK["e2"]["cpu_ratio"]]
    return "\n".join(lines) + "\n"


def run(settings: dict[str, str], stacks: list[str], size: str, out: Path, log=print) -> int:
    wanted = ",".join(sorted(set(stacks) | {"go"}))
    if any(name not in settings["WIRELENS_STACKS"].split(",") for name in stacks):
        raise SystemExit(f"the stack settings run {settings['WIRELENS_STACKS']}: set WIRELENS_STACKS={wanted}")
    runs.ensure_stack(settings, log)
    session = f"stacks-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    steps, expected, failed = [], {}, 0
    for step in steps_for(stacks, size) + cpu_steps(stacks, size):
        run_id = f"{session}-{step['exp']}-{step['stack']}-{step['name']}"
        argv = runs.loadgen_argv(settings, step, run_id, step["exp"], runs.step_timeout(step["params"]))
        argv += ["-stack", step["stack"]]
        log(f"  {step['exp']} {step['stack']:<7} {step['name']:<18} {runs.describe_step(step)}")
        code, summary, _ = runs.run_step(argv, runs.step_timeout(step["params"]) + 60)
        if code != 0 or not summary:
            log(f"    loadgen exit {code}")
            failed += 1
        calls = (summary or {}).get("calls", 0)
        expected[run_id] = calls
        steps.append({"exp": step["exp"], "stack": step["stack"], "name": step["name"], "run_id": run_id,
                      "operation": step["params"]["operation"], "protocol": step["params"]["protocol"],
                      "calls": calls, "client": summary, "payload": step["key"].get("payload"),
                      "users": step["params"].get("users")})
    ended = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    seen = runs.wait_for_rows(settings, expected)
    if seen != expected:
        log(f"  rows per run differ from the calls: {seen} != {expected}")
        failed += 1
    time.sleep(2.5)  # procmetrics samples once a second: let the last window's closing sample land
    for s in steps:
        s["cpu"] = cpu_per_call(settings, s["run_id"], SERVICES[s["stack"]])
        if s["exp"] == "e4":
            s["latency"] = step_latency(settings, s["run_id"])
    text = clickhouse.run(clickhouse_url(settings), clickhouse.saved_query("protocol_vs_stack"),
                          {"since": f"{started:%Y-%m-%d %H:%M:%S.%f}"[:23],
                           "until": f"{ended:%Y-%m-%d %H:%M:%S.%f}"[:23],
                           "run_id": "", "resamples": "400"}, "JSONEachRow")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    results = {"session": session, "size": size, "stacks": stacks, "started": f"{started:%Y-%m-%d %H:%M:%S}Z",
               "ended": f"{ended:%Y-%m-%d %H:%M:%S}Z", "rows": rows, "steps": steps}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(results, stacks, size))
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    log(f"wrote {out} (+ .json)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stacks", default="all", help="go, python, jvm, comma-separated, or all (default)")
    parser.add_argument("--full", action="store_true", help="the published sizes (E1: 3 min per protocol and stack)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="some of the experiments, comma-separated (e1,e2); the CPU steps always run")
    parser.add_argument("--rerender", type=Path, metavar="JSON",
                        help="no traffic: render a session's stacks-*.json again (to --out, default beside it)")
    parser.add_argument("--docs", action="store_true",
                        help="also put the full run (or the --rerender one) into docs/experiments.md and "
                             "docs/experiments-stacks.json")
    args = parser.parse_args(argv)
    if args.rerender:
        results = json.loads(args.rerender.read_text())
        out = args.out or args.rerender.with_suffix(".md")
        out.write_text(render(results, results["stacks"], results["size"]))
        print(f"wrote {out}")
        if args.docs:
            update_docs(results)
        return 0
    if args.only:
        global EXPERIMENTS
        EXPERIMENTS = tuple(e for e in EXPERIMENTS if e in args.only.split(","))
    stacks = parse_stacks(args.stacks)
    size = "full" if args.full else "quick"
    environ = dict(os.environ)
    environ.setdefault("WIRELENS_STACKS", ",".join(stacks))
    settings = stack.load_settings(environ)
    out = args.out or ROOT / "build" / "experiments" / f"stacks-{size}.md"
    code = run(settings, stacks, size, out)
    if args.docs and code == 0:
        update_docs(json.loads(out.with_suffix(".json").read_text()))
    return code


if __name__ == "__main__":
    sys.exit(main())
