"""Unit tests of bench/filter_instructions.py's bookkeeping: differences, targets, dumps, the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import filter_instructions as fi
from bench import harness, run_all
from envoy import wiring

ROOT = Path(__file__).resolve().parents[2]


def _measured(per: dict[str, dict[str, float]]) -> list:
    """Variants with instructions per call (per message for `stream`)."""
    out = []
    for variant, by_load in per.items():
        base = variant.split("+")[0]
        m = fi.Measured(variant, base, variant[len(base):], None, 0, 0)
        for load, v in by_load.items():
            if load == "stream":
                m.results[load] = {"calls": 5, "messages": 10_000, "instructions": v * 10_000,
                                   "per_call": v * 2000, "per_message": v}
            else:
                m.results[load] = {"calls": 2000, "instructions": v * 2000, "per_call": v}
        out.append(m)
    return out


def test_differences_are_against_empty_and_none_of_the_same_shape():
    summary = fi.summarize(_measured({
        "none": {"rest": 90_000},
        "none+exp": {"rest": 300_000, "grpc": 400_000},
        "empty+exp": {"rest": 320_000, "grpc": 420_000},
        "wirelens+exp": {"rest": 330_000, "grpc": 460_000},
        "wirelens+otlp": {"rest": 500_000},
        "candidate+exp": {"rest": 325_000},
    }), ["rest", "grpc"])
    d = summary["differences"]
    assert d["wirelens+exp"]["rest"]["over_empty"] == 10_000
    assert d["wirelens+exp"]["rest"]["over_none"] == 30_000
    assert d["wirelens+exp"]["rest"]["capacity_vs_none"] == pytest.approx(300 / 330)
    assert d["empty+exp"]["rest"]["over_empty"] is None
    assert d["empty+exp"]["rest"]["capacity_vs_none"] == pytest.approx(300 / 320)
    assert d["candidate+exp"]["rest"]["over_empty"] == 5_000
    assert "grpc" not in d["candidate+exp"]  # not measured with that load
    # No none+otlp or empty+otlp: the other shape's baselines are never used.
    assert d["wirelens+otlp"]["rest"] == {"over_none": None, "over_empty": None, "capacity_vs_none": None}


def test_targets_per_filter_build_in_the_exp_shape():
    summary = fi.summarize(_measured({
        "none+exp": {"rest": 300_000, "grpc": 400_000, "stream": 5_000},
        "empty+exp": {"rest": 320_000, "grpc": 420_000, "stream": 6_000},
        "wirelens+exp": {"rest": 330_000, "grpc": 460_000, "stream": 10_000},
        "lever+exp": {"rest": 332_000},
    }), ["rest", "grpc", "stream"])
    t = {x["target"]: x["pass"] for x in summary["targets"]["wirelens+exp"]}
    assert t == {
        "whole pipeline rest: none+exp / wirelens+exp": True,     # 0.909
        "whole pipeline grpc: none+exp / wirelens+exp": False,    # 0.870
        "filter alone rest: wirelens+exp - empty+exp per call": True,   # 10k <= 15k
        "filter alone grpc: wirelens+exp - empty+exp per call": False,  # 40k > 30k
        "streamed message: wirelens+exp - empty+exp per message": False,  # 4k > 3k
    }
    assert [x["pass"] for x in summary["targets"]["lever+exp"]] == [True, True]  # 0.904, 12k
    assert "none+exp" not in summary["targets"] and "empty+exp" not in summary["targets"]


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


def test_the_stream_file_holds_echo_requests():
    frame = harness.STREAM_FRAME
    assert frame[0] == 0 and int.from_bytes(frame[1:5], "big") == len(frame) - 5
    assert frame[5:7] == bytes([0x0A, len(harness.STREAM_CONTENT)]) and frame[7:] == harness.STREAM_CONTENT
    assert harness.echo_message(b"x" * 300)[:3] == b"\x0a\xac\x02"  # a two-byte length varint


def _hcm(config: dict) -> dict:
    return config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


def test_the_benchmarks_measure_the_shipped_fragments(tmp_path):
    """Every benchmark config takes the filter, access log, tracer and Collector cluster from envoy/wiring.py."""
    hcm = _hcm(harness.pipeline_config(tmp_path / "f.wasm", '{"operations": []}', "file", 1, 2, 3, 4, 5,
                                       tmp_path / "a.jsonl", "n"))
    assert hcm["access_log"] == [wiring.access_logger("file", str(tmp_path / "a.jsonl"))]
    assert hcm["tracing"] == wiring.tracing()
    assert hcm["http_filters"][0] == wiring.wasm_filter('{"operations":[]}', tmp_path / "f.wasm")
    otlp = harness.pipeline_config(None, "{}", "otlp", 1, 2, 3, 4, 5, None, "n")
    assert _hcm(otlp)["access_log"] == [wiring.access_logger("otlp")]
    assert wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1", 5) | {"connect_timeout": "10s"} in \
        otlp["static_resources"]["clusters"]
    for upstream in ("mixed", "envoy", "direct"):
        measured = harness.measured_config(tmp_path / "f.wasm", '{"sample_rate": 0.5}', True, upstream,
                                           1, 2, 3, "n")
        hcm = _hcm(measured)
        # The access log as shipped: no request path in its body (issue 28), only sampled calls below rate 1.
        assert hcm["access_log"] == [wiring.access_logger("otlp", recorded_only=True)]
        assert "%REQ(:PATH)%" not in json.dumps(measured)
        assert hcm["tracing"] == wiring.tracing()
        assert hcm["http_filters"][0] == wiring.wasm_filter('{"sample_rate":0.5}', tmp_path / "f.wasm")
        assert wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1", 3) in \
            measured["static_resources"]["clusters"]
        assert "tracing" not in _hcm(harness.measured_config(None, "{}", False, upstream, 1, 2, 3, "n"))


def test_run_all_summarizes_the_results_file():
    data = {"meta": {"requests": 2000, "streams": 5, "stream_messages": 1000, "quick": False,
                     "wasm": {"wirelens": {"sha256": "abc"}}},
            "summary": fi.summarize(_measured({
                "none+exp": {"rest": 300_000}, "empty+exp": {"rest": 320_000},
                "wirelens+exp": {"rest": 330_000}}), ["rest"]),
            "memory": {"stream_bytes": 1 << 30, "extra_growth_kib": 512, "pass": True},
            "problems": []}
    lines = run_all.filter_instructions_summary(json.loads(json.dumps(data)))
    assert lines[3] == "wirelens+exp     REST/call 330.0k (+10.0k over empty)"
    assert any(line.strip().startswith("whole pipeline rest") and line.endswith("PASS") for line in lines)
    assert lines[-1].endswith("+512 KiB <= 1,024 KiB PASS")


def test_the_counterfactual_costs_per_sampled_call():
    """whatif (rate 1) over wirelens (a share already sampled), per call sampled; no target for whatif."""
    summary = fi.summarize(_measured({
        "none+exp": {"rest": 300_000, "grpc": 400_000},
        "wirelens+exp": {"rest": 330_000, "grpc": 460_000, "stream": 10_000},
        "whatif+exp": {"rest": 429_000, "grpc": 480_000, "stream": 13_960},
    }), ["rest", "grpc", "stream"], base_rate=0.01)
    assert summary["counterfactual_per_sampled_call"] == {
        "whatif+exp": {"rest": 100_000, "grpc": 20_202, "stream": 4_000}}
    assert "whatif+exp" not in summary["targets"]
    assert fi.counterfactual_rate('{"operations": []}') == 0.01
    assert fi.counterfactual_rate('{"counterfactual_rate": 0}') == 0
    assert json.loads(fi.whatif_config('{"operations": [], "counterfactual_rate": 0}'))["counterfactual_rate"] == 1
