"""Unit tests of bench/filter_instructions.py's bookkeeping: differences, targets, dumps, the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import filter_instructions as fi
from bench import harness, run_all, stream_memory
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


def test_targets_of_issue_29_per_build_kind_and_shape():
    summary = fi.summarize(_measured({
        "none+exp": {"rest": 300_000, "grpc": 400_000, "stream": 5_000},
        "empty+exp": {"rest": 320_000, "grpc": 420_000, "stream": 6_000},
        "wirelens+exp": {"rest": 350_000, "grpc": 500_000, "stream": 10_500},
        "native+exp": {"rest": 315_000, "grpc": 430_000, "stream": 6_000},
        "lever+exp": {"rest": 360_000},
        "none+exp1pct": {"rest": 200_000, "grpc": 300_000},
        "wirelens+exp1pct": {"rest": 230_000, "grpc": 370_000},
        "none": {"rest": 100_000, "grpc": 200_000, "stream": 2_000},
        "native": {"rest": 111_000, "grpc": 221_000, "stream": 3_400},
        "wirelens": {"rest": 130_000},
    }), ["rest", "grpc", "stream"])
    t = {v: {x["target"]: x["pass"] for x in ts} for v, ts in summary["targets"].items()}
    assert t["wirelens+exp"] == {
        "wasm whole pipeline rest: none+exp / wirelens+exp": True,     # 0.857 >= 0.84
        "wasm whole pipeline grpc: none+exp / wirelens+exp": False,    # 0.800 < 0.82
        "wasm streamed message: wirelens+exp - empty+exp per message": False,  # 4.5k > 4k
    }
    assert t["native+exp"] == {
        "native whole pipeline rest: none+exp / native+exp": True,     # 0.952 >= 0.94
        "native whole pipeline grpc: none+exp / native+exp": False,    # 0.930 < 0.94
    }
    assert t["wirelens+exp1pct"] == {
        "wasm whole pipeline rest (1 % traced): none+exp1pct / wirelens+exp1pct": True,   # 0.870
        "wasm whole pipeline grpc (1 % traced): none+exp1pct / wirelens+exp1pct": False,  # 0.811
    }
    assert t["native"] == {
        "native filter alone rest: native - none per call": True,         # 11k <= 12k
        "native filter alone grpc: native - none per call": False,        # 21k > 20k
        "native filter alone stream: native - none per message": True,    # 1.4k <= 1.5k
    }
    assert t["lever+exp"] == {"wasm whole pipeline rest: none+exp / lever+exp": False}  # 0.833
    # No targets for the baselines or for Wasm without exporters; no -empty column for native.
    assert set(t) == {"wirelens+exp", "native+exp", "wirelens+exp1pct", "native", "lever+exp"}
    assert summary["differences"]["native+exp"]["rest"]["over_empty"] is None
    assert summary["differences"]["native"]["stream"]["over_none"] == pytest.approx(1_400)
    lines = fi.target_lines(summary)
    assert lines[0].startswith("wasm whole pipeline rest: none+exp / wirelens+exp") and lines[0].endswith("PASS")
    assert any("0.857" in line and ">= 0.84" in line for line in lines)
    assert any("+1.4k" in line and "<= 1,500" in line for line in lines)


def test_a_compared_so_is_a_native_build():
    m = fi.Measured("n2+exp", "n2", "+exp", Path("/x/native-n2/libwirelens.so"), 0, 0)
    assert m.kind == "native"
    assert fi.Measured("old+exp", "old", "+exp", Path("/x/old.wasm"), 0, 0).kind == "wasm"
    assert fi.module_kind("whatif", Path("/x/w.wasm")) == "whatif"
    assert fi.module_kind("probe-clock", None) == "probe"


def test_the_price_splits_into_the_filter_alone_and_the_records_export():
    summary = fi.summarize(_measured({
        "none+exp": {"rest": 300_000, "grpc": 400_000},
        "native+exp": {"rest": 320_000, "grpc": 430_000},
        "none+exp1pct": {"rest": 200_000},
        "native+exp1pct": {"rest": 212_000},
        "none": {"rest": 100_000, "grpc": 200_000},
        "native": {"rest": 108_000, "grpc": 210_000},
    }), ["rest", "grpc"])
    share = summary["export_share"]
    assert share["native+exp"]["rest"] == {
        "price": 20_000, "alone": 8_000, "export": 12_000, "export_share": 0.6,
        "exporters_without_record": 200_000, "exporters_with_record": 212_000}
    assert share["native+exp"]["grpc"]["export"] == 20_000
    assert share["native+exp1pct"]["rest"]["export"] == 4_000
    assert set(share) == {"native+exp", "native+exp1pct"}  # not the baselines, not without exporters
    lines = fi.export_lines(summary)
    assert lines[0] == ("native+exp       REST +20.0k = alone +8.0k + export +12.0k (60%); "
                        "gRPC +30.0k = alone +10.0k + export +20.0k (67%)")


def test_the_default_variants():
    assert fi.default_variants("both", [], native=True) == [
        "none+exp", "empty+exp", "wirelens+exp", "native+exp", "whatif+exp",
        "none+exp1pct", "wirelens+exp1pct", "native+exp1pct", "none", "wirelens", "native"]
    assert fi.default_variants("on", ["old"], native=False, otlp=True) == [
        "none+exp", "empty+exp", "wirelens+exp", "old+exp", "whatif+exp", "none+exp1pct",
        "wirelens+exp1pct", "old+exp1pct", "none+otlp", "wirelens+otlp"]
    assert fi.default_variants("off", [], native=True) == ["none", "empty", "wirelens", "native"]
    cfg = json.loads(fi.with_counterfactual_rate('{"operations": [], "counterfactual_rate": 0.5}', 0))
    assert cfg == {"operations": [], "counterfactual_rate": 0}


def test_the_native_filter_entry_and_its_module(tmp_path):
    so = tmp_path / "build" / "libwirelens.so"
    so.parent.mkdir()
    so.write_bytes(b"\x7fELF")
    pinned = harness.pin_module(so, tmp_path / "work", "native")
    assert pinned == tmp_path / "work" / "native-native" / "libwirelens.so" and pinned.read_bytes() == b"\x7fELF"
    assert harness.pin_module(tmp_path / "work" / "native-native" / "libwirelens.so", tmp_path / "w2", "n") \
        .name == "libwirelens.so"
    hcm = _hcm(harness.pipeline_config(pinned, '{"operations": []}', "file", 1, 2, 3, 4, 5,
                                       tmp_path / "a.jsonl", "n"))
    # The shipped fragment, loading the pinned copy by its absolute path.
    assert hcm["http_filters"][0] == wiring.native_filter('{"operations":[]}', pinned.resolve())
    assert harness.is_native(pinned) and not harness.is_native(tmp_path / "f.wasm") and not harness.is_native(None)
    assert [f["name"] for f in hcm["http_filters"][1:]] == ["envoy.filters.http.grpc_web", "envoy.filters.http.router"]


def test_the_filter_alone_and_the_sampled_tracing_shapes(tmp_path):
    bare = _hcm(harness.pipeline_config(None, "{}", None, 1, 2, 3, 4, 5, None, "n"))
    assert "tracing" not in bare and "access_log" not in bare
    assert [r["route"]["cluster"] for r in bare["route_config"]["virtual_hosts"][0]["routes"]] == \
        ["grpc_service", "rest_service"]  # the same Go services as with the exporters
    sampled = _hcm(harness.pipeline_config(None, "{}", "file", 1, 2, 3, 4, 5, tmp_path / "a.jsonl", "n",
                                           tracing_percent=1))
    assert sampled["tracing"] == wiring.tracing(sampling=1)
    assert sampled["tracing"]["random_sampling"] == {"value": 1}


def test_memory_verdicts_per_build():
    def rec(growth, cold=50_000, total=52_000):
        return {"growth_kib": growth, "cold": {"growth_kib": cold}, "total_growth_kib": total}
    v = stream_memory.verdicts({"none+exp": rec(100), "wirelens+exp": rec(900, 40_000),
                                "native+exp": rec(1_200, total=51_000)})
    assert v == {"wirelens": {"extra_growth_kib": 800, "pass": True, "cold_extra_kib": -10_000,
                              "total_extra_kib": 0, "warm_total_extra_kib": 0},
                 "native": {"extra_growth_kib": 1_100, "pass": False, "cold_extra_kib": 0,
                            "total_extra_kib": -1_000, "warm_total_extra_kib": 0}}
    assert stream_memory.stream_runs(4) == ("cold", "warm1", "warm2", "warm3", "warm4")
    assert stream_memory.verdicts({"wirelens+exp": rec(1)}) == {}
    lines = stream_memory.verdict_lines({"stream_bytes": 1 << 30, "verdicts": v})
    assert lines[1].startswith("memory: 1.00 GiB stream, native+exp - none+exp") and lines[1].endswith("FAIL")


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
                     "wasm": {"wirelens": {"sha256": "abc"}, "native": {"sha256": "def"}}},
            "summary": fi.summarize(_measured({
                "none+exp": {"rest": 300_000}, "empty+exp": {"rest": 320_000},
                "wirelens+exp": {"rest": 330_000}, "native+exp": {"rest": 310_000},
                "none": {"rest": 100_000}, "native": {"rest": 105_000}}), ["rest"]),
            "memory": {"stream_bytes": 1 << 30, "verdicts": {
                "wirelens": {"extra_growth_kib": 512, "pass": True},
                "native": {"extra_growth_kib": 2048, "pass": False}}},
            "problems": []}
    lines = run_all.filter_instructions_summary(json.loads(json.dumps(data)))
    assert lines[0].endswith("wirelens abc, native def")
    assert lines[3] == "wirelens+exp     REST/call 330.0k (+10.0k over empty)"
    assert lines[4] == "native+exp       REST/call 310.0k (+10.0k over none)"
    assert any(line.strip().startswith("native+exp") and "export +5.0k (50%)" in line for line in lines)
    assert any(line.strip().startswith("wasm whole pipeline rest") and line.endswith("PASS") for line in lines)
    assert any(line.strip().startswith("native filter alone rest") and line.endswith("PASS") for line in lines)
    assert lines[-2].endswith("+512 KiB <= 1,024 KiB PASS")
    assert "native+exp - none+exp" in lines[-1] and lines[-1].endswith("+2,048 KiB <= 1,024 KiB FAIL")
    # A results file from before issue 29 (one memory verdict, the Wasm build's).
    data["memory"] = {"stream_bytes": 1 << 30, "extra_growth_kib": 512, "pass": True}
    assert run_all.filter_instructions_summary(data)[-1].endswith("+512 KiB <= 1,024 KiB PASS")


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
