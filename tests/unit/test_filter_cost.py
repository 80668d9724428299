"""Unit tests of bench/filter_cost.py's bookkeeping: paired comparisons and --compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import filter_cost

ROOT = Path(__file__).resolve().parents[2]


def _runs(cpu_by_variant: dict[str, list[float]]) -> tuple[list, list]:
    targets = {v: filter_cost.Target(v, v, False, envoy=None) for v in cpu_by_variant}
    runs = []
    for variant, per_rep in cpu_by_variant.items():
        for rep, cpu in enumerate(per_rep):
            record = {"rps": 1e6 / cpu, "envoy_cpu_us_per_call": cpu, "envoy_system_us_per_call": 0.0,
                      "upstream_cpu_us_per_call": 0.0,
                      "tool_cpu_us_per_call": 0.0, "other_cores": 0.0}
            runs.append(filter_cost.Run(rep, "wrk", targets[variant], record))
    return runs, list(targets.values())


def test_compared_builds_are_paired_with_empty_per_repetition():
    runs, targets = _runs({"none": [20, 20, 20], "empty": [24, 23, 25], "wirelens": [29, 28, 31],
                           "candidate": [27, 26, 27]})
    comp = filter_cost.summarize(runs, targets, reps=3)["comparisons"]["wrk"]["off"]
    assert comp["added_cpu_us_wirelens_over_empty"]["per_rep"] == [5, 5, 6]
    assert comp["added_cpu_us_wirelens_over_empty"]["median"] == 5
    assert comp["verdict_added_cpu"] == "MIXED (2 of 3 repetitions meet it)"
    assert comp["compared"] == ["candidate"]
    assert comp["added_cpu_us_candidate_over_empty"]["per_rep"] == [3, 3, 2]
    assert comp["throughput_candidate_over_none"]["median"] == pytest.approx(20 / 27)


def test_a_target_every_repetition_meets_passes_and_one_none_meets_fails():
    runs, targets = _runs({"none": [20, 20, 20], "empty": [24, 23, 25], "wirelens": [26, 27, 28]})
    comp = filter_cost.summarize(runs, targets, reps=3)["comparisons"]["wrk"]["off"]
    assert comp["verdict_added_cpu"] == "PASS"
    assert comp["verdict_throughput"] == "FAIL"


@pytest.mark.parametrize("spec, message", [
    ("wirelens=/dev/null", "new lower-case NAME"),
    ("nopath", "expected NAME=PATH"),
    ("x=/no/such/file.wasm", "is not a file"),
])
def test_a_bad_compare_names_the_flag(spec, message, capsys):
    with pytest.raises(SystemExit) as exc:
        filter_cost.main(["--compare", spec])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--compare" in err and message in err
