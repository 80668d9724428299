"""End to end: the quick size of all five reference experiments against the local stack.

experiments/experiments.py drives every step of experiments/scenarios/e1..e5.json with
bin/loadgen through Envoy, each with its own run id, waits for exact row
counts and writes one markdown report. This test checks that the report has
every experiment's published and measured tables, every step, and that the
call counts it prints are exact: the same as the client completed and as
ClickHouse holds for each run id (measured and warm-up run ids).
"""

from __future__ import annotations

import json
import re


from tests.e2e.conftest import stack

from experiments import experiments
from experiments import scenario_runs


# Steps per experiment in the quick size (experiments/scenarios/*.json): the report must list each.
QUICK_STEPS = {"e1": 2, "e2": 4, "e3": 10, "e4": 18, "e5": 5}
RUN_ROW = re.compile(r"^\| (e\d) \| ([^|]+) \| `([^`]+)` \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| (yes|NO) \|$")


def count_rows(settings, run_id: str) -> int:
    return int(stack.clickhouse_query(
        settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'").strip())


def test_scenarios_expand_to_the_published_shapes():
    for size in ("quick", "full"):
        for exp in scenario_runs.EXPERIMENTS:
            sc = scenario_runs.load_scenario(exp)
            steps = scenario_runs.expand_steps(sc, size)
            assert len({s["name"] for s in steps}) == len(steps), f"{exp} {size}: step names collide"
            assert sc["published"]["tables"] and sc["differences"], exp
    full = {exp: scenario_runs.expand_steps(scenario_runs.load_scenario(exp), "full") for exp in scenario_runs.EXPERIMENTS}
    assert {s["params"]["duration"] for s in full["e1"]} == {"3m"} and {s["params"]["users"] for s in full["e1"]} == {100}
    assert sorted(s["params"]["n"] for s in full["e3"] if s["key"]["variant"] == "rest") == [10, 100, 1000, 10000, 100000]
    assert sorted({s["params"]["users"] for s in full["e4"]}) == [1, 10, 20, 30] and len(full["e4"]) == 24
    assert {s["params"].get("n") for s in full["e5"] if s["key"]["variant"] in ("unary", "rest-json")} == {10000}
    assert {s["params"]["n"] for s in full["e2"]} == {1000}


def test_quick_experiments_report(local_stack, tmp_path):
    out = tmp_path / "quick.md"
    log: list[str] = []
    path, results, ok = experiments.run(local_stack, "quick", out=out, log=log.append, start_stack=False,
                                        with_crosscheck=False)
    report = path.read_text()
    assert ok, "\n".join(log[-40:])

    # Every experiment: its section, the published and the measured tables, the proxy-only table, the reading.
    for exp, title in (("E1", "Factorial under load"), ("E2", "Hello and HelloBig"), ("E3", "Register a person"),
                       ("E4", "Products by id and lists"), ("E5", "Echo")):
        section = report.split(f"## {exp} — ", 1)[1].split("\n## ", 1)[0]
        assert section.startswith(title), exp
        for heading in ("### Published", "### Measured at the proxy", "### What only the proxy saw", "### Reading",
                        "### Client (loadgen) and proxy side by side"):
            assert heading in section, f"{exp}: no {heading}"
        assert "rendering failed" not in section, section
    assert "## Machine" in report and "cores (nproc)" in report
    for published in ("| rest | 11,653 | 9 | 13 | 23 | 9.77 | 6 | 77 | 52.75 |", "| hello-big | 749 | 586 |",
                      "| 100,000 | 41,491 | 13,768 | 2,880 |", "| rest-json | 4.22 | 2,369 |"):
        assert published in report, published

    # The runs table: every step, exact counts, and the counts are ClickHouse's.
    runs = [RUN_ROW.match(line) for line in report.splitlines()]
    runs = [m for m in runs if m]
    per_exp = {exp: sum(1 for m in runs if m[1] == exp) for exp in QUICK_STEPS}
    assert per_exp == QUICK_STEPS, per_exp
    n = lambda s: int(s.replace(",", ""))  # noqa: E731
    for m in runs:
        exp, step, run_id, calls, rows, warm_calls, warm_rows, exact = m.groups()
        assert exact == "yes" and n(calls) == n(rows) > 0 and n(warm_calls) == n(warm_rows), m[0]
        assert count_rows(local_stack, run_id) == n(calls), run_id
        if n(warm_calls):
            assert count_rows(local_stack, run_id + "-warmup") == n(warm_calls), run_id

    # The sizes that make the comparison: E3's 50-call warm-ups, E5's 2000-message stream as one row.
    by_step = {(r["id"], s["name"]): s for r in results for s in r["steps"]}
    assert by_step[("e3", "rest-n1000")]["client"]["warmup_calls"] == 50
    bidi = by_step[("e5", "bidi-stream")]["proxy"]
    assert bidi["calls"] == 1 and bidi["req_messages"] == bidi["resp_messages"] == 2000
    # Envoy's split in µs for every step, streams included: every call had an upstream exchange, and it took
    # time (x-envoy-upstream-service-time, whole ms, read 0 for most steps); the report prints it in µs.
    no_split = {step: {k: s["proxy"][k] for k in ("calls", "split_calls", "upstream_p50_us", "in_envoy_p50_us")}
                for step, s in by_step.items()
                if not (s["proxy"]["split_calls"] == s["proxy"]["calls"] and s["proxy"]["upstream_p50_us"] > 0
                        and s["proxy"]["in_envoy_p50_us"] >= 0)}
    assert not no_split, no_split
    assert bidi["upstream_p50_us"] > 20 * bidi["in_envoy_p50_us"], bidi  # its 2000 round trips are inside the exchange
    assert report.count("| upstream µs (median / avg) | in Envoy µs (median / avg) |") == 5
    for exp in ("E1", "E2", "E4", "E5"):
        reading = report.split(f"## {exp} — ", 1)[1].split("### Reading", 1)[1].split("\n## ", 1)[0]
        assert " µs upstream, " in reading and "µs in Envoy), medians" in reading, (exp, reading)
    # Every run is recorded in wirelens.runs with its end and the client's summary.
    recorded = stack.clickhouse_query(local_stack, "SELECT run_id, client_summary FROM wirelens.runs FINAL "
                                                   "WHERE ended IS NOT NULL AND scenario LIKE 'e_' FORMAT JSONEachRow")
    summaries = {r["run_id"]: json.loads(r["client_summary"]) for r in map(json.loads, recorded.splitlines())}
    for m in runs:
        assert summaries[m[3]]["calls"] == n(m[4]), m[3]
    assert path.with_suffix(".json").exists()
