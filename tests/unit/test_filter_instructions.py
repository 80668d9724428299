"""Unit tests of bench/filter_instructions.py's bookkeeping: differences, dumps, the summary line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import filter_instructions as fi  # noqa: E402
import run_all  # noqa: E402


def _measured(per_call: dict[str, dict[str, float]]) -> list:
    out = []
    for variant, by_load in per_call.items():
        m = fi.Measured(variant, None, 0, 0)
        m.results = {load: {"calls": 2000, "instructions": v * 2000, "per_call": v}
                     for load, v in by_load.items()}
        out.append(m)
    return out


def test_differences_are_against_empty_and_none_per_load():
    summary = fi.summarize(_measured({
        "none": {"rest": 90_000, "grpc": 190_000},
        "empty": {"rest": 110_000, "grpc": 211_000},
        "wirelens": {"rest": 130_000, "grpc": 250_000},
        "candidate": {"rest": 125_000},
    }), ["rest", "grpc"])
    rest, grpc = summary["differences"]["rest"], summary["differences"]["grpc"]
    assert rest["wirelens"]["over_empty"] == 20_000
    assert rest["wirelens"]["over_none"] == 40_000
    assert rest["wirelens"]["capacity_vs_none"] == pytest.approx(90 / 130)
    assert rest["empty"] == {"over_none": 20_000, "capacity_vs_none": pytest.approx(90 / 110)}
    assert rest["candidate"]["over_empty"] == 15_000
    assert grpc["wirelens"]["over_empty"] == 39_000
    assert "candidate" not in grpc  # not measured with that load


def test_a_missing_baseline_leaves_the_difference_unknown():
    summary = fi.summarize(_measured({"wirelens": {"rest": 130_000}}), ["rest"])
    assert summary["differences"]["rest"]["wirelens"] == {
        "over_empty": None, "over_none": None, "capacity_vs_none": None}


def test_the_new_dump_is_read_not_an_older_one(tmp_path, monkeypatch):
    monkeypatch.setattr(fi, "WORK_DIR", tmp_path)
    env = fi.CallgrindEnvoy("v", {}, 0, 0)
    (tmp_path / "callgrind.v.1").write_text("events: Ir\ntotals: 111\n")
    calls = []

    def fake_control(*args):
        calls.append(args)
        (tmp_path / "callgrind.v.2").write_text("events: Ir\nsummary: 999\ntotals: 222\n")

    monkeypatch.setattr(env, "control", fake_control)
    assert env.dump_instructions() == 222
    assert calls == [("--dump",)]


def test_run_all_summarizes_the_results_file():
    data = {"meta": {"requests": 2000, "quick": False, "wasm": {"wirelens": {"sha256": "abc"}}},
            "summary": fi.summarize(_measured({
                "none": {"rest": 90_000}, "empty": {"rest": 110_000}, "wirelens": {"rest": 130_000}}),
                ["rest"]),
            "problems": []}
    lines = run_all.filter_instructions_summary(json.loads(json.dumps(data)))
    assert lines[1] == ("rest  instructions/call none 90.0k, empty 110.0k, wirelens 130.0k: "
                        "wirelens over empty +20.0k, capacity vs none 0.692")
