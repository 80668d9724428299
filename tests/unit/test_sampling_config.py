"""The sample rate from the settings to the filter, and the access log that follows it.

Below rate 1 the wirelens access log gets a CEL filter that passes only calls
carrying the filter's record (envoy/wiring.py, "Sampling"); at 1 it has none,
so every call Envoy serves is logged as before. The same holds for configs
`wirelens inject` writes. Real Envoy runs these configs in
tests/e2e/test_sampling.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from envoy import inject
from envoy import render, wiring
from deploy.local import stack
from tests.unit.test_inject import FRONT_PROXY, hcm_of, load, run  # the same user config and helpers

ROOT = Path(__file__).resolve().parents[2]


def hcms(text: str) -> list[dict]:
    config = YAML(typ="safe").load(text)
    return [chain["filters"][0]["typed_config"] for listener in config["static_resources"]["listeners"]
            for chain in listener["filter_chains"]]


def rendered(tmp_path, plugin_config: dict, **kwargs) -> list[dict]:
    return hcms(render.render(stack.load_settings({}), tmp_path / "f.wasm", json.dumps(plugin_config),
                              tmp_path / "d.pb", access_log="file", access_log_path=tmp_path / "a.jsonl", **kwargs))


def plugin_configs(managers: list[dict]) -> list[dict]:
    return [json.loads(h["http_filters"][0]["typed_config"]["config"]["configuration"]["value"]) for h in managers]


def test_below_rate_1_both_listeners_log_only_recorded_calls(tmp_path):
    managers = rendered(tmp_path, {"operations": []}, sample_rate=0.1)
    assert plugin_configs(managers) == [{"operations": [], "sample_rate": 0.1},
                                        {"operations": [], "sample_rate": 0.1, "rest_transcoded": True}]
    for hcm in managers:
        (log,) = hcm["access_log"]
        assert log["filter"] == {"extension_filter": {
            "name": "envoy.access_loggers.extension_filters.cel",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
                "expression": "'wasm.wirelens.record' in filter_state"}}}


def test_at_rate_1_every_call_is_logged_as_before(tmp_path):
    for kwargs in ({}, {"sample_rate": 1.0}):
        for hcm in rendered(tmp_path, {"operations": []}, **kwargs):
            (log,) = hcm["access_log"]
            assert "filter" not in log, kwargs
    # without an override the plugin configuration is embedded as it was given
    assert plugin_configs(rendered(tmp_path, {"operations": []}))[0] == {"operations": []}


def test_a_rate_in_the_plugin_configuration_counts_too(tmp_path):
    for hcm in rendered(tmp_path, {"operations": [], "sample_rate": 0.25}):
        assert "filter" in hcm["access_log"][0]
    # an override wins over the configuration's rate
    for hcm in rendered(tmp_path, {"operations": [], "sample_rate": 0.25}, sample_rate=1):
        assert "filter" not in hcm["access_log"][0]
    # null, a boolean or a rate the filter refuses (it names the field itself) change nothing here
    for rate in (None, True, 2):
        assert "filter" not in rendered(tmp_path, {"sample_rate": rate})[0]["access_log"][0]


def test_a_bad_rate_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"sample rate=1\.5: expected a number in \[0, 1\]"):
        rendered(tmp_path, {}, sample_rate=1.5)
    with pytest.raises(stack.StackError, match=r"WIRELENS_SAMPLE_RATE='ten': expected a number in \[0, 1\]"):
        stack.load_settings({"WIRELENS_SAMPLE_RATE": "ten"})
    assert stack.load_settings({})["WIRELENS_SAMPLE_RATE"] == "1"
    assert stack.load_settings({"WIRELENS_SAMPLE_RATE": "0.1"})["WIRELENS_SAMPLE_RATE"] == "0.1"
    with pytest.raises(SystemExit):
        render.main(["--wasm", "w", "--plugin-config", str(ROOT / "build" / "opmap.json"),
                     "--descriptor-set", "d", "--sample-rate", "-1"])


def test_inject_with_a_sample_rate_below_1_filters_its_access_log(tmp_path, capsys):
    wasm = tmp_path / "wirelens_filter.wasm"
    wasm.write_bytes(b"\0asm\1\0\0\0")
    source = tmp_path / "envoy.yaml"
    source.write_text(FRONT_PROXY)
    code, out, err = run([str(source), "--wasm", str(wasm), "--sample-rate", "0.1"], capsys)
    assert code == 0, err
    ours = [log for log in hcm_of(load(out))["access_log"] if log["name"] == inject.ACCESS_LOG_NAME]
    assert [log.get("filter") for log in ours] == [wiring.recorded_calls_filter()]
    assert "only calls the filter sampled" in err
    (tmp_path / "injected.yaml").write_text(out)
    assert run([str(tmp_path / "injected.yaml"), "--remove"], capsys)[1] == FRONT_PROXY

    code, out, err = run([str(source), "--wasm", str(wasm)], capsys)
    assert code == 0, err
    ours = [log for log in hcm_of(load(out))["access_log"] if log["name"] == inject.ACCESS_LOG_NAME]
    assert len(ours) == 1 and "filter" not in ours[0]


def test_update_ecds_says_the_bootstraps_access_log_keeps_its_filter(tmp_path, capsys):
    wasm = tmp_path / "wirelens_filter.wasm"
    wasm.write_bytes(b"\0asm\1\0\0\0")
    source, ecds = tmp_path / "envoy.yaml", tmp_path / "ecds"
    source.write_text(FRONT_PROXY)
    assert run([str(source), "--wasm", str(wasm), "--ecds-dir", str(ecds)], capsys)[0] == 0
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--sample-rate", "0.1"], capsys)
    assert code == 0, err
    assert "keeps its injected filter" in err and "inject again with --sample-rate 0.1" in err
    code, _, err = run(["--update-ecds", "--ecds-dir", str(ecds), "--sample-rate", "0.2"], capsys)
    assert code == 0 and "keeps its injected filter" not in err  # still sampled: nothing to say
