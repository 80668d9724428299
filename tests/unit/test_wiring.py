"""envoy/wiring.py is the one library of Envoy fragments, envoy/plugin_settings.py the one check of the filter's settings.

The local template (envoy/envoy.yaml.tmpl) keeps its hand-laid YAML (comments,
anchors, byte-identical output), so its filter, tracer and Collector cluster are
checked here against the fragments: a change to one without the other fails.
"""

from __future__ import annotations

import json

import pytest
from ruamel.yaml import YAML

from deploy.local import stack
from envoy import plugin_settings, render, wiring


def _local_config(tmp_path, module: str = "wasm", code: str = "f.wasm") -> tuple[dict, dict, str]:
    settings = stack.load_settings({})
    plugin_config = {"operations": [], "sample_rate": 0.5}
    text = render.render(settings, tmp_path / code, json.dumps(plugin_config), tmp_path / "d.pb", module=module)
    return YAML(typ="safe").load(text), settings, wiring.plugin_configuration(plugin_config)


@pytest.mark.parametrize("module, code", [("wasm", "f.wasm"), ("native", "libwirelens.so")])
def test_the_local_template_is_the_fragments(tmp_path, module, code):
    config, settings, configuration = _local_config(tmp_path, module, code)
    listeners = {listener["name"]: listener["filter_chains"][0]["filters"][0]["typed_config"]
                 for listener in config["static_resources"]["listeners"]}
    transcoded_configuration = wiring.plugin_configuration({**json.loads(configuration), "rest_transcoded": True})
    expected_filters = {
        "wirelens_ingress": wiring.http_filter(module, configuration, tmp_path / code),
        "wirelens_transcoded": wiring.http_filter(module, transcoded_configuration, tmp_path / code,
                                                  config_name="wirelens_transcoded"),
    }
    if module == "wasm":  # the fragment library's two ways to the same entry
        assert expected_filters["wirelens_ingress"] == wiring.wasm_filter(configuration, tmp_path / code)
    else:
        assert expected_filters["wirelens_ingress"] == wiring.native_filter(configuration, tmp_path / code)
    for name, hcm in listeners.items():
        assert hcm["http_filters"][0] == expected_filters[name], name
        assert len([f for f in hcm["http_filters"] if f["name"] == wiring.FILTER_NAME]) == 1, name
        assert hcm["tracing"] == wiring.tracing(), name
        assert hcm["access_log"] == [wiring.access_logger("otlp", recorded_only=True)], name
    (cluster,) = [c for c in config["static_resources"]["clusters"] if c["name"] == wiring.OTEL_COLLECTOR_CLUSTER]
    assert cluster == wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1",
                                          int(settings["WIRELENS_COLLECTOR_OTLP_PORT"]))


@pytest.mark.parametrize("key, bad, good", [
    ("sample_rate", "1.5", 0.25),
    ("grpc_message_max_bytes", plugin_settings.GRPC_MESSAGE_BYTES_MAX + 1, plugin_settings.GRPC_MESSAGE_BYTES_MAX),
    ("counterfactual_rate", "nan", 1.0),
    ("counterfactual_max_bytes", -1, plugin_settings.COUNTERFACTUAL_MAX_BYTES_MAX),
])
def test_every_setting_is_checked_in_one_place(key, bad, good):
    assert plugin_settings.with_settings({"operations": []}, **{key: good}) == {"operations": [], key: good}
    with pytest.raises(ValueError) as error:
        plugin_settings.with_settings({}, **{key: bad})
    assert str(error.value).startswith(f"{key.replace('_', ' ').replace('grpc message max', 'grpc-message')}=")
    assert set(plugin_settings.CHECKS) == set(plugin_settings.DEFAULTS)


def test_the_two_builds_differ_only_in_the_filter_entry(tmp_path):
    """Everything but the wirelens http_filters entry is the same config for both builds: the access
    log and span tags read the same filter state (wasm.wirelens.record), so a switch needs no other change."""
    wasm, _, _ = _local_config(tmp_path, "wasm", "f.wasm")
    native, _, _ = _local_config(tmp_path, "native", "libwirelens.so")
    for config in (wasm, native):
        for listener in config["static_resources"]["listeners"]:
            listener["filter_chains"][0]["filters"][0]["typed_config"]["http_filters"].pop(0)
    assert wasm == native
    assert wiring.filter_parts(wiring.native_config("{}", "/m/libwirelens.so")) == (
        "native", "{}", render.Path("/m/libwirelens.so"))
    assert wiring.filter_parts(wiring.wasm_config("wirelens", "{}", "/m/f.wasm"))[0] == "wasm"


def test_a_template_block_of_an_unknown_module_or_unclosed_is_an_error():
    assert render.select_module("a\n#@ module native\nb\n#@ end\nc\n", "wasm") == "a\nc\n"
    assert render.select_module("a\n#@ a note\n#@ module native\nb\n#@ end\n", "native") == "a\nb\n"
    with pytest.raises(ValueError, match="module='rust'"):
        render.select_module("#@ module rust\n#@ end\n", "wasm")
    with pytest.raises(ValueError, match="no `#@ end`"):
        render.select_module("#@ module native\nb\n", "wasm")
    with pytest.raises(ValueError, match="module='lua'"):
        render.render(stack.load_settings({}), render.Path("/f"), "{}", render.Path("/d"), module="lua")


def test_the_local_stack_picks_the_build_by_a_checked_setting(tmp_path):
    assert stack.load_settings({})["WIRELENS_FILTER_MODULE"] == "wasm"
    assert stack.load_settings({"WIRELENS_FILTER_MODULE": "native"})["WIRELENS_FILTER_MODULE"] == "native"
    with pytest.raises(stack.StackError, match="WIRELENS_FILTER_MODULE='rust': expected one of wasm, native"):
        stack.load_settings({"WIRELENS_FILTER_MODULE": "rust"})
